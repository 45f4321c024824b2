"""The data dir is its owner's alone: after a real `seams run`, another local user (`nobody`)
cannot read a single file under it, not even those an older Seams left readable, while the
embedded PostgreSQL (another system user, as root) still reaches its own folder and socket.

Before: `dagster_home` was 0755 and its compute logs (file names, extraction warnings) 0644
under a 0711 data dir, so anyone who knew or guessed a path could read them.
"""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from seams.models.model_store import ModelManifest
from seams.resources.embedded_server import server_tempdir
from tests.support.samples import SHORT_DOC

AS_ROOT = os.geteuid() == 0

# Runs as `nobody`: prints every path given on stdin (NUL-separated) that it can open for
# reading, or list when a folder. `test -r` asks the kernel with nobody's own ids.
_READABLE_BY_NOBODY = 'for f; do if [ -r "$f" ]; then printf "%s\\n" "$f"; fi; done'


def readable_by_nobody(paths: list[Path]) -> list[str]:
    done = subprocess.run(
        ["runuser", "-u", "nobody", "--", "xargs", "-0", "sh", "-c", _READABLE_BY_NOBODY, "sh"],
        input="\0".join(map(str, paths)), capture_output=True, text=True, timeout=120, cwd="/",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return done.stdout.splitlines()


def everything_under(folder: Path) -> list[Path]:
    found = [folder]
    for root, dirs, files in os.walk(folder):
        found += [Path(root, name) for name in dirs + files]
    return found


@pytest.mark.slow
@pytest.mark.skipif(not AS_ROOT, reason="acting as another local user (runuser) needs root")
def test_nobody_can_read_any_file_under_the_data_dir(
    exported_model: ModelManifest, tmp_path: Path
) -> None:
    root = server_tempdir("seams-priv-")
    data_dir = root / "data"
    try:
        # An install an older Seams left open: a 0755 model folder and Dagster home, a 0644 log.
        models = data_dir / "models" / exported_model.directory.name
        shutil.copytree(exported_model.directory, models)
        for folder in (data_dir, data_dir / "models", models):
            folder.chmod(0o755)
        old_home = data_dir / "dagster_home"
        old_home.mkdir(mode=0o755)
        old_home.chmod(0o755)
        (old_home / "old-run.log").write_text("inbox/secret-plans.md: 3 warnings\n")
        (old_home / "old-run.log").chmod(0o644)
        assert readable_by_nobody([old_home / "old-run.log", models / "tokenizer.json"])

        inbox = tmp_path / "inbox"
        inbox.mkdir()
        (inbox / "tides.md").write_text(SHORT_DOC, encoding="utf-8")
        env = {k: v for k, v in os.environ.items() if not k.startswith(("SEAMS_", "DAGSTER_"))}
        env["SEAMS_DATA_DIR"] = str(data_dir)
        done = subprocess.run(
            [sys.executable, "-m", "seams", "run", str(inbox)],
            env=env, capture_output=True, text=True, timeout=600,
        )  # fmt: skip
        assert done.returncode == 0, done.stdout + done.stderr
        assert "documents:      1 (0 failed)" in done.stdout

        paths = everything_under(data_dir)
        assert len(paths) > 100  # the cluster, the model, Dagster's home and logs
        assert any("compute_logs" in str(p) for p in paths)
        assert readable_by_nobody(paths) == []
        # What the run created is closed by its own mode, not only by a closed parent.
        for path in (data_dir / "dagster_home").rglob("*"):
            if path.stat().st_mtime >= (inbox / "tides.md").stat().st_mtime:
                assert not stat.S_IMODE(path.stat().st_mode) & 0o077, path
        # The data dir: only enterable (the server's user passes through to its own folder).
        assert stat.S_IMODE(data_dir.stat().st_mode) == 0o711
        pgdata = data_dir / "postgres"
        assert stat.S_IMODE(pgdata.stat().st_mode) == 0o700
        assert pgdata.stat().st_uid != os.geteuid()  # the server's own, as PostgreSQL needs
    finally:
        subprocess.run(
            [sys.executable, "-m", "seams", "db", "stop"],
            env={**os.environ, "SEAMS_DATA_DIR": str(data_dir)}, capture_output=True,
        )  # fmt: skip
        shutil.rmtree(root, ignore_errors=True)
