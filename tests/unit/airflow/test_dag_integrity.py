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

    from airflow.dag_processing.dagbag import DagBag
    from airflow.sdk import Variable

    import lakefeed.storage

    def forbidden(*args, **kwargs):
        raise AssertionError("I/O at DAG parse time")

    def variable_get(key, *args, **kwargs):
        VARIABLES_READ.append(key)
        raise RuntimeError("no metadata database while parsing")

    # Parse with storage booby-trapped (top-level I/O would fail the import) and Variables recorded (none
    # may be read while parsing).
    originals = (lakefeed.storage.Store.__init__, Variable.get)
    lakefeed.storage.Store.__init__ = forbidden
    Variable.get = variable_get
    try:
        return DagBag(dag_folder=str(ROOT / "dags"))
    finally:
        lakefeed.storage.Store.__init__, Variable.get = originals


VARIABLES_READ: list[str] = []


def test_no_import_errors(dagbag):
    assert dagbag.import_errors == {}
    assert {"blob_changefeed_to_delta", "delta_cdf_to_delta", "cockroach_changefeed_to_delta"} <= set(dagbag.dags)


def test_no_variable_is_read_at_parse_time(dagbag):
    """The serialized DAG is the same whatever the Variables hold: forms, sensors and tasks read them when
    they run."""
    assert VARIABLES_READ == []


def test_every_dag_has_tags_retries_owner_docs_and_limits(dagbag):
    for dag_id, dag in dagbag.dags.items():
        assert dag.tags, dag_id
        assert dag.doc_md, dag_id
        assert dag.description and "\n" not in dag.description, dag_id
        assert dag.dagrun_timeout.total_seconds() == 360 * 60, dag_id
        # Runs span hours, so each of Airflow's Backfill runs names the hour it re-processes.
        assert type(dag.timetable).__name__ == "CronDataIntervalTimetable", dag_id
        # A scheduled run waiting for the hour's data must not hold the only run slot: a backfill or a
        # manual run triggered meanwhile starts beside it.
        assert dag.max_active_runs == 4, dag_id
        assert dag.catchup is False, dag_id
        assert dag.default_args.get("owner") and dag.default_args.get("retries", 0) >= 1, dag_id
        # The checkpoint writers (commit steps) of all DAGs share one slot, on whichever workers they run.
        writers = [t for t in dag.tasks if t.task_id.startswith("commit_")]
        assert len(writers) == 1 and writers[0].pool == "lakefeed_checkpoints", dag_id


def test_blob_dag_shape(dagbag):
    dag = dagbag.dags["blob_changefeed_to_delta"]
    assert set(dag.task_dict) == {
        "wait_for_ready_window",
        "plan_windows",
        "spark_arguments",
        "ingest_windows",
        "commit_checkpoint",
        "fail_run_if_a_task_failed",
    }
    assert dag.task_dict["wait_for_ready_window"].deferrable is True
    assert dag.task_dict["commit_checkpoint"].trigger_rule == "all_done"
    assert dag.task_dict["ingest_windows"].pool == "lakefeed_spark"
    assert set(dag.params) == {
        "window_start",
        "window_end",
        "reset_checkpoint",
        "acknowledge_data_loss",
        "adopt_targets",
    }
    assert dag.task_dict["plan_windows"].retries == 1 and dag.task_dict["commit_checkpoint"].retries == 0


def test_cdf_dag_shape(dagbag):
    dag = dagbag.dags["delta_cdf_to_delta"]
    assert set(dag.task_dict) == {
        "wait_for_new_versions",
        "plan_ranges",
        "spark_arguments",
        "apply_ranges",
        "commit_checkpoints",
        "fail_run_if_a_task_failed",
    }
    assert set(dag.params) == {"pipeline", "starting_version", "ending_version", "full_refresh", "adopt_targets"}


def test_crdb_dag_shape(dagbag):
    dag = dagbag.dags["cockroach_changefeed_to_delta"]
    assert set(dag.task_dict) == {
        "wait_for_resolved",
        "plan_ranges",
        "spark_arguments",
        "apply_ranges",
        "commit_checkpoint",
        "fail_run_if_a_task_failed",
    }
    assert set(dag.params) == {"after_resolved", "through_resolved", "reset_checkpoint", "adopt_targets"}
    assert dag.task_dict["wait_for_resolved"].deferrable is True


@pytest.mark.parametrize("dag_id", ["blob_changefeed_to_delta", "delta_cdf_to_delta", "cockroach_changefeed_to_delta"])
def test_any_failed_task_fails_the_run(dagbag, dag_id):
    dag = dagbag.dags[dag_id]
    watcher = dag.task_dict["fail_run_if_a_task_failed"]
    assert watcher.trigger_rule == "one_failed"
    assert watcher.upstream_task_ids == set(dag.task_dict) - {"fail_run_if_a_task_failed", "spark_arguments"}


@pytest.mark.parametrize("dag_id", ["blob_changefeed_to_delta", "delta_cdf_to_delta", "cockroach_changefeed_to_delta"])
def test_every_task_but_the_watcher_records_why_it_failed(dagbag, dag_id):
    from lakefeed_airflow.dag_defaults import record_failure

    for task in dagbag.dags[dag_id].tasks:
        callbacks = (
            task.on_failure_callback if isinstance(task.on_failure_callback, list) else [task.on_failure_callback]
        )
        if task.task_id == "fail_run_if_a_task_failed":
            assert callbacks in ([None], []), task.task_id  # a consequence, not a reason
        else:
            assert [c.__name__ for c in callbacks if c] == [record_failure.__name__], task.task_id


def test_plugin_files_are_not_loaded_as_top_level_modules():
    import subprocess
    import sys

    probe = (
        "import sys; from airflow import plugins_manager as pm; pm.ensure_plugins_loaded(); "
        "print(sorted(m for m in ('azure', 'settings', 'sensors', 'triggers', 'wasb_feed', 'operators') "
        "if 'plugins' in str(getattr(sys.modules.get(m), '__file__', ''))))"
    )
    env = {**os.environ, "AIRFLOW__CORE__PLUGINS_FOLDER": str(ROOT / "plugins")}
    out = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True, timeout=120)
    assert out.stdout.strip().splitlines()[-1] == "[]", out.stderr[-2000:]


def resolve(param, value):
    from airflow.sdk.definitions.param import Param

    return Param(value, **param.schema).resolve()


@pytest.mark.parametrize("dag_id", ["blob_changefeed_to_delta", "delta_cdf_to_delta", "cockroach_changefeed_to_delta"])
def test_the_forms_leave_the_rules_to_the_sentences(dagbag, dag_id):
    """No schema rule Airflow would word as a regular expression, no minimum the UI's number field would
    silently clamp to: lakefeed.run_params refuses those values in sentences (tests/unit/test_run_params.py)."""
    params = dagbag.dags[dag_id].params
    assert len(params) >= 4
    for name in params:
        schema = params.get_param(name).schema
        assert not {"pattern", "minimum", "maximum", "format"} & set(schema), (name, schema)


def test_the_blob_form_names_the_grid(dagbag):
    description = dagbag.dags["blob_changefeed_to_delta"].params.get_param("window_start").description
    assert "hh:10 for Azure's feeds" in description and "gridMinute" in description


def test_the_cdf_form_takes_any_pipeline_name_the_trigger_check_refuses_unknown_ones(dagbag):
    """The form lists no pipelines (that would read the Variable at parse time); the api-server's check and
    the plan refuse a name the configuration does not hold, in a sentence."""
    from lakefeed.cdf.config import CdfConfig, CdfPipeline
    from lakefeed_airflow.trigger_check import refusal

    pipeline = dagbag.dags["delta_cdf_to_delta"].params.get_param("pipeline")
    assert resolve(pipeline, "orders") == "orders" and resolve(pipeline, None) is None
    config = CdfConfig(pipelines=[CdfPipeline(name="orders", source_table="/s", target_table="/t", keys=["id"])])
    assert refusal("delta_cdf_to_delta", {"pipeline": "orders"}, config) is None
    assert refusal("delta_cdf_to_delta", {"pipeline": "order"}, config) == (
        "pipeline 'order' is not configured: choose one of orders."
    )


def test_sensor_and_operator_inputs_come_from_the_spec_and_the_plan(dagbag):
    blob = dagbag.dags["blob_changefeed_to_delta"]
    sensor = blob.task_dict["wait_for_ready_window"]
    assert sensor.feed == "blob_changefeed_to_delta"  # reads its feed's configuration when it runs
    cdf = dagbag.dags["delta_cdf_to_delta"].task_dict["wait_for_new_versions"]
    assert "pipeline" in cdf.template_fields and cdf.pipeline == "{{ params.pipeline or '' }}"
    ingest = blob.task_dict["ingest_windows"]
    assert {"wasb_conn_id", "extra_conf", "timeout_minutes"} <= set(ingest.partial_kwargs) | set(
        ingest.operator_class.template_fields
    )
