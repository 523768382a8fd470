# The two commands a new user types: `make demo` and `make test`.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test test-quick lab bench clean extension

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

# Reinstall when the project's dependency list changes.
$(STAMP): $(BIN)/python pyproject.toml
	$(BIN)/python -m pip install --quiet -e ".[dev]"
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/workbench demo

test: $(STAMP)
	$(BIN)/python -m pytest --nbmake tests notebooks

test-quick: $(STAMP)
	$(BIN)/python -m pytest -m "not slow and not tuning and not notebook" tests

lab: $(STAMP)
	$(BIN)/jupyter lab notebooks/

bench: $(STAMP)
	for f in benchmarks/bench_*.py; do $(BIN)/python $$f || exit 1; done

# Rebuild the JupyterLab renderer for Report from extension/ into workbench/labextension/
# (committed, so users and `make test` need no Node), then reinstall so JupyterLab loads it.
extension: $(STAMP)
	cd extension && npm ci --no-audit --no-fund \
		&& PATH="$(abspath $(BIN)):$$PATH" npm run build && npm test
	$(BIN)/python -m pip install --quiet --no-deps -e .

clean:
	rm -rf $(VENV) .pytest_cache
