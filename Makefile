# The two set-up commands of the README: `make run` (the main job) and `make test`; `make lab` opens the notebooks.
PYTHON ?= python3
VENV ?= .venv
BIN = $(VENV)/bin
# The shared benchmark copies sit beside a developer's checkout (and CI's). A lone clone has none: the tests that
# need them skip, saying how to enable them, and `make run` runs on the sets the project ships, saying so.
ifneq ($(wildcard ../shared/data/.),)
export MNEMO_DATA_DIR ?= $(abspath ../shared/data)
endif

.PHONY: setup run demo lab test lint docs clean

setup: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e ".[all]"
	touch $@

run: setup
	$(BIN)/mnemo run

demo: setup
	$(BIN)/mnemo demo

# JupyterLab on notebooks/, on loopback, started from this venv: the notebooks' python3 kernel is its interpreter.
lab: setup
	$(BIN)/mnemo lab --notebooks notebooks

# A test that needs what a lone clone lacks (data, PostgreSQL, Chromium, cloud-init) skips; the run ends with
# one line per reason saying how to enable it (tests/conftest.py). CI=true turns those skips into failures.
test: setup
	$(BIN)/pytest -q -p no:cacheprovider
	$(BIN)/ruff check mnemo tests benchmarks docs

lint: setup
	$(BIN)/ruff check mnemo tests benchmarks docs

# The generated half of docs/cli.md, docs/http.md and docs/mcp.md; tests/test_docs.py fails when they are stale.
docs: setup
	$(BIN)/python docs/generate.py

clean:
	rm -rf $(VENV) build *.egg-info
