"""`retrieval.model` through the whole pipeline: a seams.yaml that names a model folder (a tiny
sentence-transformers model built here from seed 0: WordPiece, mean pooling, a 512-token
window, query/document prompts), a real run through Dagster and PostgreSQL, then search.

The index must hold that model's id and its vectors (sentence-transformers' own `encode` of each
chunk's text with the document prompt), while everything before the index stays the packaged
model's; and `seams search`'s dense side must rank by those vectors.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import dagster as dg
import numpy as np
import pytest

from seams.models.model_store import ModelManifest
from seams.orchestration import runner
from seams.orchestration.definitions import build_definitions
from seams.settings import SeamsSettings
from seams.storage.search import search_response
from tests.support.databases import rows
from tests.support.instances import current_definitions
from tests.support.tiny_models import (
    PROMPTS,
    tiny_bert_folder,
)

# A whole run through Dagster (~25 s here): the slow lane; tests/orchestration's
# test_model_settings.py checks the resolution and code versions in CI's lane.
pytestmark = [pytest.mark.export, pytest.mark.slow]
RIVER = (
    "The river bank was flooded in spring and the town rebuilt the bank. Spring rain made the "
    "river rise over its banks. The river bank was flooded in spring.\n\n"
    "A central bank raised interest rates to slow the economy. A bank raised its rates.\n"
)
MODELS_DOC = (
    "The model reads each token and writes an embedding of the text. Models read the data "
    "quickly. The model reads each token.\n\n"
    "Ein Modell liest die Daten schnell und schreibt Vektoren. Le modèle lit les données et "
    "écrit des vecteurs.\n"
)
QUERIES = ("the river bank in spring", "the model writes an embedding", "the bank raised rates")


@pytest.fixture(scope="module")
def model_folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tiny_bert_folder(
        tmp_path_factory, "your-model", "mean-prompts-512", window=512, prompts=PROMPTS
    )


def _vectors(url: str) -> tuple[list[str], np.ndarray, set[str], set[str]]:
    found = rows(
        url,
        "SELECT c.text, i.embedding::text, i.model_id, i.mode FROM seams.chunk_index i"
        " JOIN seams.chunks c USING (batch_key, chunk_id) ORDER BY c.document_id, c.chunk_index",
    )
    texts = [text for text, *_ in found]
    vectors = np.array([json.loads(vector) for _, vector, *_ in found], np.float32)
    return texts, vectors, {m for *_, m, _ in found}, {mode for *_, mode in found}


def test_retrieval_model_builds_the_index_and_answers_search(
    instance: dg.DagsterInstance,
    database_url: str,
    exported_model: ModelManifest,
    model_folder: Path,
    tmp_path: Path,
    seams_yaml: Callable[[str], Path],
) -> None:
    from sentence_transformers import SentenceTransformer

    # A relative path counts from the settings file's folder.
    (tmp_path / "models").mkdir()
    (tmp_path / "models" / "mine").symlink_to(model_folder, target_is_directory=True)
    seams_yaml("retrieval:\n  model: models/mine\n")
    defs = current_definitions()
    default_defs = build_definitions(SeamsSettings())
    for key in ("candidate_embeddings", "chunks"):  # the chunks stay; only the index moves
        asset_key = dg.AssetKey(key)
        assert (
            defs.resolve_assets_def(key).code_versions_by_key[asset_key]
            == default_defs.resolve_assets_def(key).code_versions_by_key[asset_key]
        )
    index_key = dg.AssetKey("chunk_index")
    assert (
        defs.resolve_assets_def("chunk_index").code_versions_by_key[index_key]
        != default_defs.resolve_assets_def("chunk_index").code_versions_by_key[index_key]
    )

    corpus = tmp_path / "corpus"
    corpus.mkdir()
    (corpus / "river.md").write_text(RIVER, encoding="utf-8")
    (corpus / "models.md").write_text(MODELS_DOC, encoding="utf-8")
    keys = runner.register_path(corpus, print, defs=defs)
    runner.materialize_batches(instance, keys, print, runner.RunSummary(batches=keys), defs=defs)

    retrieval = defs.resources["seams_retrieval_embedder"]
    texts, vectors, model_ids, modes = _vectors(database_url)
    assert len(texts) >= 2
    assert model_ids == {retrieval.model_id} and modes == {"text"}  # pooled needs MiniLM's
    assert vectors.shape[1] == 32
    (chunk_models,) = rows(database_url, "SELECT array_agg(DISTINCT model_id) FROM seams.chunks")
    assert chunk_models[0] == [exported_model.model_id]  # boundaries: still the packaged model

    reference = SentenceTransformer(str(model_folder), device="cpu")
    documents = reference.encode(texts, prompt_name="document", normalize_embeddings=True)
    assert np.einsum("nd,nd->n", vectors, documents).min() >= 0.999

    # Search embeds the query with the index's model and its query prompt, and ranks by cosine
    # (sentence re-scoring off: the sentences' vectors are the packaged model's).
    for query in QUERIES:
        response = search_response(
            defs.resources["seams_postgres"],
            defs.resources["seams_embedder"],  # what `seams search` hands over: the packaged model
            query,
            k=len(texts),
            search="dense",
            sentence_weight=0.0,
        )
        asked = reference.encode([query], prompt_name="query", normalize_embeddings=True)[0]
        cosines = {text: float(vector @ asked) for text, vector in zip(texts, vectors, strict=True)}
        assert [hit.text for hit in response.hits] == sorted(texts, key=lambda t: -cosines[t])
        for hit in response.hits:
            assert hit.dense_score == pytest.approx(cosines[hit.text], abs=1e-3), query


def test_embedder_model_places_the_boundaries_and_pools_into_the_index(
    instance: dg.DagsterInstance,
    database_url: str,
    exported_model: ModelManifest,
    model_folder: Path,
    tmp_path: Path,
    seams_yaml: Callable[[str], Path],
) -> None:
    """`embedder.model: <folder>`: the folder's model embeds the candidates (exported into the
    data dir on first use), the chunks' provenance names it, and the index pools its vectors
    (`pooled`: the retrieval model is the embedder's); sizes stay the packaged tokenizer's."""
    seams_yaml(f"embedder:\n  model: {model_folder}\n")
    defs = current_definitions()
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    (corpus / "river.md").write_text(RIVER, encoding="utf-8")
    keys = runner.register_path(corpus, print, defs=defs)
    runner.materialize_batches(instance, keys, print, runner.RunSummary(batches=keys), defs=defs)

    mine = defs.resources["seams_boundary_embedder"].model_id
    assert mine != exported_model.model_id
    assert defs.resources["seams_retrieval_embedder"].model_id == mine
    (candidate_models,) = rows(
        database_url, "SELECT array_agg(DISTINCT model_id) FROM seams.candidate_embeddings"
    )
    (chunk_models,) = rows(database_url, "SELECT array_agg(DISTINCT model_id) FROM seams.chunks")
    assert candidate_models[0] == chunk_models[0] == [mine]
    _, vectors, model_ids, modes = _vectors(database_url)
    assert model_ids == {mine} and modes == {"pooled"} and vectors.shape[1] == 32
    (counters,) = rows(
        database_url, "SELECT array_agg(DISTINCT metadata->>'token_counter') FROM seams.chunks"
    )
    assert counters[0] == [
        defs.resources["seams_embedder"].count_tokens.name
    ]  # the packaged tokenizer
