# trimtab: the two commands. `make demo` sets up and runs the main job; `make test` sets up and runs every test.
PY ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
export SPARK_LOCAL_IP := 127.0.0.1
export PYSPARK_PYTHON := $(abspath $(BIN)/python)
export PYSPARK_DRIVER_PYTHON := $(abspath $(BIN)/python)
export MPLBACKEND := Agg

.PHONY: setup demo test lint bench clean

setup: $(STAMP)

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

demo: setup
	$(BIN)/trimtab demo

lint: setup
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/lint-imports

test: setup lint
	$(BIN)/python -m pytest -q -m "" --durations=25 tests core placement partitioners shedding ha scaling controller simulator spark_adapter

bench: setup  # every benchmark; about two hours on 2 cores (the Spark ones dominate)
	$(BIN)/python -m bench.bench_simulator
	$(BIN)/python -m bench.bench_placement
	$(BIN)/python -m bench.bench_shedding
	$(BIN)/python -m bench.bench_partitioners
	$(BIN)/python -m bench.bench_spark
	$(BIN)/python -m bench.bench_batch_overhead
	$(BIN)/python -m bench.bench_partitioners_spark
	$(BIN)/python -m bench.bench_ha
	$(BIN)/python -m bench.bench_window_drops
	$(BIN)/python -m bench.bench_adaptive
	$(BIN)/python -m bench.bench_policies_spark
	$(BIN)/python -m bench.bench_soak
	$(BIN)/python -m bench.bench_scaling

clean:
	rm -rf $(VENV) build *.egg-info reports
