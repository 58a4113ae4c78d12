# Two commands on a fresh machine: `make run` and `make test`.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: run test bench clean

$(PY):
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip

$(STAMP): $(PY) pyproject.toml
	$(PY) -m pip install -q -e ".[test,s3,bench]"
	touch $(STAMP)

run: $(STAMP)
	$(PY) -m tensorvm.jobs.demo

test: $(STAMP)
	$(PY) -m pytest -q -ra $(PYTEST_ARGS)

bench: $(STAMP)
	$(PY) -m bench

clean:
	rm -rf $(VENV) build *.egg-info
