# Two commands on a fresh clone with only Python 3.11: `make run` and `make test`.
# Both create .venv when it is missing and (re)install the project with its test and bench
# extras whenever pyproject.toml is newer than the install stamp. `make bench` runs the
# bookie bench (see bench/README.md).

PYTHON ?= $(shell command -v python3.11 >/dev/null 2>&1 && echo python3.11 || echo python3)
VENV := .venv
STAMP := $(VENV)/.minipulsar-installed
DATA_DIR ?= data/standalone
RUN_ARGS ?=      # extra standalone flags, e.g. RUN_ARGS='--bookies 3'
PYTEST_ARGS ?=   # e.g. PYTEST_ARGS='tests/unit -x'
BENCH_ARGS ?=    # e.g. BENCH_ARGS='--journal-dir /mnt/fast/journal --json bench/results/bookie.json'

.PHONY: run test bench clean distclean

run: $(STAMP)
	$(VENV)/bin/minipulsar standalone --data-dir $(DATA_DIR) $(RUN_ARGS)

test: $(STAMP)
	$(VENV)/bin/pytest -q $(PYTEST_ARGS)

bench: $(STAMP)
	$(VENV)/bin/python bench/bookie_bench.py $(BENCH_ARGS)

$(VENV)/bin/python:
	$(PYTHON) -m venv $(VENV) || { rm -rf $(VENV); exit 1; }

$(STAMP): pyproject.toml | $(VENV)/bin/python
	$(VENV)/bin/python -m pip install --disable-pip-version-check -e '.[test,bench]'
	touch $@

# Data of `make run` and test/build leftovers; the venv stays (see distclean).
clean:
	rm -rf $(DATA_DIR) .pytest_cache .hypothesis build dist *.egg-info
	find . -name __pycache__ -type d -not -path './$(VENV)/*' -prune -exec rm -rf {} +

distclean: clean
	rm -rf $(VENV)
