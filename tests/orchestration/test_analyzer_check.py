"""`retrieval.text_search_config` is checked against the database before a run, backfill or
check does any work: an analyzer PostgreSQL lacks is one line naming the field (a collection's
own too), not a failure at the index step after everything before it."""

from __future__ import annotations

from pathlib import Path

import pytest

from seams.errors import ConfigError
from seams.orchestration.cli.db import check_analyzers
from seams.resources.postgres import PostgresResource
from seams.settings import SeamsSettings


def test_an_analyzer_postgresql_lacks_is_one_line_naming_the_field(
    postgres: PostgresResource, tmp_path: Path
) -> None:
    check_analyzers(postgres, SeamsSettings())  # english
    check_analyzers(
        postgres, SeamsSettings.model_validate({"retrieval": {"text_search_config": "simple"}})
    )
    with pytest.raises(ConfigError) as top:
        check_analyzers(
            postgres, SeamsSettings.model_validate({"retrieval": {"text_search_config": "klingon"}})
        )
    assert str(top.value).startswith(
        "retrieval.text_search_config='klingon': PostgreSQL has no such text search configuration"
    )
    own = {
        "collections": {
            "notes": {"source": str(tmp_path), "retrieval": {"text_search_config": "klingon"}},
            "docs": {"source": str(tmp_path / "docs")},
        }
    }
    with pytest.raises(ConfigError) as collection:
        check_analyzers(postgres, SeamsSettings.model_validate(own))
    message = str(collection.value)
    assert message.startswith("collections.notes.retrieval.text_search_config='klingon': ")
    assert "\n" not in message
