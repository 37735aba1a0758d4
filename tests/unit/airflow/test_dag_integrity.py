"""Every DAG imports cleanly, is configured as we promise, and does no I/O at parse time."""

import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture(scope="module")
def dagbag(tmp_path_factory):
    os.environ.setdefault("AIRFLOW_HOME", str(tmp_path_factory.mktemp("airflow_home")))
    os.environ["AIRFLOW__CORE__LOAD_EXAMPLES"] = "False"
    os.environ["AIRFLOW__CORE__PLUGINS_FOLDER"] = str(ROOT / "plugins")
    import sys

    sys.path.insert(0, str(ROOT / "plugins"))
    from airflow.dag_processing.dagbag import DagBag

    import lakefeed.storage
    from airflow.sdk import Variable

    def forbidden(*args, **kwargs):
        raise AssertionError("I/O at DAG parse time")

    # Parse with storage and Variables booby-trapped: top-level I/O would fail the import.
    originals = (lakefeed.storage.Store.__init__, Variable.get)
    lakefeed.storage.Store.__init__ = forbidden
    Variable.get = forbidden
    try:
        return DagBag(dag_folder=str(ROOT / "dags"))
    finally:
        lakefeed.storage.Store.__init__, Variable.get = originals


def test_no_import_errors(dagbag):
    assert dagbag.import_errors == {}
    assert "blob_changefeed_to_delta" in dagbag.dags


def test_every_dag_has_tags_retries_owner_docs_and_limits(dagbag):
    for dag_id, dag in dagbag.dags.items():
        assert dag.tags, dag_id
        assert dag.doc_md, dag_id
        assert dag.max_active_runs == 1, dag_id
        assert dag.catchup is False, dag_id
        assert dag.default_args.get("owner") and dag.default_args.get("retries", 0) >= 1, dag_id


def test_blob_dag_shape(dagbag):
    dag = dagbag.dags["blob_changefeed_to_delta"]
    assert set(dag.task_dict) == {"wait_for_ready_window", "plan_windows", "spark_arguments", "ingest_windows",
                                  "commit_checkpoint"}
    assert dag.task_dict["wait_for_ready_window"].deferrable is True
    assert dag.task_dict["commit_checkpoint"].trigger_rule == "all_done"
    assert dag.task_dict["ingest_windows"].pool == "lakefeed_spark"
    assert set(dag.params) == {"window_start", "window_end"}
