# Two commands do everything on a fresh machine: `make demo` and `make test`.
# Every recipe runs in the environment of scripts/env.sh (venv, Spark, Airflow).
SHELL := /bin/bash
ENV := source scripts/env.sh &&

.PHONY: setup check demo ui test test-unit test-integration dag-test bench clean

setup:
	@bash scripts/setup.sh

demo: setup
	@$(ENV) python scripts/demo.py

# The Airflow UI on http://localhost:8080 with the demo's runs (api-server, scheduler, dag-processor and
# triggerer in one process; user admin, password in .airflow/simple_auth_manager_passwords.json.generated).
# Browse → Lakefeed pipelines is the pipeline monitor. Ctrl-C stops it.
ui: setup
	$(ENV) scripts/ui.sh

# Lint, format and types in seconds: ruff over the tree, mypy strict on the library (include/lakefeed),
# basic on the plugins, jobs, DAGs and test-data package.
check: setup
	$(ENV) ruff check . && ruff format --check . && mypy --strict include/lakefeed && \
		mypy plugins spark_jobs dags include/lakefeed_testing

test: setup check
	$(ENV) python -m pytest tests -n 2 --dist loadfile --no-loadscope-reorder --durations=40

test-unit: setup
	$(ENV) python -m pytest tests -m "not integration"

test-integration: setup
	$(ENV) python -m pytest tests -m integration -n 2 --dist loadfile --no-loadscope-reorder

# One DAG run against the demo feed (run `make demo` first to create it).
dag-test: setup
	$(ENV) airflow dags test blob_changefeed_to_delta

# Every benchmark figure and ratio, side by side in one run; rewrites bench/README.md's table.
bench: setup
	$(ENV) pip install -q -r bench/requirements.txt -c constraints.txt && python bench/run_all.py

clean:
	rm -rf data dist .pytest_cache .airflow
