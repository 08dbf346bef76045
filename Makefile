# MAPush training environment. `make help` lists the targets.
SHELL := /bin/bash
.DEFAULT_GOAL := help

include env/pins.env

PYTHON ?= python3
VENV := .venv
VENV_PY := $(VENV)/bin/python
PYTEST_ARGS ?=

.PHONY: help
help: ## list the targets and their variables
	@awk 'BEGIN {FS = ":.*## "} /^[a-zA-Z_-]+:.*## / {printf "  make %-12s %s\n", $$1, $$2}' $(MAKEFILE_LIST)

$(VENV)/.stamp: env/requirements-test.txt env/harl-carrier.txt pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(VENV_PY) -m pip install -q --upgrade pip
	$(VENV_PY) -m pip install -q -r env/requirements-test.txt
	$(VENV_PY) -m pip download -q --no-deps --require-hashes -r env/harl-carrier.txt -d $(VENV)/wheels
	$(VENV_PY) -m pip install -q --no-deps -e .
	touch $@

.PHONY: venv
venv: $(VENV)/.stamp ## create the test virtualenv (.venv) from env/requirements-test.txt

.PHONY: test
test: $(VENV)/.stamp ## run the CPU test suite (no Docker, no GPU needed)
	$(VENV_PY) -m pytest $(PYTEST_ARGS)
