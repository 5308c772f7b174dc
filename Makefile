# Two commands on a fresh machine:  `make run`  and  `make test`.
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
PIP    := $(PY) -m pip
HOST   ?= 127.0.0.1
PORT   ?= 8765

.PHONY: install run test bench conformance clean

$(VENV)/.installed: pyproject.toml constraints.txt
	$(PYTHON) -m venv $(VENV)
	# torch first, from the pinned CPU build, so nothing resolves the CUDA wheels.
	$(PIP) install -q -c constraints.txt torch
	$(PIP) install -q -c constraints.txt -e '.[test]'
	touch $@

install: $(VENV)/.installed

## Build the index from the committed catalog and serve the copilot over HTTP on loopback.
run: install
	$(PY) -m index build
	$(PY) -m server --http --host $(HOST) --port $(PORT)

## The test suite (what CI runs): one worker more than the cores, at most 4 (tests/conftest.py; most tests wait on real processes).
## The 15 slowest steps are listed at the end, so a test that grows slow is seen before the suite does.
## Bytecode is written even where PYTHONDONTWRITEBYTECODE is set: otherwise every worker rewrites the
## asserts of every test module again (collection 21 s instead of 9 s) and every copilot, server and
## CLI the tests start compiles this project's modules again (ignored by git: __pycache__/).
test: install
	PYTHONDONTWRITEBYTECODE= $(PY) -m pytest -q -n auto --maxprocesses 4 --dist loadscope --durations=15

## Benchmarks (retrieval quality, speed, pool, judge); each prints ratios against its baseline.
bench: install
	$(PY) -m bench

## The official MCP conformance suite against the copilot as a proxy (needs npm; installs Node 22 into a cache).
conformance: install
	$(PY) -m bench conformance

clean:
	rm -rf $(VENV) .pytest_cache
