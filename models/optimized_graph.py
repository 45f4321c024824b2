"""An ONNX graph as onnxruntime optimizes it, kept beside the model, so that opening a session
reads a prepared graph instead of preparing it again.

Opening the packaged graph parses every weight out of one protobuf and optimizes the graph,
on every open; a quick command (`seams search`) opens one session per call, so that is most of
what it spends outside its imports. onnxruntime can save the graph it optimized
(`optimized_model_filepath`) with its weights in a separate file, read as they lie instead of
parsed out of the graph: opening that copy costs about a third of the CPU.

The copy is saved at the extended optimization level, which onnxruntime documents as portable
across CPUs (the hardware-specific layout step of the full level still runs at every open, as
before), and it is opened with the same options as the original: it computes bit for bit what
the original computes. An entry (`.onnxruntime/<graph>-<key>/` in the graph's folder; hidden, so
no folder fingerprint and no manifest counts it) is keyed by the original's stamp (inode, size,
mtime, ctime) and the onnxruntime version: a re-export, an upgrade or a copied folder makes a
new one and the old ones are removed. Its own files are trusted while their stamps are those
recorded when they were written, the trust `.verified.json` gives the originals. A folder that
cannot be written opens the original every time; nothing fails for want of the copy.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
import tempfile
import time
from pathlib import Path

import onnxruntime as ort

log = logging.getLogger(__name__)

CACHE_DIR = ".onnxruntime"
GRAPH = "model.onnx"
WEIGHTS = "model.onnx.data"  # named inside GRAPH, relative to it: the pair moves together
STAMPS = "stamps.json"
STAGING = ".tmp-"
SAVED_LEVEL = ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED
WEIGHTS_MIN_BYTES = 1024  # smaller initializers stay inside the graph


def _stamp(path: Path) -> list[int]:
    st = path.stat()
    return [st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns]


def _entry(source: Path) -> Path:
    key = json.dumps([source.name, _stamp(source), ort.__version__])
    digest = hashlib.sha256(key.encode()).hexdigest()[:16]
    return source.parent / CACHE_DIR / f"{source.name}-{digest}"


def optimized_graph(source: Path, options: ort.SessionOptions, providers: list[str]) -> Path:
    """The graph to open for `source`: its optimized copy (saved now if missing), or `source`
    itself where no copy can be kept. `options` and `providers` are those the caller opens with
    (the copy is saved with the same threads and providers, at `SAVED_LEVEL`)."""
    try:
        entry = _entry(source)
        if _intact(entry):
            return entry / GRAPH
        _save(source, entry, options, providers)
        return entry / GRAPH
    except Exception as exc:  # onnxruntime raises its own types; a failed copy is only slower
        log.debug("no optimized copy of %s kept (%s); opening the original", source, exc)
        return source


def _intact(entry: Path) -> bool:
    try:
        recorded = json.loads((entry / STAMPS).read_text())
        return recorded == {name: _stamp(entry / name) for name in (GRAPH, WEIGHTS)}
    except (OSError, ValueError):
        return False


def _save(source: Path, entry: Path, options: ort.SessionOptions, providers: list[str]) -> None:
    """onnxruntime's optimized graph of `source` written into a staging folder beside `entry`,
    stamped, then renamed to `entry` in one step (a concurrent writer's finished entry wins);
    older entries of the same graph are removed."""
    entry.parent.mkdir(mode=0o700, exist_ok=True)
    _remove_leftovers(entry)
    staging = Path(tempfile.mkdtemp(prefix=STAGING, dir=entry.parent))
    try:
        saving = ort.SessionOptions()
        saving.intra_op_num_threads = options.intra_op_num_threads
        saving.inter_op_num_threads = options.inter_op_num_threads
        saving.log_severity_level = options.log_severity_level
        saving.graph_optimization_level = SAVED_LEVEL
        saving.optimized_model_filepath = str(staging / GRAPH)
        saving.add_session_config_entry(
            "session.optimized_model_external_initializers_file_name", WEIGHTS
        )
        saving.add_session_config_entry(
            "session.optimized_model_external_initializers_min_size_in_bytes",
            str(WEIGHTS_MIN_BYTES),
        )
        ort.InferenceSession(str(source), saving, providers=providers)
        stamps = {name: _stamp(staging / name) for name in (GRAPH, WEIGHTS)}
        (staging / STAMPS).write_text(json.dumps(stamps))
        try:
            os.rename(staging, entry)
        except OSError:
            if not _intact(entry):
                raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def _remove_leftovers(entry: Path) -> None:
    """Before a save: the graph's other entries (older keys, or this one damaged) and staging
    folders a killed process left (an hour old: a live writer's is younger)."""
    graph = entry.name.rsplit("-", 1)[0]
    for path in entry.parent.iterdir():
        stale = path.name.startswith(f"{graph}-") or (
            path.name.startswith(STAGING) and time.time() - path.stat().st_mtime > 3600
        )
        if stale:
            shutil.rmtree(path, ignore_errors=True)
