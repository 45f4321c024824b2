"""A synthetic vector corpus for dense-search benchmarks: its size arguments, and queries that
land near one collection's vectors (each one of them plus noise, normalised), so a search of that
collection has true neighbours to find."""

from __future__ import annotations

import argparse
import contextlib
from collections.abc import Iterator

import numpy as np

from benchmarks.database import benchmark_server
from seams.resources.database import DATA_DATABASE, database_url_for
from seams.resources.postgres import PostgresResource, close_pool
from tests.storage.test_vector_indexes import unit_vectors

MODEL = "bench-model"
MODE = "text"
POOL = 40
"""The pool of nearest chunks a search reads."""


def arguments(parser: argparse.ArgumentParser) -> None:
    """`--rows` vectors of `--dimension`, `--share` of them in the searched collection, and
    `--queries` queries."""
    parser.add_argument("--rows", type=int, default=50_000)
    parser.add_argument("--share", type=float, default=0.02)
    parser.add_argument("--dimension", type=int, default=384)
    parser.add_argument("--queries", type=int, default=30)


def probes(own: np.ndarray, count: int, dimension: int) -> np.ndarray:
    """`count` unit queries, each near one of `own`'s vectors."""
    noise = unit_vectors(count, dimension, seed=3)
    queries = own[np.arange(count) * 7 % len(own)] + 0.5 * noise
    return (queries / np.linalg.norm(queries, axis=1, keepdims=True)).astype(np.float32)


@contextlib.contextmanager
def database(prefix: str) -> Iterator[tuple[str, PostgresResource]]:
    """A throwaway embedded PostgreSQL with Seams' schema: its URL and the owner's resource (one
    connection)."""
    with benchmark_server(prefix) as server:
        url = database_url_for(server.start(), DATA_DATABASE)
        postgres = PostgresResource(url=url, max_connections=1)
        postgres.ensure_schema()
        try:
            yield url, postgres
        finally:
            close_pool(url)
