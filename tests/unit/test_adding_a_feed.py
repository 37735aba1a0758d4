"""Adding a feed takes its package and one DAG file: the toy feed (``lakefeed_testing.toy_feed``, kept
outside ``lakefeed``) is found through ``LAKEFEED_FEED_PACKAGES``, plans and commits on the skeleton's
sequences, and its DAG file (three lines) parses into the DAG every lakefeed feed gets, with no other
file of the project touched."""

from __future__ import annotations

import json

import pytest
from lakefeed_testing.toy_feed.spec import DAG_ID, SPEC, ToyCheckpoint, ToyConfig

from lakefeed.documents import to_document
from lakefeed.feeds import EXTRA_FEEDS, spec_of, specs
from lakefeed.pipeline import BatchesFailed, JobOutputs, RunContext
from tests.cells import file_store

DAG_FILE = """
from lakefeed_testing.toy_feed.spec import SPEC
from lakefeed_airflow.pipeline_dag import feed_dag

dag = feed_dag(SPEC, "Toy numbered files into Delta.")
"""


@pytest.fixture
def toy_registered(monkeypatch):
    monkeypatch.setenv(EXTRA_FEEDS, "lakefeed_testing.toy_feed")
    specs.cache_clear()
    yield
    specs.cache_clear()


def files(folder, count):
    folder.mkdir(parents=True, exist_ok=True)
    for number in range(1, count + 1):
        (folder / f"{number:05d}.json").write_text(json.dumps([{"id": number}]))


def test_the_toy_feed_is_found_with_the_feeds_of_lakefeed(toy_registered):
    assert spec_of(DAG_ID) is SPEC
    assert {spec.key for spec in specs()} == {"blob", "cdf", "cockroach", "cockroach_sql", "toy"}


def test_a_feed_outside_lakefeed_is_not_found_unless_named():
    specs.cache_clear()
    assert spec_of(DAG_ID) is None


def test_it_plans_and_commits_on_the_sequences(tmp_path):
    files(tmp_path / "source", 5)
    config = ToyConfig(source_root=str(tmp_path / "source"), target_table=str(tmp_path / "target"))
    store = file_store(tmp_path / "cp", ToyCheckpoint)
    hooks = SPEC.hooks
    run = RunContext(DAG_ID, "scheduled__1", "scheduled")
    planned = hooks.plan_run(config, {config.checkpoint_variable: store.load()}, {}, run)
    assert hooks.arguments(planned)[0][:6] == ["--source-root", config.source_root, "--first", "1", "--last", "2"]
    outputs = JobOutputs(summaries={0: {"first": 1, "last": 2, "rows": 2}, 2: {"first": 5, "last": 5, "rows": 1}})
    with pytest.raises(BatchesFailed, match="1 of 3 batch") as failed:
        hooks.commit_run(planned, {config.checkpoint_variable: store}, outputs, "scheduled__1")
    assert failed.value.report["applied"] == 2 and failed.value.report["rows"] == 3  # job 1 failed: stops at 2
    again = hooks.plan_run(config, {config.checkpoint_variable: store.load()}, {}, run)
    assert [(b.first, b.last) for b in again.batches] == [(3, 4), (5, 5)]
    assert to_document(again)["kind"] == "scheduled"


def test_its_dag_file_is_three_lines_and_parses_into_a_lakefeed_dag(tmp_path, toy_registered):
    import os

    from airflow.dag_processing.dagbag import DagBag

    folder = tmp_path / "dags"
    folder.mkdir()
    (folder / "toy_files_to_delta.py").write_text(DAG_FILE)
    os.environ.setdefault("AIRFLOW__CORE__LOAD_EXAMPLES", "False")
    bag = DagBag(dag_folder=str(folder))
    assert bag.import_errors == {}
    dag = bag.dags[DAG_ID]
    assert {"wait_for_files", "plan_files", "spark_arguments", "apply_files", "commit_checkpoint"} <= set(dag.task_ids)
    assert set(dag.params) == {"first_file", "last_file", "reset_checkpoint", "adopt_targets"}
