# Two commands do everything on a fresh machine: `make demo` and `make test`.
# Every recipe runs in the environment of scripts/env.sh (venv, Spark, Airflow).
SHELL := /bin/bash
ENV := source scripts/env.sh &&

.PHONY: setup check demo ui stack stack-down stack-check test test-unit test-integration dag-test bench clean

setup:
	@bash scripts/setup.sh

demo: setup
	@$(ENV) python scripts/demo.py

# The Airflow UI on http://localhost:8080 with the demo's runs (api-server, scheduler, dag-processor and
# triggerer in one process; user admin, password in .airflow/simple_auth_manager_passwords.json.generated).
# Browse → Lakefeed pipelines is the pipeline monitor. Ctrl-C stops it.
ui: setup
	$(ENV) scripts/ui.sh

# The full local stack in Docker (docker-compose.yaml): Airflow on PostgreSQL with two Edge workers, a Spark
# master and two workers, Azurite holding every feed and table. Builds the images (official bases where a
# registry is reachable, else from Debian's packages), starts everything and waits until it is healthy:
# http://localhost:8080 (admin/admin). `make stack-check` checks the targets against the demo's ground
# truth; `make stack-down` removes every container, network and volume.
stack:
	@scripts/stack.sh up

stack-down:
	@scripts/stack.sh down

stack-check:
	@scripts/stack.sh check

# Lint, format and types in seconds: ruff over the tree, mypy strict on the library (include/lakefeed),
# basic on the Airflow package, the plugin, jobs, DAGs and test-data package.
check: setup
	$(ENV) ruff check . && ruff format --check . && mypy --strict include/lakefeed && \
		mypy include/lakefeed_airflow plugins spark_jobs dags include/lakefeed_testing

# Each result is named as it arrives (-v): a run cut short (CI's time limit) still shows which test failed.
test: setup check
	$(ENV) python -m pytest tests -n 2 --dist loadfile --no-loadscope-reorder --durations=40 -v

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
