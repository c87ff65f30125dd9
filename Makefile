# dplace — set-up, run, test.  Everything lives in .venv at the repo root.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
WARM := $(VENV)/.kernels-warm
KERNEL_USERS := $(wildcard dplace/kernels/*.py heuristics/*.py)
DEFAULT_INSTANCE ?= instances/bert12_training_4dev.json

.PHONY: install bytecode warm run test bench clean

install: $(STAMP) $(WARM)

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

# numba compiles a kernel on its first call (seconds to a minute each: a first solve past any short time
# limit); `dplace warm` compiles them all into numba's disk cache once, and again after a kernel source or a
# method that calls kernels changes (a kernel edit drops the whole cache: dplace.kernels.clear_stale_cache).
$(WARM): $(STAMP) $(KERNEL_USERS)
	$(BIN)/dplace warm
	touch $(WARM)

warm:
	$(BIN)/dplace warm
	touch $(WARM)

run: install
	$(BIN)/dplace compare $(DEFAULT_INSTANCE) --time-limit 20

test: install
	$(BIN)/python -m pytest -q -n 2 tests

bench: install
	$(BIN)/dplace bench instances/suites --out bench-out --time-limit 10

clean:
	rm -rf $(VENV) build *.egg-info
