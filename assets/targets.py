"""One asset per target (`targets:` in seams.yaml): the published chunks mirrored into a store.

`target/<name>` is unpartitioned and downstream of the `chunk_index` of every collection the
target receives: what it mirrors is the whole published state, every batch at once. It is not
part of the per-batch job, so a store that is down fails this asset alone (one line naming the
target and the field) and never holds back a publication in Seams; the next materialization,
or `seams sync`, catches up. `seams run` and `seams backfill` materialize it after they
published; under a daemon its automation condition requests it when an index was written.

The asset does the quick sync (the ledger and the store's ids, `verify=False`); `seams sync`
also reads every stored record and repairs edits made by hand.
"""

from collections.abc import Sequence

import dagster as dg

from seams.assets.display import asset_attributes
from seams.environment import SeamsEnvironment
from seams.errors import SeamsError
from seams.resources.postgres import PostgresResource
from seams.storage.connections import first_line
from seams.storage.targets import open_target
from seams.storage.targets.sync import sync_target
from seams.targets import TargetSettings

TARGETS_GROUP = "targets"
TARGETS_SENSOR = "seams_targets"
AUTOMATION_LABEL = "an index was published"


def target_key(name: str) -> dg.AssetKey:
    return dg.AssetKey(["target", name])


def target_condition() -> dg.AutomationCondition:
    """Request the target once some batch's index was written since it last ran, when no
    index is being written and it is not running."""
    return (
        dg.AutomationCondition.any_deps_updated().since_last_handled()
        & ~dg.AutomationCondition.any_deps_in_progress()
        & ~dg.AutomationCondition.in_progress()
    ).with_label(AUTOMATION_LABEL)


def build_target_asset(
    name: str,
    settings: TargetSettings,
    collections: Sequence[str],
    index_keys: Sequence[dg.AssetKey],
    environment: SeamsEnvironment,
) -> dg.AssetsDefinition:
    """`target/<name>`, downstream of `index_keys` (the receiving collections' indexes)."""
    where = f"${settings.url_env}" if settings.url_env else settings.path

    @dg.asset(
        key=target_key(name),
        deps=sorted(index_keys, key=lambda key: key.path),
        group_name=TARGETS_GROUP,
        **asset_attributes(name, stage="target", kinds=(settings.kind,)),
        automation_condition=target_condition(),
        description=f"The published current chunks of {', '.join(collections)} mirrored into "
        f"{settings.kind} {settings.store_name} ({where}): one record per chunk, its vector, "
        "text and provenance.",
    )
    def target(
        context: dg.AssetExecutionContext, seams_postgres: PostgresResource
    ) -> dg.MaterializeResult:
        try:
            store = open_target(name, settings, environment)
        except SeamsError as exc:
            raise dg.Failure(description=str(exc), allow_retries=False) from None
        try:
            result = sync_target(seams_postgres, name, store, collections)
        except SeamsError:
            raise
        except Exception as exc:  # the store's client failed mid-sync: the next sync resumes
            raise dg.Failure(
                description=f"targets.{name}: the {settings.kind} store failed during the sync "
                f"({first_line(exc)}); the next sync resumes where this one stopped",
                allow_retries=False,
            ) from None
        finally:
            store.close()
        context.log.info(
            f"{name}: wrote {result.written}, deleted {result.deleted}, "
            f"{result.records} records in {result.live}"
        )
        metadata: dict[str, object] = {
            "written": dg.MetadataValue.int(result.written),
            "deleted": dg.MetadataValue.int(result.deleted),
            "dagster/row_count": dg.MetadataValue.int(result.records),
            "live": str(result.live),
            "switched": result.switched,
            "model_id": str(result.model_id),
            "seconds": dg.MetadataValue.float(round(result.seconds, 3)),
        }
        if result.published_seq is not None:
            metadata["published_seq"] = dg.MetadataValue.int(result.published_seq)
        return dg.MaterializeResult(metadata=metadata)

    return target


def build_targets(
    targets: dict[str, tuple[TargetSettings, tuple[str, ...], list[dg.AssetKey]]],
    environment: SeamsEnvironment,
) -> tuple[list[dg.AssetsDefinition], list[dg.SensorDefinition]]:
    """Each target's asset (name -> settings, collections, their index keys) and the sensor
    that evaluates their automation conditions; nothing without targets."""
    if not targets:
        return [], []
    assets = [
        build_target_asset(name, settings, collections, keys, environment)
        for name, (settings, collections, keys) in targets.items()
    ]
    sensor = dg.AutomationConditionSensorDefinition(
        TARGETS_SENSOR,
        target=dg.AssetSelection.assets(*(target_key(name) for name in targets)),
        default_status=dg.DefaultSensorStatus.RUNNING,
        description="Syncs each target after an index was published (targets: in seams.yaml).",
    )
    return assets, [sensor]
