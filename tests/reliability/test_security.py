"""Security: no string-formatted SQL anywhere in the product, the UI on loopback by default, and
clear one-line errors (never a traceback) when the data dir cannot be used.
"""

from __future__ import annotations

import ast
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from seams.orchestration.cli import build_parser

REPO = Path(__file__).resolve().parents[2]
SCANNED = ("seams", "chunking", "resources", "assets", "orchestration", "benchmarks", "scripts")
SQL_START = re.compile(
    # Statements as this code base writes them: upper-case keywords at the start of the text.
    r"^\s*(SELECT\s.*\bFROM\b|SELECT\s+\w+\(|INSERT\s+INTO|UPDATE\s+\S+\s+SET|DELETE\s+FROM|"
    r"CREATE\s+(OR\s+REPLACE\s+)?(UNIQUE\s+)?(TABLE|INDEX|SCHEMA|VIEW|DATABASE|EXTENSION|ROLE|"
    r"MATERIALIZED)|DROP\s+[A-Z]+|ALTER\s+[A-Z]+|TRUNCATE\s|COPY\s+\S+|GRANT\s|REVOKE\s|"
    r"VACUUM\b|WITH\s+\w+\s+AS\s*\()",
    re.DOTALL,
)
EXECUTORS = {"execute", "executemany", "copy", "stream", "mogrify"}


@dataclass(frozen=True)
class Finding:
    path: str
    line: int
    why: str

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: {self.why}"


def _literal_text(node: ast.AST) -> str | None:
    """The constant text of a str literal or the constant parts of an f-string."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):
        return "".join(
            v.value for v in node.values if isinstance(v, ast.Constant) and isinstance(v.value, str)
        )
    return None


def _formatted(node: ast.AST) -> tuple[str, str] | None:
    """(how, constant text) when `node` builds a string from a template and runtime values."""
    if isinstance(node, ast.JoinedStr) and any(
        isinstance(v, ast.FormattedValue) for v in node.values
    ):
        return "f-string", _literal_text(node) or ""
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mod):
        text = _literal_text(node.left)
        if text is not None:
            return "% formatting", text
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        parts = [_literal_text(side) for side in (node.left, node.right)]
        if any(p is not None for p in parts) and any(p is None for p in parts):
            return "+ concatenation", "".join(p for p in parts if p)
        if all(p is not None for p in parts) and any(
            isinstance(side, ast.JoinedStr) for side in (node.left, node.right)
        ):
            return "+ concatenation", "".join(p for p in parts if p)
    if (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "format"
    ):
        text = _literal_text(node.func.value)  # "...".format(); sql.SQL("...").format() is fine
        if text is not None:
            return ".format()", text
    return None


def scan_source(source: str, path: str) -> list[Finding]:
    """String-formatted SQL in `source`: text built by f-string, %, + or str.format that either
    starts like a SQL statement (wherever it is) or is the query of an `execute`/`executemany`/
    `copy` call, directly or through a variable."""
    tree = ast.parse(source, filename=path)
    findings: list[Finding] = []
    built: dict[str, ast.AST] = {}  # names assigned a formatted string, per module (coarse)
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and _formatted(node.value):
            for target in node.targets:
                if isinstance(target, ast.Name):
                    built[target.id] = node.value
        found = _formatted(node)
        if found and SQL_START.match(found[1]) and not _is_message(node, tree):
            findings.append(Finding(path, node.lineno, f"SQL built by {found[0]}"))
    for node in ast.walk(tree):
        if not (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr in EXECUTORS
            and node.args
        ):
            continue
        query = node.args[0]
        if isinstance(query, ast.Name) and query.id in built:
            query = built[query.id]
        found = _formatted(query)
        if found:
            findings.append(Finding(path, node.lineno, f"{node.func.attr}() of a {found[0]}"))
    return sorted(set(findings), key=lambda f: f.line)


def _is_message(node: ast.AST, tree: ast.AST) -> bool:
    """A formatted string that is an argument of an exception or a log/print call (messages
    may quote SQL for the user, e.g. "run `DROP TABLE x` and re-materialize")."""
    for parent in ast.walk(tree):
        if isinstance(parent, ast.Call) and any(arg is node for arg in parent.args):
            func = parent.func
            name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
            if name.endswith(("Error", "Exception", "Warning")) or name in {
                "print", "info", "warning", "error", "debug", "exception", "log", "report", "_say",
            }:  # fmt: skip
                return True
    return False


def _python_files() -> Iterator[Path]:
    for folder in SCANNED:
        yield from sorted((REPO / folder).rglob("*.py"))


def test_the_scanner_finds_every_kind_of_string_formatted_sql() -> None:
    bad = """
def f(conn, table, key, cur):
    conn.execute(f"SELECT * FROM {table} WHERE k = '{key}'")
    conn.execute("DELETE FROM %s" % table)
    cur.execute("INSERT INTO t VALUES (" + key + ")")
    conn.execute("UPDATE t SET a = {}".format(key))
    query = f"DROP TABLE {table}"
    conn.execute(query)
    statement = "COPY {} FROM STDIN".format(table)
    with cur.copy(statement) as copy:
        pass
    where = " WHERE batch_key = '" + key + "'"
    conn.execute("SELECT 1" + where)
"""
    lines = {f.line for f in scan_source(bad, "bad.py")}
    assert {3, 4, 5, 6, 7, 8, 9, 10, 13} <= lines, sorted(lines)

    good = """
from psycopg import sql
def f(conn, table, key, name):
    conn.execute("SELECT * FROM t WHERE k = %s", (key,))
    conn.execute(sql.SQL("DELETE FROM {} WHERE k = %s").format(sql.Identifier(table)), (key,))
    conn.execute("SELECT count(*) FROM seams.chunks"
                 " WHERE batch_key = ANY(%s)", ([key],))
    raise ValueError(f"run `DROP TABLE {table} CASCADE` and re-materialize")
    label = f"table {name} has {key} rows"
"""
    assert scan_source(good, "good.py") == []


def test_no_string_formatted_sql_in_the_product() -> None:
    files = list(_python_files())
    assert len(files) > 30  # the scan really looked at the code
    findings = [
        finding
        for path in files
        for finding in scan_source(path.read_text(encoding="utf-8"), str(path.relative_to(REPO)))
    ]
    assert not findings, "SQL must be parameterised; identifiers via psycopg.sql:\n" + "\n".join(
        map(str, findings)
    )


def test_the_ui_binds_to_loopback_by_default() -> None:
    args = build_parser().parse_args(["dev"])
    assert args.host == "127.0.0.1"
    for path in _python_files():
        text = path.read_text(encoding="utf-8")
        assert "0.0.0.0" not in text, f"{path}: binds to every interface"


# --- the data dir cannot be used ---------------------------------------------------------------


def _seams(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "seams", *args],
        env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip


def _clean_env(data_dir: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SEAMS_", "DAGSTER_"))}
    env["SEAMS_DATA_DIR"] = data_dir
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    return env


def _assert_one_line_error(done: subprocess.CompletedProcess, names: str) -> None:
    assert done.returncode == 2, done.stdout + done.stderr
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith("seams: error:") and names in lines[0], lines[0]
    assert "Traceback" not in done.stderr + done.stdout


@pytest.mark.services
@pytest.mark.parametrize("layout", ["data dir is a file", "parent is a file"])
def test_an_unusable_data_dir_is_one_clear_line(tmp_path: Path, layout: str) -> None:
    blocker = tmp_path / "blocker"
    blocker.write_text("not a folder")
    data_dir = blocker if layout == "data dir is a file" else blocker / "data"
    done = _seams("db", "start", env=_clean_env(str(data_dir)))
    _assert_one_line_error(done, str(blocker))


@pytest.mark.skipif(os.geteuid() == 0, reason="root may write anywhere")
def test_a_read_only_data_dir_is_one_clear_line(tmp_path: Path) -> None:
    locked = tmp_path / "locked"
    locked.mkdir(mode=0o500)
    try:
        done = _seams("db", "start", env=_clean_env(str(locked / "data")))
        _assert_one_line_error(done, str(locked))
    finally:
        locked.chmod(0o700)
