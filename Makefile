# The two commands of the README, plus a few for developers. Needs only Python 3.11, pip and make.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.seams-installed

.PHONY: install demo test lint format bench

$(STAMP): pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	# CPU torch first (a local wheel here), so nothing below resolves a multi-GB CUDA build.
	$(BIN)/python -m pip install -q torch==2.13.0
	$(BIN)/python -m pip install -q -e '.[export,dev,celery,langchain,llama-index,parquet]'
	@touch $@

install: $(STAMP)

demo: install
	$(BIN)/seams run

test: install
	$(BIN)/python -m pytest

bench: install
	$(BIN)/python -m pip install -q torch==2.13.0 -e '.[export,bench]'
	$(BIN)/python -m benchmarks

lint: install
	$(BIN)/ruff check . && $(BIN)/ruff format --check .

format: install
	$(BIN)/ruff format . && $(BIN)/ruff check --fix .
