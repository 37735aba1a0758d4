# Two commands do everything on a fresh machine: `make demo` and `make test`.
SHELL := /bin/bash
VENV := $(CURDIR)/.venv
export PATH := $(VENV)/bin:$(PATH)
export PYSPARK_PYTHON := $(VENV)/bin/python
export PYSPARK_DRIVER_PYTHON := $(VENV)/bin/python
export SPARK_LOCAL_IP := 127.0.0.1
export PYTHONUNBUFFERED := 1

.PHONY: setup demo test test-unit test-integration bench clean

setup:
	@bash scripts/setup.sh

demo: setup
	python scripts/demo.py

test: setup
	python -m pytest tests

test-unit: setup
	python -m pytest tests -m "not integration"

test-integration: setup
	python -m pytest tests -m integration

clean:
	rm -rf data dist .pytest_cache
