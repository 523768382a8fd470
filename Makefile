# The two commands a new user types: `make demo` and `make test`.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
CHROMIUM_STAMP := $(VENV)/.chromium
# Extras installed into the venv (pyproject.toml): the tests need all of them.
EXTRAS ?= dev,models,cluster

.PHONY: demo test test-quick test-browser test-models test-roundtrip lint lab bench clean extension \
	fuzz

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

# Reinstall when the project's dependency list changes.
$(STAMP): $(BIN)/python pyproject.toml
	$(BIN)/python -m pip install --quiet -e ".[$(EXTRAS)]"
	touch $(STAMP)

# The browser tests (tests/browser) drive JupyterLab in a headless Chromium: install Debian's
# when there is none (as root, or through sudo). WORKBENCH_CHROMIUM=/path/to/chrome uses
# another Chromium or Chrome instead. `make demo` never needs a browser.
NO_CHROMIUM := The browser tests need Chromium: as root, run 'apt-get install -y \
	--no-install-recommends chromium', or set WORKBENCH_CHROMIUM=/path/to/chromium-or-chrome
$(CHROMIUM_STAMP): | $(BIN)/python
	@if [ -n "$$WORKBENCH_CHROMIUM" ]; then \
		[ -x "$$WORKBENCH_CHROMIUM" ] || { \
			echo "WORKBENCH_CHROMIUM=$$WORKBENCH_CHROMIUM is not an executable file" >&2; exit 1; }; \
	elif ! command -v chromium >/dev/null 2>&1; then \
		if [ "$$(id -u)" = 0 ]; then SUDO=; \
		elif command -v sudo >/dev/null 2>&1; then SUDO=sudo; \
		else echo "$(NO_CHROMIUM)" >&2; exit 1; fi; \
		command -v apt-get >/dev/null 2>&1 || { echo "$(NO_CHROMIUM) (no apt-get here)" >&2; exit 1; }; \
		echo "Installing Chromium for the browser tests (apt-get)"; \
		$$SUDO apt-get update && $$SUDO env DEBIAN_FRONTEND=noninteractive \
			apt-get install -y --no-install-recommends chromium || exit 1; \
	fi
	touch $@

demo: $(STAMP)
	$(BIN)/workbench demo

# Notebooks 03, 05, 07 and 08 run top to bottom in JupyterLab in the browser tests
# (tests/browser/test_notebook_faces_browser.py: no cell may raise, every screen is checked):
# nbmake runs the others.
BROWSER_RUN_NOTEBOOKS := 03_profiling 05_tuning 07_optimize_a_pytorch_model 08_remote_and_cluster
test: $(STAMP) $(CHROMIUM_STAMP) lint
	$(BIN)/python -m pytest --nbmake tests notebooks \
		$(foreach nb,$(BROWSER_RUN_NOTEBOOKS),--ignore=notebooks/$(nb).ipynb)

# ruff (configured in pyproject.toml): unused imports, undefined names, likely bugs.
lint: $(STAMP)
	$(BIN)/ruff check .

test-quick: $(STAMP)
	$(BIN)/python -m pytest -m "not slow and not tuning and not notebook and not browser" tests

# JupyterLab, the Report renderer and the widgets in a real (headless) browser.
test-browser: $(STAMP) $(CHROMIUM_STAMP)
	$(BIN)/python -m pytest -m browser tests/browser

# Every torchvision classification and segmentation model through both importers, against
# PyTorch and onnxruntime (hours of compilation; outside CI's time limit). The largest (ViT-H/14
# at 224x224) take longer than the suite's 10-minute test timeout; every test's time is listed.
test-models: $(STAMP)
	WORKBENCH_MODEL_SWEEP=1 $(BIN)/python -m pytest -q --timeout=3600 --durations=0 \
		tests/relax/frontend/test_torchvision_sweep.py

# Issue 23's TVMScript round trip over every module the IR-building tests make: each test runs
# in a PassContext whose RoundTripInstrument prints, parses and compares the module entering
# each pipeline (ROUNDTRIP=all: every pass boundary). Slow tests are left out (they build the
# same IR, larger); CI does not run this. Summary at the end, report in build/.
ROUNDTRIP ?= entry
ROUNDTRIP_DIRS := tests/relax tests/tir tests/te tests/topi tests/dlight tests/script \
	tests/transform tests/codegen tests/meta_schedule
test-roundtrip: $(STAMP)
	WORKBENCH_SCRIPT_ROUNDTRIP=$(ROUNDTRIP) $(BIN)/python -m pytest -q -p no:cacheprovider \
		-m "not slow" $(ROUNDTRIP_DIRS)

lab: $(STAMP)
	$(BIN)/jupyter lab notebooks/

# The randomized search (tests/fuzz/README.md): the schedule fuzzer -- random schedules of every
# primitive and random tuner samples, each built and compared with numpy in worker processes --,
# the random-CNN fuzzer (random small graphs through the whole compiler, blocked layouts of 16
# and 8 channels, against PyTorch; then PT2E-quantized, against PyTorch's quantized models), then the hypothesis property tests with fresh random examples (CI runs fixed ones).
FUZZ_SCHEDULES ?= 20000
FUZZ_JOBS ?= 2
FUZZ_GRAPHS ?= 300
fuzz: $(STAMP)
	$(BIN)/python tests/fuzz/sched_fuzz.py --schedules $(FUZZ_SCHEDULES) --jobs $(FUZZ_JOBS)
	$(BIN)/python tests/fuzz/cnn_fuzz.py --graphs $(FUZZ_GRAPHS)
	$(BIN)/python tests/fuzz/cnn_fuzz.py --graphs $(FUZZ_GRAPHS) --first-seed 1001 --block 8
	$(BIN)/python tests/fuzz/cnn_fuzz.py --graphs $(FUZZ_GRAPHS) --first-seed 2001 --pt2e
	HYPOTHESIS_PROFILE=fuzz nice -n 10 $(BIN)/python -m pytest -q -p no:cacheprovider \
		tests/tir/schedule/test_sched_property.py tests/tir/arith/test_arith_random_exprs.py \
		tests/ir/test_ir_random_exprs.py

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
