# The commands the README shows and CI runs. Everything installs into .venv.
VENV ?= .venv
PYTHON ?= python3
PY := $(VENV)/bin/python
# uv installs, with pip's configured wheel folders, indexes and constraints (it reads no pip.conf);
# from a clean clone it installs the development set in a fifth of pip's time (docs/decisions.md)
UV := $(VENV)/bin/uv
# --compile-bytecode: uv writes no .pyc, and where PYTHONDONTWRITEBYTECODE is set (this project's
# machines) every process would compile its imports from source each time (docs/decisions.md)
UV_PIP = $(UV) pip install --quiet --compile-bytecode $(shell $(PY) scripts/uv_pip_flags.py)
# the CPU build of torch for the TorchScript tests; on the project's machines uv takes a local
# wheel (~20 s). Elsewhere PyPI's build pulls CUDA packages: `make test TORCH=` skips it
TORCH ?= torch==2.13.0
# TorchServe's vision handlers need torchvision, which does not import beside that wheel: a venv of
# its own with a matching pair (5.9 GB, CUDA builds that run on the CPU; ~40 s from local wheels
# on the project's machines). `make test VISION_TORCH=` skips it
VISION_VENV ?= .venv-vision
VISION_TORCH ?= torch==2.14.1 torchvision==0.29.1
STORE ?= models
PORT ?= 8080
# test modules run on this many processes, each module's tests in one (docs/decisions.md)
TEST_PROCESSES ?= 2

.PHONY: setup setup-serve serve test test-tools test-torch test-vision wheel-smoke lint bench race clean

setup: $(VENV)/.installed  ## the development set: toolkit, runtimes, test and lint tools

setup-serve: $(VENV)/.installed-serve  ## only what `modelhost serve` and the example store need

$(VENV)/bin/python:
	$(PYTHON) -m venv $(VENV)

$(UV): | $(VENV)/bin/python
	$(PY) -m pip install --quiet 'uv>=0.5'

$(VENV)/.installed: pyproject.toml | $(UV)
	$(UV_PIP) --python $(PY) -e '.[dev]'
	touch $@ $(VENV)/.installed-serve

$(VENV)/.installed-serve: pyproject.toml | $(UV)
	$(UV_PIP) --python $(PY) -e .
	touch $@

serve: setup-serve  ## build the example store (a few hundred models) and serve it on :$(PORT)
	$(PY) -m modelhost examples $(STORE) --port $(PORT)
	$(PY) -m modelhost serve --model-store $(STORE) --port $(PORT)

test: setup test-tools test-torch test-vision  ## every test: unit, property and end-to-end against real servers
	$(PY) -m compileall -q modelhost  # the editable install's own modules, which uv leaves
	$(PY) -m pytest --numprocesses $(TEST_PROCESSES) --dist loadfile --durations 30

wheel-smoke: setup  ## build the sdist and wheel, install the wheel in a fresh venv, try it
	$(PY) scripts/wheel_smoke.py

test-torch: setup  ## torch (and captum, for TorchServe's handlers) for the torch tests (they skip without it, fail under CI)
	@[ -z "$(TORCH)" ] || $(PY) -c "import torch, captum" 2>/dev/null \
	  || $(UV_PIP) --python $(PY) "$(TORCH)" captum || echo "warning: torch missing; its tests will skip"

test-vision: | $(UV)  ## $(VISION_VENV) for TorchServe's vision handler tests (they skip without it, fail under CI)
	@[ -z "$(VISION_TORCH)" ] || $(MAKE) --no-print-directory $(VISION_VENV)/.installed \
	  || echo "warning: $(VISION_VENV) missing; the torchvision tests will skip"

$(VISION_VENV)/.installed: pyproject.toml | $(UV)
	$(PYTHON) -m venv $(VISION_VENV)
	$(UV_PIP) --python $(VISION_VENV)/bin/python $(VISION_TORCH) -e '.[torchserve-vision]'
	touch $@

test-tools:  ## promtool, chromium and nginx, which the observability and fleet tests drive (apt-get, as root)
	scripts/install-test-tools.sh || echo "warning: promtool/chromium/nginx missing; their tests will skip"

lint: setup
	$(VENV)/bin/ruff check modelhost tests benchmarks
	$(VENV)/bin/mypy

bench: setup  ## the figures in docs/performance.md (needs wrk; installs it with apt-get)
	$(PY) benchmarks/hot_path.py
	$(PY) benchmarks/cold_miss.py
	$(PY) benchmarks/density.py
	$(PY) benchmarks/runtimes.py
	$(PY) benchmarks/cpu_per_request.py
	$(PY) benchmarks/cpu_per_request.py --check  # fails: c=1 costs 15% over the recorded figure

race: setup  ## modelhost against TorchServe, MMS and MLServer (installs them in their own venvs)
	$(PY) benchmarks/peers/install.py
	$(PY) benchmarks/peers/race.py

clean:
	rm -rf $(VENV) $(VISION_VENV) .cache
