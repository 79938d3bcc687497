# Both entry points bootstrap .venv from nothing, so a fresh clone needs only Python >= 3.11.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test lint typecheck docs unit bench clean

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

# The docs site, strictly: a broken link or anchor, or a page missing from mkdocs.yml's nav,
# fails. Built into a temporary folder: the site is checked here, published elsewhere.
docs: $(STAMP)
	@d=$$(mktemp -d) && trap 'rm -rf "$$d"' EXIT && $(BIN)/mkdocs build --strict --site-dir "$$d"

unit: $(STAMP)
	HYPOTHESIS_PROFILE=ci $(BIN)/pytest -q -n 2

test: lint typecheck docs unit

bench: $(STAMP)
	$(BIN)/python bench/replay_bench.py

clean:
	rm -rf $(VENV) build dist .mypy_cache .pytest_cache .ruff_cache
