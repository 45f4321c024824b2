"""The framework extras stay optional: `import seams` never imports LangChain or LlamaIndex, and
an adapter imported without its extra says which one to install. Each check runs in a fresh
interpreter, so what other tests imported cannot hide an eager import."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

FRAMEWORKS = ("langchain", "langchain_core", "langchain_text_splitters", "llama_index")


def _run(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def test_importing_seams_and_chunking_imports_no_framework() -> None:
    done = _run(
        f"""
        import json, sys
        import seams, seams.integrations, seams.integrations.chunker
        chunks = seams.chunk_text("One sentence here. And another one.", document_id="d")
        loaded = sorted(m for m in sys.modules if m.split(".")[0] in {FRAMEWORKS!r})
        print(json.dumps({{"frameworks": loaded, "chunks": len(chunks)}}))
        """
    )
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert report == {"frameworks": [], "chunks": 1}


def test_an_adapter_without_its_extra_names_the_extra() -> None:
    for module, blocked, extra in (
        ("seams.integrations.langchain", "langchain_text_splitters", "seams-chunking[langchain]"),
        ("seams.integrations.llama_index", "llama_index", "seams-chunking[llama-index]"),
    ):
        done = _run(
            f"""
            import sys
            sys.modules[{blocked!r}] = None  # as if the extra were not installed
            import {module}
            """
        )
        assert done.returncode != 0
        assert "ImportError" in done.stderr and extra in done.stderr, done.stderr
