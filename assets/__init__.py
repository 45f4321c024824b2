"""Thin Dagster asset definitions, one module per stage of the chunking pipeline."""

import warnings

from dagster import BetaWarning

# `backfill_policy` is beta in Dagster 1.13; we chose it knowingly (see assets/partitions.py).
warnings.filterwarnings("ignore", message=".*backfill_policy.*", category=BetaWarning)
