# Two commands on a fresh machine: `make demo` and `make test`. Each creates .venv when missing
# (torch's CPU wheel first, so pip never pulls a CUDA build), then runs.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
export HF_HUB_OFFLINE := 1
export TRANSFORMERS_OFFLINE := 1

.PHONY: demo test test-notebooks test-all bench lint format clean-venv

$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet torch==2.13.0
	$(PY) -m pip install --quiet -e ".[dev]"
	touch $(STAMP)

demo: $(STAMP)
	$(VENV)/bin/reward-lens demo --out reports/demo

test: $(STAMP)
	$(PY) -m pytest -m "not slow" -q

test-notebooks: $(STAMP)
	$(PY) -m pytest -q tests/test_notebooks.py

test-all: $(STAMP)
	$(PY) -m pytest -q

bench: $(STAMP)
	$(PY) benchmarks/run_all.py

lint: $(STAMP)
	$(VENV)/bin/ruff check reward_lens_tl tests benchmarks
	$(VENV)/bin/ruff format --check reward_lens_tl tests benchmarks

format: $(STAMP)
	$(VENV)/bin/ruff format reward_lens_tl tests benchmarks
	$(VENV)/bin/ruff check --fix reward_lens_tl tests benchmarks

clean-venv:
	rm -rf $(VENV)
