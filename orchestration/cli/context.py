"""What every command takes from `main`: the settings (`args.settings`) and the environment
(`args.environment`) it resolved once, and the definitions built from them."""

from __future__ import annotations

import argparse

import dagster as dg

from seams.orchestration.definitions import build_definitions


def definitions(args: argparse.Namespace) -> dg.Definitions:
    """The definitions of the settings and environment `main` resolved: the one composition
    root, called once per command."""
    return build_definitions(args.settings, environment=args.environment)
