"""`orchestration.defs` (contract): the one `Definitions` object of the Seams code location."""

from dagster import Definitions

defs = Definitions(assets=[])
