"""Logging shared by every layer: a library's chatty logger held back for one block."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator


@contextlib.contextmanager
def quieted(name: str | None) -> Iterator[None]:
    """Within the block, the logger `name` (None: the root logger) says errors only: for a
    library that logs what Seams reports its own way, or hints that concern no user."""
    logger = logging.getLogger(name)
    level = logger.level
    logger.setLevel(logging.ERROR)
    try:
        yield
    finally:
        logger.setLevel(level)
