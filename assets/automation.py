"""Declarative automation for settings changes: what `backfill.automatic: true` turns on.

Every per-batch asset's code version folds in the settings that shape it (`assets.versions`), so
after seams.yaml changes and the code location reloads, exactly the affected assets have a new
code version. `AutomationCondition.code_version_changed()` is true on the daemon's first
evaluation after such a reload; with it on the assets, the daemon requests those assets for every
batch by itself, while assets whose settings did not change are left alone.

Off by default: recomputing every batch can be expensive, and people usually want to choose when.
The composition root passes `settings_changed_condition(enabled)` to every asset factory.
"""

from __future__ import annotations

import dagster as dg

AUTOMATION_LABEL = "settings changed"


def settings_changed_condition(enabled: bool) -> dg.AutomationCondition | None:
    """The automation condition of the per-batch assets: None (manual) unless `enabled`.

    When enabled: the asset's code version changed since the last evaluation and it is not
    already being materialized (so a reload during a backfill does not request it twice).
    """
    if not enabled:
        return None
    return (
        dg.AutomationCondition.code_version_changed() & ~dg.AutomationCondition.in_progress()
    ).with_label(AUTOMATION_LABEL)
