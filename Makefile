# hpt-pipeline — `make run` (local end-to-end pipeline) and `make test` are the two entry points.
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed

.DEFAULT_GOAL := help

include images/images.mk
include images/check.mk
include benchmarks/bench.mk
.PHONY: help venv run test lint golden mutants each-file mutmut serving-check

help: ## List the targets
	@grep -hE '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  make %-10s %s\n", $$1, $$2}'

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e ".[cpu,dev,kubeflow]"
	@touch $(STAMP)

venv: $(STAMP) ## Create .venv and install the project (CPU TensorFlow + dev tools)

run: $(STAMP) ## Run the whole pipeline locally on the bundled sample data
	$(VENV)/bin/hpt-pipeline run $(ARGS)

# Two pytest workers (pytest-xdist), each running whole test files, so a module's shared
# fixture is built once: docs/testing.md has serial and parallel walls. XDIST= runs serially.
XDIST ?= -n 2 --dist loadfile --no-loadscope-reorder
test: $(STAMP) ## Run the test suite
	$(PY) -m pytest $(XDIST) $(PYTEST_ARGS)

.PHONY: test-bench
test-bench: $(STAMP) ## The benchmark scripts' real runs that make test leaves out (-m bench; .ci/run)
	$(PY) -m pytest -m bench $(PYTEST_ARGS)

lint: $(STAMP) ## ruff + mypy
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/mypy $$($(PY) -m pipelines.images packages --mypy)

golden: $(STAMP) ## Regenerate the golden compiled specs (tests/golden) after an intended change
	UPDATE_GOLDEN=1 $(PY) -m pytest -q tests/test_pipeline_spec.py -k golden

mutants: $(STAMP) ## Plant known bugs one at a time in a copy and check the tests catch each (minutes)
	$(PY) tests/mutants.py --preflight $(ARGS)

each-file: $(STAMP) ## Run each test file by itself: none may pass only thanks to another's imports
	nice -n 10 $(PY) tests/run_each_file.py $(FILES)

mutmut: $(STAMP) ## mutmut over MODULES="pipelines/study/selection.py ..." with the tests that cover them
	$(PY) tests/mutmut_run.py $(MODULES) $(ARGS)

SERVING_VENV ?= /tmp/hpt-serving-venv
SERVING_CHECK_DIR ?= /tmp/hpt-serving-check
serving-check: $(STAMP) ## The export loads and serves in the serving container's TensorFlow (a second venv)
	TF=$$($(PY) -c "from pipelines.images import SERVING_CONTAINERS as c; print(c[0].tensorflow)"); \
	  test -x $(SERVING_VENV)/bin/python || $(PYTHON) -m venv $(SERVING_VENV); \
	  $(SERVING_VENV)/bin/python -m pip install -q "tensorflow-cpu~=$$TF.0"
	rm -rf $(SERVING_CHECK_DIR) && $(VENV)/bin/hpt-pipeline prepare --source sample --image-size 32 --output $(SERVING_CHECK_DIR)/data
	$(PY) -m trainer.task --data $(SERVING_CHECK_DIR)/data --epochs 1 --model_dir $(SERVING_CHECK_DIR)/model
	$(PY) images/serving_check.py export $(SERVING_CHECK_DIR)/model
	$(SERVING_VENV)/bin/python images/serving_check.py serve $(SERVING_CHECK_DIR)/model
