# arecall: two commands from a fresh clone with Python 3.11+ on the machine.
#   make repro  — create .venv if missing, install, run `dvc repro`, sync the README's and the
#                 docs' generated tables, print tables
#   make test   — same install, run the test suite
#   make docs   — the documentation site (docs/, mkdocs.yml) built with --strict into site/
SHELL := /bin/bash
export MLFLOW_DISABLE_TELEMETRY := true
export DVC_NO_ANALYTICS := 1
export PYTHONHASHSEED := 0
# mkdocs-material's banner about MkDocs 2.0 (not a warning about these docs)
export NO_MKDOCS_2_WARNING := 1

PYTHON ?= python3
PORT ?= 5000
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: install repro test test-faults docs exps lint bench-evaluate bench-vector ui clean

$(STAMP): pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev,docs,cluster,chroma,milvus]'
	$(BIN)/python tests/_ranx_warmup.py
	@touch $(STAMP)

install: $(STAMP)

# the committed numbers come from conf/'s defaults: a workspace holding another config (after a
# `dvc exp run`, or a hand edit) is refused in one line saying how to reset, before dvc runs
repro: $(STAMP)
	@$(BIN)/arecall readme --params-only
	PATH="$(CURDIR)/$(BIN):$$PATH" $(BIN)/dvc repro
	$(BIN)/arecall readme
	@cat reports/tables.md

test: $(STAMP)
	$(BIN)/python -m pytest -n 2 --dist loadfile -m "not faults and not long"

# fault injection (kill -9 at every stage, signals, tracking outages, concurrent runs) and the
# longest end-to-end runs (dvc repro and DVC experiments on a fresh copy, queued experiments, sweeps
# on a real mlflow server and on a Dask cluster, the DVC remote): minutes; CI runs it
test-faults: $(STAMP)
	$(BIN)/python -m pytest -n 2 --dist loadfile -m "faults or long"

# the documentation site; --strict: a broken link or anchor, a page missing from the nav or a
# stale API name fails
docs: $(STAMP)
	$(BIN)/mkdocs build --strict

lint: $(STAMP)
	$(BIN)/ruff check src tests benchmarks
	$(BIN)/ruff format --check src tests benchmarks
	$(BIN)/mypy

bench-evaluate: $(STAMP)
	$(BIN)/python benchmarks/bench_evaluate.py

bench-vector: $(STAMP)
	$(BIN)/python benchmarks/bench_vector.py

# DVC experiments side by side, one screen: the config choices that differ and the headline per
# K, the best bold (the full view: .venv/bin/dvc exp show)
exps: $(STAMP)
	@$(BIN)/arecall compare --dvc --out -

# MLflow's UI on mlflow.db (or MLFLOW_TRACKING_URI); Ctrl-C or SIGTERM stops every process of it
ui: $(STAMP)
	@$(BIN)/arecall ui --port $(PORT)

clean:
	rm -rf outputs multirun site .pytest_cache .mypy_cache .ruff_cache
