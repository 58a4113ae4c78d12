# Two commands on a fresh machine: `make run` and `make test`. `make bench BENCH="step planning"` runs some benchmarks.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: run test bench clean chromium

$(PY):
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip

$(STAMP): $(PY) pyproject.toml
	$(PY) -m pip install -q -e ".[test,s3,bench,cpu-accel]"
	touch $(STAMP)

run: $(STAMP)
	$(PY) -m tensorvm.jobs.demo

test: $(STAMP) chromium
	$(PY) -m pytest -q -ra $(PYTEST_ARGS)

# The dashboard test drives a headless Chromium. Install it only where we may (root, apt) and
# it is missing; never fail the build over it (the test then skips, saying why).
chromium:
	@if ! command -v chromium >/dev/null 2>&1 && [ "$$(id -u)" = 0 ] && \
	    command -v apt-get >/dev/null 2>&1; then \
	  echo "installing chromium for the dashboard test"; \
	  (apt-get update -qq && apt-get install -y -qq chromium) >/dev/null 2>&1 || \
	    echo "could not install chromium: the dashboard browser test will skip"; \
	fi; true

bench: $(STAMP)
	$(PY) -m bench $(BENCH)

clean:
	rm -rf $(VENV) build *.egg-info
