# The two set-up commands of the README: `make run` (the main job) and `make test`.
PYTHON ?= python3
VENV ?= .venv
BIN = $(VENV)/bin
export MNEMO_DATA_DIR ?= $(abspath ../shared/data)

.PHONY: setup run demo test lint clean

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

test: setup
	$(BIN)/pytest -q -p no:cacheprovider
	$(BIN)/ruff check mnemo tests benchmarks

lint: setup
	$(BIN)/ruff check mnemo tests benchmarks

clean:
	rm -rf $(VENV) build *.egg-info
