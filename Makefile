# Both entry points bootstrap .venv from nothing, so a fresh clone needs only Python >= 3.11.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test lint typecheck unit bench clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

demo: $(STAMP)
	@d=$$(mktemp -d) && \
	  $(BIN)/trialrun init --path "$$d/evals" && \
	  cd "$$d" && $(CURDIR)/$(BIN)/trialrun run ./evals/demo --mode replay

lint: $(STAMP)
	$(BIN)/ruff check src tests bench
	$(BIN)/ruff format --check src tests bench

typecheck: $(STAMP)
	$(BIN)/mypy --strict src

unit: $(STAMP)
	HYPOTHESIS_PROFILE=ci $(BIN)/pytest -q -n 2

test: lint typecheck unit

bench: $(STAMP)
	$(BIN)/python bench/replay_bench.py

clean:
	rm -rf $(VENV) build dist .mypy_cache .pytest_cache .ruff_cache
