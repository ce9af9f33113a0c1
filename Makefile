# Two commands do everything on a fresh machine with Python >= 3.11 and make:
#   make run    create .venv, install, start the API on http://127.0.0.1:8000
#   make test   run every test
SHELL := /bin/bash
UV := $(shell command -v uv 2>/dev/null)
ifeq ($(UV),)
UV := .tools/bin/uv
endif
export UV_PYTHON_DOWNLOADS := never
PY := .venv/bin/python

.PHONY: install run test test-fast lint bench clean

# uv is installed into .tools from PyPI when the machine has none.
.tools/bin/uv:
	python3 -m venv .tools
	.tools/bin/python -m pip install --quiet uv

.venv/.installed: pyproject.toml uv.lock | $(UV)
	$(UV) sync --frozen
	touch $@

install: .venv/.installed

run: install
	.venv/bin/cleanair serve

test: install
	.venv/bin/pytest

# The end-to-end tests start real server processes and take about two minutes.
test-fast: install
	.venv/bin/pytest -m "not e2e"

lint: install
	.venv/bin/ruff check src tests bench
	.venv/bin/ruff format --check src tests bench
	.venv/bin/mypy
	.venv/bin/lint-imports

bench: install
	$(PY) -m bench

clean:
	rm -rf .venv .tools .pytest_cache .mypy_cache .ruff_cache .hypothesis
