# Two commands on a fresh machine: `make demo` and `make test`. Each creates .venv when missing
# (torch's CPU wheel first, so pip never pulls a CUDA build), then runs.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
export HF_HUB_OFFLINE := 1
export TRANSFORMERS_OFFLINE := 1

.PHONY: demo test test-notebooks test-other-tiers test-retrain test-all bench lint format docs clean-venv

$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet torch==2.13.0
	$(PY) -m pip install --quiet -e ".[dev]"
	touch $(STAMP)

demo: $(STAMP)
	$(VENV)/bin/reward-lens report --out reports/demo

# Test tiers (CONTRIBUTING.md): the fast tier is every test and docstring example not marked
# with one of the other tiers' markers; `test-other-tiers` runs the CI tiers but the fast one (CI
# runs it after `test`); `test-retrain` the full zoo retrain (not a CI gate: see its docstring);
# `test-all` every tier. RUN_RETRAIN=1 lets the retrain run without `-m retrain`.
OTHER_TIERS := slow or notebooks or torchrun or browser or docs

test: $(STAMP)
	$(PY) -m pytest -m "not ($(OTHER_TIERS) or retrain)" -q

test-notebooks: $(STAMP)
	$(PY) -m pytest -m notebooks -q

test-other-tiers: $(STAMP)
	$(PY) -m pytest -m "($(OTHER_TIERS)) and not retrain" -q

test-retrain: $(STAMP)
	$(PY) -m pytest -m retrain -q

test-all: $(STAMP)
	RUN_RETRAIN=1 $(PY) -m pytest -q

# The documentation site, built strictly (a warning fails it) into site/ (not committed).
docs: $(STAMP)
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict

# The standing comparison against the peers (issue 39; writes its table into
# benchmarks/RESULTS.md; nnsight's row where nnsight is installed), then every other benchmark.
bench: $(STAMP)
	$(PY) benchmarks/bench_peers.py --write --loading --repeats 3
	$(PY) benchmarks/run_all.py

lint: $(STAMP)
	$(VENV)/bin/ruff check reward_lens_tl tests benchmarks docs tools
	$(VENV)/bin/ruff format --check reward_lens_tl tests benchmarks docs tools
	$(VENV)/bin/mypy reward_lens_tl

format: $(STAMP)
	$(VENV)/bin/ruff format reward_lens_tl tests benchmarks docs tools
	$(VENV)/bin/ruff check --fix reward_lens_tl tests benchmarks docs tools

clean-venv:
	rm -rf $(VENV)
