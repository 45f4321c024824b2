"""Code versions: an asset's own version plus the fingerprint of the settings slice it reads.

Dagster compares code versions to decide what is unsynced. Folding the config slice into them
means a settings change marks exactly the assets that read it (and, through Dagster's staleness
propagation, what lies downstream), while unrelated assets stay fresh.
"""

from __future__ import annotations

import hashlib

from resources.settings import current_settings

SETTINGS = current_settings()
CONFIG = SETTINGS.chunking_config()


def code_version(asset_version: str, *parts: str) -> str:
    """`<asset_version>-<12 hex digits of the parts>`: short enough to read in the UI."""
    digest = hashlib.sha256("\x1f".join(parts).encode("utf-8")).hexdigest()[:12]
    return f"{asset_version}-{digest}"
