# neurodyn: `make demo` and `make test` each create the virtualenv when it is missing.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed-stamp
export OMP_NUM_THREADS ?= 2
# OpenMP threads that sleep instead of spinning while they wait: with another busy process on the machine, spinning
# threads made the demo's 2-thread FNO epoch 40x slower (130 s instead of 3.6 s measured side by side)
export OMP_WAIT_POLICY ?= PASSIVE

.PHONY: install demo test test-fast lab-test lint format docs dist bench clean

$(STAMP): pyproject.toml constraints.txt
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -c constraints.txt -e '.[dev]'
	$(BIN)/neurodyn build-kernels --allow-missing
	touch $(STAMP)

install: $(STAMP)

# Generate Darcy (1000 train / 200 test, 32x32 solved at 63x63), train a small FNO (width 24, 8x8 modes,
# 0.6 M parameters, 20 epochs; the cpu preset's 2.4 M-parameter FNO for 60 epochs takes 5-15 minutes),
# print the test metrics, write plots to runs/demo. Running it again resumes the finished run and re-evaluates.
demo: $(STAMP)
	$(BIN)/neurodyn train fno/darcy --scale cpu --run-name demo model.width=24 'model.modes=[8,8]' train.epochs=20
	@echo "plots: runs/demo/predictions.png runs/demo/learning_curve.png; table: runs/demo/summary.md"

# the tests run in one worker process per core (pytest-xdist; TEST_WORKERS=0 runs them in this process)
TEST_WORKERS ?= auto

test: $(STAMP)
	$(BIN)/python -m pytest -q -n $(TEST_WORKERS)

# everything but the tests marked @pytest.mark.slow (multi-process runs, compiles, end-to-end trainings)
test-fast: $(STAMP)
	$(BIN)/python -m pytest -q -n $(TEST_WORKERS) -m "not slow"

# the laboratory's tests (lab/: its records, pages and drivers), after the library's
lab-test: $(STAMP)
	$(MAKE) -C lab test PYTHON=$(abspath $(BIN))/python

# the documentation site, offline, into site/: the guides, the API reference from the docstrings, the examples and
# the results pages (docs/build_site.py), built with mkdocs --strict (a broken link or reference fails it)
docs: $(STAMP)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -c constraints.txt -e '.[docs]'
	$(BIN)/python docs/build_site.py
	PYTHONPATH=docs $(BIN)/mkdocs build --strict --quiet
	@echo "documentation site: site/index.html"

# the wheel and the source distribution into dist/, checked as a package index would render them (twine check)
dist: $(STAMP)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -c constraints.txt build twine
	rm -rf dist
	$(BIN)/python -m build --outdir dist .
	$(BIN)/twine check --strict dist/*

# ruff (configured in pyproject.toml) on the sources, the tests, the examples, the benchmark scripts and the
# laboratory: its lint rules with import sorting, and `ruff format` (`make format` rewrites); the tracked tree's size
# rules (no file over 2 MB, under 20 MB in all, no checkpoint at rest: .ci/check_tree.py)
LINTED := src tests benchmarks examples docs lab .ci
lint: $(STAMP)
	$(BIN)/ruff check $(LINTED)
	$(BIN)/ruff format --check $(LINTED)
	$(BIN)/python .ci/check_tree.py

# lay the code out and sort the imports as `make lint` checks
format: $(STAMP)
	$(BIN)/ruff check --select I --fix $(LINTED)
	$(BIN)/ruff format $(LINTED)

# Optional benchmark dependencies (neuraloperator, mambapy), then the benchmarks.
bench: $(STAMP)
	$(BIN)/python -m pip install --quiet -c constraints.txt -e '.[dev,bench]'
	$(BIN)/python benchmarks/fno_speed.py
	$(BIN)/neurodyn bench scan

clean:
	rm -rf $(VENV) runs build site dist src/*.egg-info
