# Two commands do everything on a fresh machine: `make demo` and `make test`.
# Every recipe runs in the environment of scripts/env.sh (venv, Spark, Airflow).
SHELL := /bin/bash
ENV := source scripts/env.sh &&

.PHONY: setup demo test test-unit test-integration dag-test bench clean

setup:
	@bash scripts/setup.sh

demo: setup
	$(ENV) python scripts/demo.py

test: setup
	$(ENV) python -m pytest tests -n 2 --dist loadfile

test-unit: setup
	$(ENV) python -m pytest tests -m "not integration"

test-integration: setup
	$(ENV) python -m pytest tests -m integration -n 2 --dist loadfile

# One DAG run against the demo feed (run `make demo` first to create it).
dag-test: setup
	$(ENV) airflow dags test blob_changefeed_to_delta

# Every benchmark figure and ratio, side by side in one run; rewrites bench/README.md's table.
bench: setup
	$(ENV) pip install -q -r bench/requirements.txt -c constraints.txt && python bench/run_all.py

clean:
	rm -rf data dist .pytest_cache .airflow
