# Two commands on a fresh machine: `make demo` and `make test`. Each creates .venv when missing
# (torch's CPU wheel first, so pip never pulls a CUDA build), then runs.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
export HF_HUB_OFFLINE := 1
export TRANSFORMERS_OFFLINE := 1

.PHONY: demo test test-tl4 test-notebooks test-other-tiers test-retrain test-all bench lint format docs clean-venv

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

# The TransformerLens 4 tier (issue 41): a second virtual environment from
# requirements-tl4.txt (TL 4.3, no sae_lens), the package installed without its dependencies
# (pyproject.toml pins TL < 4), and only tests/tl4 and the bridge's docstring examples collected:
# `-c /dev/null` drops pyproject's options (testpaths, --doctest-modules over the whole package)
# and `--confcutdir tests/tl4` keeps the root and tests/ conftests (which import TL 3.9 and
# sae_lens) out.
VENV_TL4 ?= .venv-tl4
PY_TL4 := $(VENV_TL4)/bin/python
STAMP_TL4 := $(VENV_TL4)/.installed

$(STAMP_TL4): requirements-tl4.txt pyproject.toml
	test -x $(PY_TL4) || $(PYTHON) -m venv $(VENV_TL4)
	$(PY_TL4) -m pip install --quiet torch==2.13.0
	$(PY_TL4) -m pip install --quiet -r requirements-tl4.txt "pytest>=9,<10"
	$(PY_TL4) -m pip install --quiet --no-deps -e .
	touch $(STAMP_TL4)

test-tl4: $(STAMP_TL4)
	$(PY_TL4) -c "import importlib.metadata as m; print('TransformerLens', m.version('transformer-lens'))"
	OMP_NUM_THREADS=1 $(PY_TL4) -m pytest tests/tl4 reward_lens_tl/bridge -q -p no:cacheprovider \
		-c /dev/null --rootdir . --confcutdir tests/tl4 --doctest-modules \
		-o "doctest_optionflags=ELLIPSIS NORMALIZE_WHITESPACE"

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
	rm -rf $(VENV) $(VENV_TL4)
