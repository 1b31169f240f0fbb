# Set-up order matters on a machine without a GPU: torch first from the pinned CPU wheel,
# then deepspeed built against it (--no-build-isolation, or its build pulls a CUDA torch),
# then the project with every role's extras (pyproject.toml: the base install is preprocessing
# only; [train] adds torch, DeepSpeed, Ray; [hf] the export; [test] all of them and the test
# tools). A stamp file makes the set-up run once.
PYTHON ?= python3.11
# Extra pip arguments for the torch install. On this project's machines a CPU wheel of
# torch 2.13.0 is found locally; elsewhere, point pip at PyTorch's CPU wheel index, e.g.
#   make test TORCH_PIP_ARGS="--index-url <PyTorch CPU wheel index URL>"
TORCH_PIP_ARGS ?=
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
export DS_ACCELERATOR ?= cpu
export RAY_USAGE_STATS_ENABLED ?= 0
export PYTHONUNBUFFERED := 1

.PHONY: setup smoke test test-fast bench clean

setup: $(STAMP)

$(STAMP): pyproject.toml Makefile
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q torch==2.13.0 $(TORCH_PIP_ARGS)
	$(PY) -m pip install -q ninja==1.13.2 numpy==2.4.6
	$(PY) -m pip install -q --no-build-isolation deepspeed==0.19.8
	$(PY) -m pip install -q -e '.[train,hf,test]'
	touch $(STAMP)

smoke: $(STAMP)
	$(VENV)/bin/canine smoke

# Two test processes (pytest-xdist): most of a test's time is a Ray cluster, a Beam job or a
# subprocess starting, which leaves a core idle; tests/conftest.py says how files are grouped.
# TEST_WORKERS=0 runs them in this one process.
TEST_WORKERS ?= 2

test: $(STAMP)
	$(PY) -m pytest -ra --durations=15 -n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder $(PYTEST_ARGS)

# The unit tests: no Ray cluster, no Beam job end to end, no cold Inductor compile (the `slow`
# marker, tests/conftest.py); a few minutes, for the edit-test loop. `make test` runs everything.
test-fast: $(STAMP)
	$(PY) -m pytest -q -m "not slow" --durations=10 $(PYTEST_ARGS)

bench: $(STAMP)
	$(PY) benchmarks/preprocess.py
	$(PY) benchmarks/model_speed.py

clean:
	rm -rf $(VENV) build *.egg-info runs
