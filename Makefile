# dplace — set-up, run, test.  Everything lives in .venv at the repo root.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
DEFAULT_INSTANCE ?= instances/bert12_training_4dev.json

.PHONY: install bytecode run test bench clean

install: $(STAMP)

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip setuptools wheel
	$(BIN)/python -m pip install --quiet -e '.[all]'
	$(MAKE) bytecode
	touch $(STAMP)

# An editable install compiles none of the project's own modules: without this, a shell where
# PYTHONDONTWRITEBYTECODE is set compiles ~60 of them from source in every process (0.2 s of `dplace solve`).
# Run again after pulling; stale .pyc files are never used (Python checks each source's time stamp).
bytecode:
	$(BIN)/python -m compileall -q -j 0 dplace formulations heuristics pipeline runtime

run: install
	$(BIN)/dplace compare $(DEFAULT_INSTANCE) --time-limit 20

test: install
	$(BIN)/python -m pytest -q -n 2 tests

bench: install
	$(BIN)/dplace bench instances/suites --out bench-out --time-limit 10

clean:
	rm -rf $(VENV) build *.egg-info
