"""Retrieval at a fixed context budget: does the reader get the evidence in N tokens of context?

Sets (loaders in `benchmarks/long_qa.py`; none is shipped, the paths are arguments; fetch steps
in docs/benchmarks-retrieval.md), each its own collection (a question searches all chunks of its
set's documents):
- SQuAD: `../shared/data/squad-dev-5.json`, five SQuAD 2.0 dev articles, 705 questions;
  CC BY-SA 4.0.
- COVID-QA (Möller et al., 2020): github.com/deepset-ai/COVID-QA at commit
  fb2eb5e249618457e5359806601086c635c8eb8f, `data/question-answering/200423_covidQA.json`
  (repository Apache-2.0, articles mostly CC BY); 40 of its 98 long CORD-19 articles, chosen by
  sha256 of their ids (`--covid-docs`), 473 questions; evidence = the answer span.
- QASPER (Dasigi et al., 2021; CC BY 4.0): the first ten train papers as exported from Hugging
  Face `allenai/qasper` in github.com/rajsr-p/qasper-personal at commit
  d40559b9f8468dc3c94620503a9d83075df07016, `qasper-original-sample.json`; 43 questions;
  evidence = the paragraphs of the first answer that has any in the text.

Metrics (`benchmarks/qa_metrics.py`), per question, averaged over a set's questions; recall is
the share of the reference evidence characters inside the retrieved text:
- recall@5: inside the union of the top 5 hits;
- recall at 250 / 500 / 1,000 tokens: hits in rank order until that many MiniLM word pieces of
  context are used (overlapping or touching hits in one document merged and paid for once, the
  last hit cut at the budget);
- nDCG@10 over documents (each document ranked at its first hit; the question's own document is
  the one relevant one): meaningful where a set has many documents (COVID-QA: 40).

Systems, all on all-MiniLM-L6-v2 (one disk cache of embeddings by text, never changing a score):
- fixed 100 / 200 / 400 tokens (cut at word boundaries), ranked `dense` (cosine of the chunk
  text's embedding; chunks over the 256-token window are the mean of their windows, as in
  Seams' text mode) and `bm25` (`qa_metrics.BM25`: k1 1.2, b 0.75, English stop words);
- LangChain's and chonkie's SemanticChunker with dense, at their defaults as their users run them
  (`public_data.langchain_system` / `chonkie_system`);
- Seams through the product path: each set's documents written as .txt files and chunked by the
  real pipeline (`seams run`'s `register_path` + `materialize_batches`, the project's seams.yaml)
  into a throwaway embedded PostgreSQL, then every question asked through the search API
  (`seams.storage.search`: the k-5 candidate pool in `ranked_entries` order, which is what
  `search_response` returns and packs a `--budget` from, checked against it) once per
  `retrieval.search` mode, in a subprocess per set (its own SEAMS_DATA_DIR).

Fusion weights: the product's hybrid candidate pools come back with both component scores; they
are re-fused by the product's `fuse_scores` at every `lexical_weight` of a grid, and
`cross_validate` picks the weight by leave-one-set-out (its doc); a row re-fuses hybrid at the
chosen weight.

Seams is imported from a `git archive` of `--seams-revision` (default HEAD), not from the shared
checkout's files, so a figure names the commit it measured (`seams_commit` in the JSON).

    .venv/bin/python -m benchmarks.qa_budget --covid-qa /work/data-cache/covid-qa \
        --qasper /work/data-cache/qasper --json benchmarks/results/qa_budget.json
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.long_qa import (
    QaDocument,
    QaQuestion,
    QaSet,
    load_covid_qa,
    load_qasper,
    load_squad_set,
    sample_order,
)
from benchmarks.public_data import (
    DEFAULT_CACHE_DIR,
    DEFAULT_DATA,
    CachedOnnxEmbedder,
    cached_embedder,
    make_system,
    run_and_report,
)
from benchmarks.qa_metrics import (
    BM25,
    Hit,
    budget_recall,
    covered,
    document_ndcg,
    merge_spans,
    recall_at_k,
)

ROOT = Path(__file__).resolve().parents[1]
BUDGETS = (250, 500, 1000)
K = 5
DEPTH = 50
"""Hits ranked per question: enough to fill 1,000 tokens with 20-token chunks."""
BASELINES = ("fixed_100", "fixed_200", "fixed_400", "langchain", "chonkie")
SEAMS_MODES = ("hybrid", "dense", "lexical")
WEIGHT_GRID = tuple(round(w * 0.05, 2) for w in range(21))
Ranking = list[list[Hit]]
"""Per question, its hits best first."""


# --- scoring ----------------------------------------------------------------------------------
def token_starts(embedder: CachedOnnxEmbedder, documents: Sequence[QaDocument]) -> dict:
    """Per document, the char offset where each MiniLM word piece begins (no [CLS]/[SEP])."""
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_file(str(embedder.onnx.manifest.tokenizer_path))
    tokenizer.no_truncation()
    tokenizer.no_padding()
    out = {}
    for doc in documents:
        encoding = tokenizer.encode(doc.text, add_special_tokens=False)
        out[doc.id] = [start for start, _ in encoding.offsets]
    return out


def score(
    questions: Sequence[QaQuestion], ranking: Ranking, starts: dict[str, list[int]]
) -> dict[str, float]:
    """The set's mean metrics for one system's ranking."""
    rows: dict[str, list[float]] = {f"recall@{K}": [], "ndcg@10": []}
    for budget in BUDGETS:
        rows[f"recall@{budget}t"] = []
    for q, hits in zip(questions, ranking, strict=True):
        rows[f"recall@{K}"].append(recall_at_k(hits, q.document, q.evidence, K))
        for budget in BUDGETS:
            rows[f"recall@{budget}t"].append(
                budget_recall(hits, q.document, q.evidence, starts, budget)
            )
        rows["ndcg@10"].append(document_ndcg(hits, q.document, 10))
    return {key: statistics.mean(values) for key, values in rows.items()}


# --- baseline systems -------------------------------------------------------------------------
def chunk_set(spans: Callable[[str], list[tuple[int, int]]], qa: QaSet) -> list[Hit]:
    return [(doc.id, span) for doc in qa.documents for span in spans(doc.text)]


def top_hits(scores: np.ndarray, chunks: Sequence[Hit], depth: int = DEPTH) -> list[Hit]:
    order = np.argsort(-scores, kind="stable")[:depth]
    return [chunks[i] for i in order]


def baseline_rankings(
    key: str, qa: QaSet, embedder: CachedOnnxEmbedder, question_vectors: np.ndarray
) -> tuple[dict[str, Ranking], dict[str, Any]]:
    """One chunker's rankings: dense always, bm25 for the fixed splits."""
    system = make_system(key, embedder)
    started = time.perf_counter()
    chunks = chunk_set(system.spans, qa)
    texts = {doc.id: doc.text for doc in qa.documents}
    chunk_texts = [texts[doc][a:b] for doc, (a, b) in chunks]
    similarities = question_vectors @ embedder(chunk_texts).T
    embedder.save()
    rankings = {"dense": [top_hits(row, chunks) for row in similarities]}
    if key.startswith("fixed_"):
        bm25 = BM25(chunk_texts)
        rankings["bm25"] = [top_hits(bm25.scores(q.question), chunks) for q in qa.questions]
    tokens = embedder.count_tokens(chunk_texts)
    info = {
        "label": system.label,
        "settings": system.settings,
        "chunks": len(chunks),
        "tokens_p50": statistics.median(tokens),
        "seconds": round(time.perf_counter() - started, 1),
    }
    return rankings, info


# --- Seams through the product ----------------------------------------------------------------
def package_dirs(pyproject: str) -> list[str]:
    """The top-level folders a pyproject.toml installs as `seams.<name>` (its package-dir)."""
    import tomllib

    mapping = tomllib.loads(pyproject)["tool"]["setuptools"].get("package-dir", {})
    return [folder for name, folder in mapping.items() if name.startswith("seams.")]


def product_snapshot(revision: str, folder: Path) -> tuple[Path, str]:
    """The product code of `revision` as an importable tree under `folder`; returns the tree and
    the full commit id. The checkout is shared with engineers editing it; a commit is what the
    numbers can be reproduced from (`--seams-revision worktree` uses the files as they are)."""
    commit = subprocess.run(
        ["git", "rev-parse", "--verify", f"{revision}^{{commit}}"],
        cwd=ROOT, check=True, capture_output=True, text=True,
    ).stdout.strip()  # fmt: skip
    tree = folder / f"product-{commit[:12]}"
    if not tree.is_dir():
        tree.mkdir(parents=True)
        pyproject = subprocess.run(
            ["git", "show", f"{commit}:pyproject.toml"],
            cwd=ROOT, check=True, capture_output=True, text=True,
        ).stdout  # fmt: skip
        folders = package_dirs(pyproject)
        archive = subprocess.run(
            ["git", "archive", commit, "seams", *folders, "seams.yaml", "dagster.yaml"],
            cwd=ROOT, check=True, capture_output=True,
        ).stdout  # fmt: skip
        subprocess.run(["tar", "-x", "-C", str(tree)], input=archive, check=True)
        for name in folders:  # the editable install's package-dir mapping, as symlinks
            (tree / "seams" / name).symlink_to(Path("..") / name)
    return tree, commit


def seams_rankings(qa: QaSet, work: Path, product: Path | None = None) -> dict[str, Any]:
    """Run the Seams worker for one set in a subprocess (own data dir and database); `product`:
    a `product_snapshot` tree to import Seams (and read seams.yaml) from, else the checkout."""
    work.mkdir(parents=True, exist_ok=True)
    request = work / "set.json"
    request.write_text(
        json.dumps(
            {
                "documents": [[d.id, d.text] for d in qa.documents],
                "questions": [q.question for q in qa.questions],
            }
        ),
        encoding="utf-8",
    )
    answer = work / "hits.json"
    env = {k: v for k, v in os.environ.items() if k != "SEAMS_DATABASE_URL"}
    if "SEAMS_DATA_DIR" in env:  # the worker reuses this process's exported model
        env["SEAMS_QA_MODELS"] = str(Path(env["SEAMS_DATA_DIR"]) / "models")
    env["SEAMS_DATA_DIR"] = str(work / "data")
    env["TOKENIZERS_PARALLELISM"] = "false"
    # The worker imports Seams from `product` when given (ahead of everything, so neither the
    # checkout's own seams/ folder nor the editable install's finder shadows it) and this
    # benchmark from the checkout (last on the path); it runs in `work`, not in the checkout.
    path = [str(product)] if product is not None else []
    if product is not None:  # PYTHONPATH too: Dagster's step processes start from scratch
        env["PYTHONPATH"] = str(product)
        env["SEAMS_CONFIG"] = str(product / "seams.yaml")
    code = (
        f"import sys; sys.path[:0] = {path!r}; sys.path.append({str(ROOT)!r}); "
        "from benchmarks.qa_budget import main; "
        f"raise SystemExit(main(['--seams-worker', {str(request)!r}, {str(answer)!r}]))"
    )
    subprocess.run([sys.executable, "-c", code], cwd=work, env=env, check=True)
    return json.loads(answer.read_text(encoding="utf-8"))


def seams_worker(request: Path, answer: Path) -> int:
    """In a fresh SEAMS_DATA_DIR: the pipeline over the set's documents, then every question
    through the product's search API, per search mode. Writes hits (and component scores)."""
    data_dir = Path(os.environ["SEAMS_DATA_DIR"])
    models = Path(os.environ.get("SEAMS_QA_MODELS") or ROOT / ".seams" / "models")
    if models.is_dir():  # reuse the checkout's export (verified by sha256 on load)
        data_dir.mkdir(parents=True, exist_ok=True)
        if not (data_dir / "models").exists():
            (data_dir / "models").symlink_to(models.resolve())
    payload = json.loads(request.read_text(encoding="utf-8"))
    inbox = data_dir.parent / "inbox"
    inbox.mkdir(parents=True, exist_ok=True)
    names = {}
    for number, (doc_id, text) in enumerate(payload["documents"]):
        name = f"doc{number:03d}.txt"
        (inbox / name).write_text(text, encoding="utf-8")
        names[name] = (doc_id, text)

    import seams
    from seams.environment import SeamsEnvironment
    from seams.orchestration import runner
    from seams.orchestration.definitions import build_definitions
    from seams.orchestration.instance import prepare_instance
    from seams.resources.database import EmbeddedPostgres
    from seams.settings import load_settings

    print(f"seams imported from {Path(seams.__file__).parent}", flush=True)
    settings = load_settings()
    defs = build_definitions(settings)
    try:
        started = time.perf_counter()
        with prepare_instance().open() as instance:
            runner.ensure_model(instance, print, defs=defs)
            keys = runner.register_path(inbox, print, defs=defs)
            summary = runner.RunSummary(batches=keys)
            runner.materialize_batches(instance, keys, print, summary, defs=defs)
        pipeline_s = time.perf_counter() - started
        postgres, embedder = defs.resources["seams_postgres"], defs.resources["seams_embedder"]
        chunks = _current_chunks(postgres, names)
        out: dict[str, Any] = {
            "pipeline_seconds": round(pipeline_s, 1),
            "chunks": len(chunks),
            "chunk_spans": chunks,
            "settings": settings.retrieval.model_dump(),
            "modes": {},
        }
        out.update(_search_all(postgres, embedder, settings, payload["questions"], chunks))
    finally:
        from seams.resources.postgres import close_all_pools

        close_all_pools()
        EmbeddedPostgres.for_environment(SeamsEnvironment.from_os()).stop()
    answer.write_text(json.dumps(out), encoding="utf-8")
    return 0


def _current_chunks(postgres: Any, names: dict[str, tuple[str, str]]) -> list[list[Any]]:
    """[doc id, start, end, token_count, chunk_id] of every current chunk, checked against the
    source."""
    query = (
        "SELECT d.source_uri, c.start_char, c.end_char, c.token_count, c.text, c.chunk_id "
        "FROM seams.current_chunks c JOIN seams.batch_documents d "
        "ON d.batch_key = c.batch_key AND d.document_id = c.document_id "
        "ORDER BY d.source_uri, c.start_char"
    )
    with postgres.connection() as conn:
        rows = conn.execute(query).fetchall()
    out = []
    for uri, start, end, tokens, text, chunk_id in rows:
        doc_id, source = names[uri.rsplit("/", 1)[-1]]
        if source[start:end] != text:
            raise RuntimeError(f"{doc_id}: chunk text differs from the source at {start}:{end}")
        out.append([doc_id, start, end, tokens, chunk_id])
    return out


CHECKED_QUESTIONS = 20
"""Questions per mode whose top k from `search_response` must equal the ranked pool's."""


def _search_all(
    postgres: Any,
    embedder: Any,
    settings: Any,
    questions: list[str],
    chunks: list[list[Any]],
) -> dict[str, Any]:
    """Every question through the product's search, per `retrieval.search` kind, as `seams
    search -k 5 [--budget N]` ranks: the candidate pool of k 5 (`candidate_pool`, `pool_size(5)`
    per side) in the order of `ranked_entries` (the settings' `lexical_weight` and
    `sentence_weight`), which is the order `search_response` returns and packs a budget from.
    For the first questions, `search_response`'s own top k is checked against it.

    Per mode and question: [chunk position, ranking score, dense score, BM25 score] per
    candidate, best first; the hybrid pools (both scores exact) also feed the fusion study."""
    from seams.storage.search import pool_size, search_response
    from seams.storage.search.pool import ranked_entries
    from tests.support.search_probes import candidate_pool

    retrieval = settings.retrieval
    position = {row[4]: i for i, row in enumerate(chunks)}
    modes: dict[str, Any] = {}
    times: dict[str, list[float]] = {}
    for kind in SEAMS_MODES:
        ranked_per_question, ms = [], []
        for number, question in enumerate(questions):
            started = time.perf_counter()
            pool = candidate_pool(
                postgres, embedder, question, pool=pool_size(K), search=kind,
                sentence_weight=retrieval.sentence_weight,
            )  # fmt: skip
            ranked = ranked_entries(pool, retrieval.lexical_weight)
            ms.append((time.perf_counter() - started) * 1000)
            ranked_per_question.append(
                [[position[c.chunk_id], s, c.dense_score, c.lexical_score] for c, s in ranked]
            )
            if number < CHECKED_QUESTIONS:
                response = search_response(
                    postgres, embedder, question, K, search=kind,
                    lexical_weight=retrieval.lexical_weight,
                    sentence_weight=retrieval.sentence_weight,
                )  # fmt: skip
                top = [c.chunk_id for c, _ in ranked[:K]]
                if [h.chunk_id for h in response.hits] != top:
                    raise RuntimeError(f"{kind}: search_response differs from the ranked pool")
        modes[kind] = ranked_per_question
        times[kind] = ms
    return {
        "packed": _packed_contexts(postgres, embedder, settings, questions, chunks),
        "modes": modes,
        "search_options": {
            "k": K,
            "pool_per_side": pool_size(K),
            "lexical_weight": retrieval.lexical_weight,
            "sentence_weight": retrieval.sentence_weight,
        },
        "search_ms_p50": {m: statistics.median(v) for m, v in times.items()},
    }


PACKINGS = {"chunks": False, "passages": True}
"""How `search_response` packs a budget: whole hits (the packing before passages) or passages."""


def _packed_contexts(
    postgres: Any,
    embedder: Any,
    settings: Any,
    questions: list[str],
    chunks: list[list[Any]],
) -> dict[str, dict[str, list[list[list[Any]]]]]:
    """What `seams search --budget B` (hybrid, the settings' weights) gives the reader, per
    packing, budget and question: [doc id, start, end] per span. Both packings read the same
    index, so their difference is the packing's alone. A product without passages gives only
    "chunks"."""
    import inspect

    from seams.storage.search import search_response

    doc_of = {row[4]: row[0] for row in chunks}
    retrieval = settings.retrieval
    has_passages = "passages" in inspect.signature(search_response).parameters
    out: dict[str, dict[str, list[list[list[Any]]]]] = {}
    for name, passages in PACKINGS.items():
        if passages and not has_passages:
            continue
        options = {"passages": passages} if has_passages else {}
        per_budget: dict[str, list[list[list[Any]]]] = {}
        for budget in BUDGETS:
            per_budget[str(budget)] = []
            for question in questions:
                response = search_response(
                    postgres, embedder, question, K, search="hybrid",
                    lexical_weight=retrieval.lexical_weight,
                    sentence_weight=retrieval.sentence_weight, budget=budget, **options,
                )  # fmt: skip
                spans = response.context.spans if response.context else []
                per_budget[str(budget)].append(
                    [[doc_of[s.chunk_ids[0]], s.start_char, s.end_char] for s in spans]
                )
        out[name] = per_budget
    return out


def packed_recall(questions: Sequence[QaQuestion], contexts: Sequence[Sequence[Any]]) -> float:
    """Mean share of each question's evidence characters inside the spans the product packed
    for it (spans of other documents count for nothing)."""
    shares = []
    for q, spans in zip(questions, contexts, strict=True):
        reference = merge_spans(q.evidence)
        total = sum(b - a for a, b in reference)
        mine = merge_spans((start, end) for doc, start, end in spans if doc == q.document)
        shares.append(covered(mine, reference) / total if total else 0.0)
    return statistics.mean(shares) if shares else 0.0


# --- fusion cross-validation ------------------------------------------------------------------
def cross_validate(
    per_set: dict[str, Callable[[float], float]], grid: Sequence[float] = WEIGHT_GRID
) -> dict[str, Any]:
    """Leave-one-set-out choice of one fusion weight.

    `per_set[name](w)` is the set's objective (mean of recall at 500 and 1,000 tokens) with the
    product's candidate pools fused at `lexical_weight` w. For each held-out set the weight is
    the one with the best mean objective over the other sets (ties: the smaller weight), and its
    score on the held-out set is reported beside that set's own best. The default is the weight
    with the best mean over all sets; `flat` lists the weights within 0.005 of that best mean."""
    table = {name: {w: fn(w) for w in grid} for name, fn in per_set.items()}
    folds = {}
    for held in table:
        others = [n for n in table if n != held]
        chosen = max(grid, key=lambda w: (statistics.mean(table[n][w] for n in others), -w))
        best = max(grid, key=lambda w: (table[held][w], -w))
        folds[held] = {
            "chosen_weight": chosen,
            "held_out_score": table[held][chosen],
            "own_best_weight": best,
            "own_best_score": table[held][best],
        }
    means = {w: statistics.mean(table[n][w] for n in table) for w in grid}
    default = max(grid, key=lambda w: (means[w], -w))
    return {
        "grid": list(grid),
        "table": {n: {str(w): v for w, v in row.items()} for n, row in table.items()},
        "mean": {str(w): v for w, v in means.items()},
        "folds": folds,
        "default_weight": default,
        "flat": [w for w in grid if means[w] >= means[default] - 0.005],
    }


Candidate = tuple[Hit, float, float, str]
"""A pooled chunk: its hit, dense score, BM25 score, and chunk_id (the product's tie-break)."""


def seams_candidates(seams: dict[str, Any]) -> list[list[Candidate]]:
    """Per question, the product's hybrid candidate pool with both component scores."""
    chunks = seams["chunk_spans"]
    return [
        [((chunks[i][0], (chunks[i][1], chunks[i][2])), dense, lexical, chunks[i][4])
         for i, _, dense, lexical in pool]
        for pool in seams["modes"]["hybrid"]
    ]  # fmt: skip


def product_fusion(product: Path | None) -> Callable[..., np.ndarray]:
    """`seams.storage.search.fuse_scores` of the product code under test (the snapshot's file when
    there is one, so the weights are studied on exactly the fusion that was measured)."""
    if product is None:
        from seams.storage.search import fuse_scores

        return fuse_scores
    import importlib.util

    # The fusion module's home in the snapshot: the search package, or `models/` before it.
    found = [
        path
        for path in (
            product / "seams" / "storage" / "search" / "fusion.py",
            product / "seams" / "models" / "fusion.py",
        )
        if path.exists()
    ]
    spec = importlib.util.spec_from_file_location("qa_budget_product_fusion", found[0])
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.fuse_scores


def fuse(
    pool: Sequence[Candidate], lexical_weight: float, fuse_scores: Callable[..., np.ndarray]
) -> list[Hit]:
    """The pool in hybrid order at `lexical_weight`, as `seams.storage.search.pool.ranked_entries`
    orders it: fused score descending, then chunk_id."""
    if not pool:
        return []
    scores = fuse_scores([c[1] for c in pool], [c[2] for c in pool], lexical_weight)
    order = sorted(range(len(pool)), key=lambda i: (-scores[i], pool[i][3]))
    return [pool[i][0] for i in order]


def budget_objective(
    qa: QaSet,
    pools: list[list[Candidate]],
    starts: dict[str, list[int]],
    fuse_scores: Callable[..., np.ndarray],
    documents: set[str] | None = None,
) -> Callable[[float], float]:
    """w -> the set's mean of recall at 500 and at 1,000 tokens with the pools fused at w (over
    the questions of `documents` only, when given)."""

    def objective(weight: float) -> float:
        values = []
        for q, pool in zip(qa.questions, pools, strict=True):
            if documents is not None and q.document not in documents:
                continue
            hits = fuse(pool, weight, fuse_scores)
            values.append(
                (
                    budget_recall(hits, q.document, q.evidence, starts, 500)
                    + budget_recall(hits, q.document, q.evidence, starts, 1000)
                )
                / 2
            )
        return statistics.mean(values)

    return objective


# --- other fusion rules, on the same pools ----------------------------------------------------
def _minmax(x: np.ndarray) -> np.ndarray:
    low, high = float(x.min()), float(x.max())
    return (x - low) / (high - low) if high > low else np.full_like(x, 1.0 if high > 0 else 0.0)


def _zscore(x: np.ndarray) -> np.ndarray:
    spread = float(x.std())
    return (x - x.mean()) / spread if spread > 0 else np.zeros_like(x)


def _side_minmax(x: np.ndarray, side: int = 40) -> np.ndarray:
    """Min-max from the side's own `side`-th best score (not the union's minimum), clipped at 0."""
    if x.size <= side:
        return _minmax(x)
    low, high = float(np.sort(x)[::-1][side - 1]), float(x.max())
    return np.clip((x - low) / (high - low), 0.0, None) if high > low else _minmax(x)


def _ranks(x: np.ndarray) -> np.ndarray:
    order = np.argsort(-x, kind="stable")
    out = np.empty(x.size)
    out[order] = np.arange(1, x.size + 1)
    return out


def _peak(x: np.ndarray) -> float:
    """How far the pool's best score stands above the rest: (max - mean) / std, 0 if flat."""
    spread = float(x.std())
    return float(x.max() - x.mean()) / spread if spread > 0 else 0.0


def _fused_head(dense: np.ndarray, lexical: np.ndarray, weight: float, head: int = 3) -> np.ndarray:
    """The min-max fused order for the first `head` hits, then the rest in BM25 order."""
    fused = (1 - weight) * _minmax(dense) + weight * _minmax(lexical)
    first = np.argsort(-fused, kind="stable")[:head]
    out = _minmax(lexical)
    out[first] = 2.0 + fused[first]
    return out


def _peak_weighted(dense: np.ndarray, lexical: np.ndarray, weight: float) -> np.ndarray:
    """Min-max fusion with a per-query weight: each side's share scaled by its `_peak` squared."""
    a, b = (1 - weight) * _peak(dense) ** 2, weight * _peak(lexical) ** 2
    share = b / (a + b) if a + b > 0 else weight
    return (1 - share) * _minmax(dense) + share * _minmax(lexical)


def _variant(rule: Callable[..., np.ndarray]) -> Callable[..., np.ndarray]:
    def fuse_scores(dense: Sequence[float], lexical: Sequence[float], weight: float) -> np.ndarray:
        return rule(
            np.asarray(dense, dtype=np.float64), np.asarray(lexical, dtype=np.float64), weight
        )

    return fuse_scores


FUSION_VARIANTS: dict[str, Callable[..., np.ndarray]] = {
    "z-score": _variant(lambda d, lx, w: (1 - w) * _zscore(d) + w * _zscore(lx)),
    "min-max from each side's 40th best": _variant(
        lambda d, lx, w: (1 - w) * _side_minmax(d) + w * _side_minmax(lx)
    ),
    "reciprocal rank (k 60)": _variant(
        lambda d, lx, w: (1 - w) / (60 + _ranks(d)) + w / (60 + _ranks(lx))
    ),
    "min-max, per-query weight by peakedness": _variant(_peak_weighted),
    "min-max for the first 3 hits, then BM25 order": _variant(_fused_head),
}
"""Fusion rules studied beside the product's `fuse_scores` (benchmark code, not the product):
each maps one pool's dense and BM25 scores and a weight w (the BM25 share) to ranking scores."""


def fusion_variants(
    refuse: dict[str, tuple[Sequence[QaQuestion], list[list[Candidate]], dict[str, list[int]]]],
    product: Callable[..., np.ndarray],
    bars: dict[str, dict[str, float]] | None = None,
) -> dict[str, Any]:
    """Each rule (the product's min-max first) over the same pools, its weight chosen as the
    product's is (`cross_validate`: best mean of recall at 500 and 1,000 tokens over the sets,
    leave-one-set-out); per set at that weight: recall@5, at 500 and at 1,000 tokens, and
    whether each beats `bars[set]` (the best other system at 500 / 1,000 tokens, and fixed 200
    tokens with BM25 at recall@5)."""
    out = {}
    for label, rule in {"min-max (the product)": product, **FUSION_VARIANTS}.items():
        per_set = {
            name: budget_objective(QaSet(name, (), tuple(qs), ""), pools, starts, rule)
            for name, (qs, pools, starts) in refuse.items()
        }
        study = cross_validate(per_set)
        weight = study["default_weight"]
        sets = {}
        for name, (qs, pools, starts) in refuse.items():
            ranking = [fuse(pool, weight, rule) for pool in pools]
            row = score(qs, ranking, starts)
            cells = {m: row[m] for m in (f"recall@{K}", "recall@500t", "recall@1000t")}
            if bars and name in bars:
                cells["goal_met"] = all(cells[m] > bars[name][m] for m in cells)
            sets[name] = cells
        out[label] = {
            "weight": weight,
            "mean": study["mean"][str(weight)],
            "held_out": {n: f["held_out_score"] for n, f in study["folds"].items()},
            "sets": sets,
        }
    return out


def goal_bars(results: dict[str, Any]) -> dict[str, dict[str, float]]:
    """Per set, what hybrid must beat: the best other system at 500 and at 1,000 tokens (the
    re-fused and diagnostic rows aside) and fixed 200 tokens with BM25 at recall@5."""
    bars = {}
    for name, block in results.items():
        rows = {k: r for k, r in block["systems"].items()
                if k not in ("seams/hybrid", "seams/hybrid-cv", "seams-chunks/bm25")}  # fmt: skip
        bars[name] = {
            "recall@500t": max(r["recall@500t"] for r in rows.values()),
            "recall@1000t": max(r["recall@1000t"] for r in rows.values()),
            f"recall@{K}": rows["fixed_200/bm25"][f"recall@{K}"]
            if "fixed_200/bm25" in rows
            else 0.0,
        }
    return bars


def variant_lines(variants: dict[str, Any] | None) -> list[str]:
    """`fusion_variants` as a Markdown table."""
    if not variants:
        return []
    names = list(next(iter(variants.values()))["sets"])
    lines = [
        "",
        "w chosen per rule by the best mean over the sets (grid 0-1, step 0.05); per set: recall@5"
        " / at 500 / at 1,000 tokens at that w (held-out score when that set is left out)",
        "",
        "| rule | w | mean | " + " | ".join(names) + " | goal met on |",
        "|---|---:|---:|" + "---|" * len(names) + "---|",
    ]
    for label, v in variants.items():
        cells = []
        for n in names:
            c = v["sets"][n]
            cells.append(
                f"{c[f'recall@{K}']:.3f} / {c['recall@500t']:.3f} / {c['recall@1000t']:.3f} "
                f"({v['held_out'][n]:.3f})"
            )
        met = [n for n in names if v["sets"][n].get("goal_met")]
        known = any("goal_met" in c for c in v["sets"].values())
        lines.append(
            f"| {label} | {v['weight']:.2f} | {v['mean']:.4f} | "
            + " | ".join(cells)
            + f" | {(', '.join(met) or 'none') if known else 'n/a'} |"
        )
    return lines


# --- the run ----------------------------------------------------------------------------------
def load_sets(args: argparse.Namespace) -> list[QaSet]:
    sets = [] if args.no_squad else [load_squad_set(args.data)]
    if args.covid_qa:
        sets.append(load_covid_qa(args.covid_qa, args.covid_docs))
    if args.qasper:
        sets.append(load_qasper(args.qasper, args.qasper_docs))
    if args.questions:
        sets = [question_sample(qa, args.questions) for qa in sets]
    return sets


def question_sample(qa: QaSet, limit: int) -> QaSet:
    """At most `limit` of the set's questions, chosen by `sample_order` of their ids (so two
    revisions, or two runs, score the same questions), over all of the set's documents."""
    if len(qa.questions) <= limit:
        return qa
    chosen = set(sample_order([q.id for q in qa.questions])[:limit])
    kept = tuple(q for q in qa.questions if q.id in chosen)
    return dataclasses.replace(qa, questions=kept)


def run(args: argparse.Namespace) -> dict[str, Any]:
    embedder = cached_embedder(args.cache_dir, "qa-budget")
    product, commit = None, "worktree"
    if not args.no_seams and args.seams_revision != "worktree":
        from seams.resources.embedded_server import server_tempdir

        snapshots = server_tempdir("seams-qa-product-")
        product, commit = product_snapshot(args.seams_revision, snapshots)
        print(f"Seams product code: commit {commit}")
    results: dict[str, Any] = {}
    # Per candidate-pool size, per set (and per fold): lexical_weight -> objective.
    objectives: dict[str, dict[str, Callable[[float], float]]] = {}
    folds: dict[str, dict[str, Callable[[float], float]]] = {}
    fuse_scores = product_fusion(product)
    refuse: dict[str, tuple[QaSet, list[list[Candidate]], dict[str, list[int]]]] = {}
    for qa in load_sets(args):
        print(f"\n== {qa.name}: {len(qa.documents)} documents, {len(qa.questions)} questions")
        starts = token_starts(embedder, qa.documents)
        question_vectors = embedder([q.question for q in qa.questions])
        rows: dict[str, Any] = {}
        for key in args.systems:
            rankings, info = baseline_rankings(key, qa, embedder, question_vectors)
            for retriever, ranking in rankings.items():
                rows[f"{key}/{retriever}"] = {**info, **score(qa.questions, ranking, starts)}
                _say(f"{key}/{retriever}", rows[f"{key}/{retriever}"])
        if not args.no_seams:
            from seams.resources.embedded_server import server_tempdir

            work = server_tempdir("seams-qa-budget-")  # a folder the server's user can enter
            try:
                seams = seams_rankings(qa, work, product)
            finally:
                shutil.rmtree(work, ignore_errors=True)
            tokens = [row[3] for row in seams["chunk_spans"]]
            spans = seams["chunk_spans"]
            for mode, per_question in seams["modes"].items():
                ranking = [
                    [(spans[i][0], (spans[i][1], spans[i][2])) for i, *_ in ranked]
                    for ranked in per_question
                ]
                rows[f"seams/{mode}"] = {
                    "label": f"Seams {mode} (product search API)",
                    "settings": "seams.yaml of the commit; " + json.dumps(seams["search_options"]),
                    "chunks": seams["chunks"],
                    "tokens_p50": statistics.median(tokens),
                    "seconds": seams["pipeline_seconds"],
                    "search_ms_p50": seams["search_ms_p50"].get(mode),
                    **score(qa.questions, ranking, starts),
                }
                _say(f"seams/{mode}", rows[f"seams/{mode}"])
            for name, per_budget in seams.get("packed", {}).items():
                key = f"seams/hybrid-packed-{name}"
                rows[key] = {
                    **rows["seams/hybrid"],
                    "label": f"Seams hybrid, `search_response(budget=B)` packing {name}",
                    **{
                        f"recall@{b}t": packed_recall(qa.questions, per_budget[str(b)])
                        for b in BUDGETS
                    },
                }
                _say(key, rows[key])
            for size in (str(seams["search_options"]["pool_per_side"]),):
                pools = seams_candidates(seams)
                sized, halves = objectives.setdefault(size, {}), folds.setdefault(size, {})
                sized[qa.name] = budget_objective(qa, pools, starts, fuse_scores)
                refuse[qa.name] = (qa, pools, starts)
                if len(qa.documents) >= 20:  # two document-disjoint halves as folds of their own
                    ids = [d.id for d in qa.documents]
                    for half, part in (("A", ids[0::2]), ("B", ids[1::2])):
                        halves[f"{qa.name} {half}"] = budget_objective(
                            qa, pools, starts, fuse_scores, set(part)
                        )
                else:
                    halves[qa.name] = sized[qa.name]
            # Diagnostic: plain BM25 (qa_metrics) over Seams' own chunks, against the product's.
            texts = {doc.id: doc.text for doc in qa.documents}
            chunks = [(d, (a, b)) for d, a, b, *_ in seams["chunk_spans"]]
            bm25 = BM25([texts[d][a:b] for d, (a, b) in chunks])
            ranking = [top_hits(bm25.scores(q.question), chunks) for q in qa.questions]
            rows["seams-chunks/bm25"] = {
                "label": "Seams' chunks, plain BM25 (qa_metrics, diagnostic)",
                "settings": "not the product: k1 1.2, b 0.75, no stemming",
                "chunks": seams["chunks"],
                "tokens_p50": statistics.median(tokens),
                "seconds": 0.0,
                **score(qa.questions, ranking, starts),
            }
            _say("seams-chunks/bm25", rows["seams-chunks/bm25"])
        results[qa.name] = {
            "documents": len(qa.documents),
            "questions": len(qa.questions),
            "words": sum(len(d.text.split()) for d in qa.documents),
            "source": qa.source,
            "systems": rows,
        }
    if args.pools:  # the hybrid pools with both scores, to study fusion rules without a rerun
        write_pools(args.pools, refuse)
    if product is not None:  # the fusion code is loaded; the snapshot is no longer needed
        shutil.rmtree(product.parent, ignore_errors=True)
    fusion = {size: cross_validate(o) for size, o in objectives.items() if len(o) > 1}
    for size, study in fusion.items():  # hybrid re-fused at the cross-validated weight
        weight = study["default_weight"]
        for name, (qa, pools, starts) in refuse.items():
            rows = results[name]["systems"]
            ranking = [fuse(pool, weight, fuse_scores) for pool in pools]
            rows["seams/hybrid-cv"] = {
                **rows["seams/hybrid"],
                "label": f"Seams hybrid at the cross-validated lexical_weight {weight:.2f}",
                "settings": f"the product's pools (k 5, {size} per side) re-fused by fuse_scores",
                **score(qa.questions, ranking, starts),
            }
            _say(f"seams/hybrid-cv {weight:.2f}", rows["seams/hybrid-cv"])
    fusion_folds = {
        size: cross_validate(f) for size, f in folds.items() if len(f) > len(objectives[size]) > 1
    }
    variants = (
        fusion_variants(
            {n: (qa.questions, pools, starts) for n, (qa, pools, starts) in refuse.items()},
            fuse_scores,
            goal_bars(results),
        )
        if len(refuse) > 1
        else {}
    )
    return {
        "benchmark": "qa_budget",
        "seams_commit": commit,
        "fusion_cv": fusion,
        "fusion_cv_halves": fusion_folds,
        "fusion_variants": variants,
        "model": {"name": "all-MiniLM-L6-v2", "onnx_sha256": embedder.model_id},
        "k": K,
        "budgets": list(BUDGETS),
        "depth": DEPTH,
        "results": results,
        "texts_embedded": embedder.embedded,
    }


def write_pools(
    path: Path, refuse: dict[str, tuple[QaSet, list[list[Candidate]], dict[str, list[int]]]]
) -> None:
    """Per set: every question's document and evidence, its hybrid candidate pool (hit, dense
    score, BM25 score, chunk_id) and the token starts of the set's documents."""
    payload = {
        name: {
            "questions": [[q.document, [list(s) for s in q.evidence]] for q in qa.questions],
            "pools": [
                [[hit[0], list(hit[1]), dense, lexical, chunk] for hit, dense, lexical, chunk in p]
                for p in pools
            ],
            "starts": starts,
        }
        for name, (qa, pools, starts) in refuse.items()
    }
    path.write_text(json.dumps(payload), encoding="utf-8")


def read_pools(
    path: Path,
) -> dict[str, tuple[list[QaQuestion], list[list[Candidate]], dict[str, list[int]]]]:
    """`write_pools`' file back: per set, (questions, pools, token starts)."""
    out = {}
    for name, block in json.loads(path.read_text(encoding="utf-8")).items():
        questions = [
            QaQuestion(str(i), "", doc, tuple(tuple(s) for s in evidence))
            for i, (doc, evidence) in enumerate(block["questions"])
        ]
        pools = [
            [((doc, (span[0], span[1])), dense, lexical, chunk)
             for doc, span, dense, lexical, chunk in pool]
            for pool in block["pools"]
        ]  # fmt: skip
        out[name] = (questions, pools, block["starts"])
    return out


def _say(name: str, row: dict[str, Any]) -> None:
    budget = " / ".join(f"{row[f'recall@{b}t']:.3f}" for b in BUDGETS)
    print(
        f"  {name:22s} recall@{K} {row[f'recall@{K}']:.3f}  at {'/'.join(map(str, BUDGETS))} "
        f"tokens {budget}  nDCG@10 {row['ndcg@10']:.3f}  ({row['chunks']} chunks)",
        flush=True,
    )


def print_table(payload: dict[str, Any]) -> None:
    for name, block in payload["results"].items():
        print(
            f"\n{name}: {block['documents']} documents, {block['questions']} questions, "
            f"{block['words']:,} words\n"
        )
        print(
            f"| system | chunks | tokens p50 | recall@{K} | "
            + " | ".join(f"recall @ {b} tok" for b in BUDGETS)
            + " | nDCG@10 docs |"
        )
        print("|---|---:|---:|---:|" + "---:|" * len(BUDGETS) + "---:|")
        for key, row in block["systems"].items():
            cells = " | ".join(f"{row[f'recall@{b}t']:.3f}" for b in BUDGETS)
            print(
                f"| {key} | {row['chunks']} | {row['tokens_p50']:.0f} | "
                f"{row[f'recall@{K}']:.3f} | {cells} | {row['ndcg@10']:.3f} |"
            )
    for key in ("fusion_cv", "fusion_cv_halves"):
        for size, fusion in (payload.get(key) or {}).items():
            print(f"\n{key}, candidate pool {size} per side:")
            print("\n".join(fusion_lines(fusion)))
    if payload.get("fusion_variants"):
        print("\nfusion rules on the same pools:")
        print("\n".join(variant_lines(payload["fusion_variants"])))
    print(f"\n{payload['texts_embedded']} texts embedded, {payload['seconds']:.0f} s.")


def fusion_lines(fusion: dict[str, Any] | None) -> list[str]:
    """The cross-validation of `cross_validate` as Markdown tables."""
    if not fusion:
        return []
    names = list(fusion["table"])
    lines = [
        "",
        "w = `retrieval.lexical_weight` (the BM25 share; 1 - w the dense share) in the product's "
        "`fuse_scores`; objective: mean of recall at 500 and at 1,000 tokens, per fold",
        "",
        "| w | " + " | ".join(names) + " | mean |",
        "|---:|" + "---:|" * (len(names) + 1),
    ]
    for w in fusion["grid"]:
        cells = " | ".join(f"{fusion['table'][n][str(w)]:.3f}" for n in names)
        lines.append(f"| {w:.2f} | {cells} | {fusion['mean'][str(w)]:.3f} |")
    lines += [
        "",
        "| left-out set | w chosen on the others | its score at that w | its own best |",
        "|---|---:|---:|---|",
    ]
    for name, fold in fusion["folds"].items():
        lines.append(
            f"| {name} | {fold['chosen_weight']:.2f} | {fold['held_out_score']:.3f} | "
            f"{fold['own_best_score']:.3f} at {fold['own_best_weight']:.2f} |"
        )
    lines += [
        "",
        f"Best mean over all folds: w = {fusion['default_weight']:.2f}; within 0.005 of it: "
        f"{', '.join(f'{w:.2f}' for w in fusion['flat'])}.",
    ]
    return lines


LABELS = {
    "fixed_100/dense": "fixed 100 tokens, dense",
    "fixed_100/bm25": "fixed 100 tokens, BM25",
    "fixed_200/dense": "fixed 200 tokens, dense",
    "fixed_200/bm25": "fixed 200 tokens, BM25",
    "fixed_400/dense": "fixed 400 tokens, dense",
    "fixed_400/bm25": "fixed 400 tokens, BM25",
    "langchain/dense": "LangChain SemanticChunker, dense",
    "chonkie/dense": "chonkie SemanticChunker, dense",
    "seams/hybrid": "**Seams `hybrid`** (pipeline + search API)",
    "seams/dense": "**Seams `dense`** (pipeline + search API)",
    "seams/lexical": "**Seams `lexical`** (pipeline + search API)",
    "seams/hybrid-cv": "Seams `hybrid` re-fused at the cross-validated weight",
    "seams/hybrid-packed-chunks": "**`seams search --budget`**, whole hits (before passages)",
    "seams/hybrid-packed-passages": "**`seams search --budget`**, passages",
    "seams-chunks/bm25": "Seams' chunks, plain BM25 of this benchmark (diagnostic)",
}


def markdown(payload: dict[str, Any]) -> str:
    """The results as Markdown tables (best value per column in bold), for the docs."""
    lines = []
    for name, block in payload["results"].items():
        rows = block["systems"]
        columns = [f"recall@{K}", *(f"recall@{b}t" for b in BUDGETS), "ndcg@10"]
        best = {c: max(r[c] for r in rows.values()) for c in columns}
        lines += [
            f"#### {name}: {block['documents']} documents, {block['questions']} questions, "
            f"{block['words']:,} words",
            "",
            f"Source: {block['source']}.",
            "",
            f"| system | chunks | tokens p50 | recall@{K} | "
            + " | ".join(f"recall at {b:,} tokens" for b in BUDGETS)
            + " | nDCG@10 (documents) |",
            "|---|---:|---:|---:|" + "---:|" * len(BUDGETS) + "---:|",
        ]
        for key, row in rows.items():
            cells = [
                f"**{row[c]:.3f}**" if row[c] >= best[c] - 1e-12 else f"{row[c]:.3f}"
                for c in columns
            ]
            lines.append(
                f"| {LABELS.get(key, key)} | {row['chunks']} | {row['tokens_p50']:.0f} | "
                + " | ".join(cells)
                + " |"
            )
        lines.append("")
    for key, title in (
        ("fusion_cv", "leave one set out"),
        ("fusion_cv_halves", "leave one fold out, COVID-QA in two halves"),
    ):
        for size, fusion in (payload.get(key) or {}).items():
            lines += ["", f"#### Fusion weight, {title}: candidate pool {size} per side"]
            lines += fusion_lines(fusion)
    if payload.get("fusion_variants"):
        lines += ["", "#### Fusion rules on the same candidate pools"]
        lines += variant_lines(payload["fusion_variants"])
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["--seams-worker"]:
        return seams_worker(Path(argv[1]), Path(argv[2]))
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA, help="folder of squad-dev-5")
    parser.add_argument("--no-squad", action="store_true", help="leave out the SQuAD set")
    parser.add_argument("--covid-qa", type=Path, help="200423_covidQA.json or its folder")
    parser.add_argument("--covid-docs", type=int, default=40, help="COVID-QA articles sampled")
    parser.add_argument(
        "--qasper", type=Path,
        help="qasper-original-sample.json or its folder, or a QASPER file in allenai's layout",
    )  # fmt: skip
    parser.add_argument(
        "--qasper-docs", type=int, help="QASPER papers sampled (default: every paper of the file)"
    )
    parser.add_argument(
        "--questions", type=int,
        help="score at most this many questions per set (a fixed sample by id; all documents)",
    )  # fmt: skip
    parser.add_argument("--systems", nargs="*", default=list(BASELINES), choices=BASELINES)
    parser.add_argument("--no-seams", action="store_true", help="skip the Seams product runs")
    parser.add_argument(
        "--seams-revision", default="HEAD",
        help="git revision whose product code the Seams runs import (worktree: the files as is)",
    )  # fmt: skip
    parser.add_argument("--cache-dir", type=Path, default=DEFAULT_CACHE_DIR)
    parser.add_argument("--json", type=Path, help="write the results here")
    parser.add_argument(
        "--pools", type=Path, help="write the hybrid candidate pools here (fusion studies)"
    )
    parser.add_argument("--render", type=Path, help="print the Markdown tables of this JSON")
    parser.add_argument(
        "--fusion-study", type=Path,
        help="print the fusion rules' table for a --pools file of an earlier run, then stop",
    )  # fmt: skip
    args = parser.parse_args(argv)
    if args.fusion_study:
        from seams.storage.search import fuse_scores

        pools = read_pools(args.fusion_study)
        print("\n".join(variant_lines(fusion_variants(pools, fuse_scores))))
        return 0
    if args.render:
        print(markdown(json.loads(args.render.read_text(encoding="utf-8"))))
        return 0
    return run_and_report(args, argv, run, print_table)


if __name__ == "__main__":
    raise SystemExit(main())
