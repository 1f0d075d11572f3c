# The two commands of the README: `make run` and `make test`. Both create .venv when missing.
# `make test-fast`: the unit and contract tests only (no snakemake, peer libraries, SLURM or browser; pyproject's
# markers), for the edit-test loop.
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.calbench-installed
CORES ?= all
# One BLAS/OpenMP thread per job: Snakemake (and pytest-xdist) already run one job per core, and
# oversubscribed BLAS threads were measured up to 80x slower on a shared 2-core machine.
export OMP_NUM_THREADS ?= 1
export OPENBLAS_NUM_THREADS ?= 1
export MKL_NUM_THREADS ?= 1

# The tests run in a random order (pytest-randomly), its seed printed: `make test SEED=N` repeats an order.
ifeq ($(origin SEED), undefined)
SEED := $(shell python3 -c 'import random; print(random.randrange(1, 10**6))')
endif
PYTEST := $(VENV)/bin/pytest -n 2 --dist loadgroup -q -p randomly --randomly-seed=$(SEED)

.PHONY: run test test-fast fuzz bench docs report choosing clean

$(STAMP): pyproject.toml
	test -x $(PY) || python3 -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[models,test,reference]'
	$(PY) -m pip install --quiet --no-deps 'torchcp>=1.2,<1.3'  # see pyproject's `reference` extra: torchsort does not build
	$(PY) -m calbench compile  # numba kernels into their cache, once, instead of in the first jobs that use them
	touch $(STAMP)

run: $(STAMP)  ## the default benchmark (config/config.yaml) → results/tables, then its report
	$(VENV)/bin/snakemake --cores $(CORES) --configfile config/config.yaml
	$(MAKE) report

test: $(STAMP)  ## the linters (ruff, snakefmt), then the whole test suite, in a random order (its seed printed)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/snakefmt --check Snakefile workflow/rules
	@echo "pytest: random order, seed $(SEED) (make test SEED=$(SEED) repeats it)"
	$(PYTEST)

test-fast: $(STAMP)  ## the linter, then the unit and contract tests (no workflow, peers, slurm or browser tests)
	$(VENV)/bin/ruff check .
	@echo "pytest: random order, seed $(SEED) (make test-fast SEED=$(SEED) repeats it)"
	$(PYTEST) -m "not workflow and not peers and not slurm and not browser"

fuzz: $(STAMP)  ## a long fuzzing run of saved-calibrator loading (FUZZ=5000 forgeries, FUZZ_SEED=0)
	CALBENCH_FUZZ=$(or $(FUZZ),5000) CALBENCH_FUZZ_SEED=$(or $(FUZZ_SEED),0) $(VENV)/bin/pytest -q tests/contract/test_fuzz_calibrators.py

bench: $(STAMP)  ## timings of the main operations → results/bench/bench.json (ONLY=scale_ for one section)
	$(PY) -m calbench.perf --only "$(ONLY)" --out results/bench/bench.json

docs: $(STAMP)  ## the docs' measured tables from the records of docs/measurements/ (scripts/docs_blocks.py)
	$(PY) scripts/docs_blocks.py

report: $(STAMP)  ## HTML report of the last run, and the screenshot of its first screen in docs/
	$(PY) -m calbench report config/config.yaml -o results/report.html
	$(PY) scripts/report_screenshot.py results/report.html docs/report_first_screen.png

choosing: $(STAMP)  ## the runs behind docs/choosing.md (scripts/choosing.yaml, ../shared/data), then the page
	$(PY) scripts/choosing.py run --work results/choosing --cores $(CORES)

clean:
	rm -rf results logs benchmarks .snakemake
