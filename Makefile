# The README's commands. `make setup` is cheap to re-run: it only reinstalls when pyproject.toml changed.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.stamp-setup

.PHONY: setup demo test test-fast lint clean

setup: $(STAMP)

# Every version from constraints.txt, the set the tests pass with (extras: EXTRAS=dev,dashboard,wandb).
EXTRAS ?= dev
$(STAMP): pyproject.toml constraints.txt
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	# torch first, pinned: a bare `torch` requirement would pull a multi-GB CUDA build.
	$(BIN)/pip install -q -c constraints.txt torch==2.13.0
	$(BIN)/pip install -q -c constraints.txt -e '.[$(EXTRAS)]'
	touch $(STAMP)

# The mission's question on this machine: every mixer x regime cell trained over 3 seeds (a
# seed-paired delta per regime, accuracy-parameters front), then the CPU throughput-resolution
# smoke benchmark (discrete regime: 6 mixers + attention math at 32/64 px, 14 timings; drop the
# --set for all three regimes); one report per study under reports/.
demo: setup
	$(BIN)/vitscale study run studies/quickstart.yaml --quiet
	$(BIN)/vitscale study run studies/throughput_resolution_smoke.yaml --quiet --set 'benchmark.regimes=[discrete]'
	$(BIN)/vitscale analyze quickstart --bootstrap 200
	$(BIN)/vitscale analyze throughput-resolution-smoke
	@echo "reports: reports/quickstart/report.md, reports/throughput-resolution-smoke/report.md"
	@echo "MLflow UI: $(BIN)/vitscale ui   (then open http://127.0.0.1:5000/#/experiments?workflowType=machine_learning)"

test: setup
	$(BIN)/python -m pytest -q -n 2 --dist loadgroup --durations=25 tests

test-fast: setup
	$(BIN)/python -m pytest -q -m "not slow" tests

lint: setup
	$(BIN)/ruff check platform tests
	$(BIN)/ruff format --check platform tests

clean:
	rm -rf $(VENV) mlflow.db mlruns mlartifacts ray_results reports

# Every CUDA path once (bf16 autocast per mixer x regime, ODE field fp32, torch.compile, bench CUDA
# timing/memory, two 0.5-GPU trials packed on one GPU), one table, <= 5 min; one line on CPU-only machines.
.PHONY: gpu-check
gpu-check: setup
	$(BIN)/python -m vitscale.doctor --gpu
