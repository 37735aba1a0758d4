"""Planning and checkpoint commit of the Delta CDF DAG, on real Delta sources (written by delta-rs), real
summary files and the real compare-and-set store over a file cell."""

import json
import shutil
from datetime import UTC, datetime, timedelta

import pyarrow as pa
import pytest
from deltalake import write_deltalake
from lakefeed_testing.readiness import sources_behind

from lakefeed.cdf import pipeline as cdf_pipeline
from lakefeed.cdf.checkpoint import CdfCheckpoint
from lakefeed.cdf.config import CdfConfig, CdfPipeline
from lakefeed.deltalog import DeltaLog
from lakefeed.documents import to_document
from lakefeed.errors import ChangeDataError, CheckpointMismatchError, ConfigError, WindowNotReadyError
from lakefeed.pipeline import RunContext
from lakefeed.storage import Store
from tests.cells import commit_plan, file_store, job_outputs

DAG = "delta_cdf_to_delta"
CDF_ON = {"delta.enableChangeDataFeed": "true"}


def plan(config, checkpoints, params, run_context):
    return cdf_pipeline.HOOKS.plan_run(config, checkpoints, params, run_context)


def run(run_id="scheduled__1", run_type="scheduled", start=None, end=None):
    return RunContext(DAG, run_id, run_type, start, end)


def commit_versions(path, count, configuration=CDF_ON):
    for i in range(count):
        write_deltalake(str(path), pa.table({"id": [i], "v": [i]}), mode="append", configuration=configuration)


@pytest.fixture
def config(tmp_path):
    commit_versions(tmp_path / "source", 8)  # versions 0..7, change data feed on from version 0
    return CdfConfig(
        pipelines=[
            CdfPipeline(
                name="orders",
                source_table=str(tmp_path / "source"),
                target_table=str(tmp_path / "target"),
                keys=["id"],
                versions_per_job=3,
            )
        ]
    )


@pytest.fixture
def store(tmp_path):
    return file_store(tmp_path / "cp", CdfCheckpoint)


def checkpoints(store):
    return {"orders": store.load()}


def finish(planned, index, **extra):
    job = planned.jobs[index]
    summary = {"mode": job.mode, "startingVersion": job.first, "endingVersion": job.last, "latestVersion": job.last}
    pipeline = cdf_pipeline.HOOKS.config_of(planned).pipeline(job.pipeline)
    summary |= {"source": pipeline.source_table, "target": pipeline.target_table}
    job_outputs(planned).summaries[index] = {**summary, "inserted": 1, **extra}


def commit(config, store, planned, run_id="r"):
    return commit_plan(cdf_pipeline.HOOKS, {"orders": store}, planned, job_outputs(planned), run_id)


def test_first_run_reads_the_change_feed_from_version_0_and_records_the_source(config, store):
    planned = plan(config, checkpoints(store), {}, run())
    assert [(j["start"], j["end"]) for j in to_document(planned)["jobs"]] == [(0, 2), (3, 5), (6, 7)]
    assert (
        to_document(planned)["pipelines"]["orders"]["kind"] == "scheduled"
        and to_document(planned)["pipelines"]["orders"]["origin"] == 0
    )
    for index in range(3):
        finish(planned, index)
    report = commit(config, store, planned)
    after = store.load()
    assert after.applied_version == 7 and report["pipelines"]["orders"]["lagVersions"] == 0
    assert after.source_id == DeltaLog(Store(config.pipelines[0].source_table)).table_id()
    args = cdf_pipeline.HOOKS.arguments(planned)
    assert args[1][-6:] == [
        "--starting-version",
        "3",
        "--ending-version",
        "5",
        "--pipeline-id",
        "lakefeed_cdf_checkpoint__orders",
    ]


def test_first_run_of_a_source_whose_change_feed_came_late_is_a_full_refresh(tmp_path, store):
    commit_versions(tmp_path / "late", 2, configuration={})
    config = CdfConfig(
        pipelines=[
            CdfPipeline(
                name="orders", source_table=str(tmp_path / "late"), target_table=str(tmp_path / "t"), keys=["id"]
            )
        ]
    )
    planned = plan(config, checkpoints(store), {}, run())
    assert to_document(planned)["jobs"] == [{"pipeline": "orders", "mode": "full-refresh", "version": 1}]
    assert to_document(planned)["pipelines"]["orders"]["kind"] == "reset"
    finish(planned, 0)
    commit(config, store, planned)
    assert store.load().applied_version == 1


def test_a_backfill_before_the_first_run_creates_no_checkpoint(config, store):
    planned = plan(
        config,
        checkpoints(store),
        {"pipeline": "orders", "starting_version": 4, "ending_version": 5},
        run("manual__1", "manual"),
    )
    assert planned.kind == "backfill" and [(j["start"], j["end"]) for j in to_document(planned)["jobs"]] == [(4, 5)]
    finish(planned, 0)
    report = commit(config, store, planned)
    assert store.load() == CdfCheckpoint() and report["pipelines"]["orders"]["appliedVersion"] is None
    # ... so the scheduled run after it still starts at version 0.
    assert to_document(plan(config, checkpoints(store), {}, run("s2")))["jobs"][0]["start"] == 0


def test_a_full_refresh_at_an_older_version_sets_the_checkpoint_to_exactly_that_version(config, store):
    store.update(
        lambda cp: cp.moved(
            applied_version=7,
            source_id=DeltaLog(Store(config.pipelines[0].source_table)).table_id(),
            source=config.pipelines[0].source_table,
        )
    )
    planned = plan(config, checkpoints(store), {"full_refresh": True, "ending_version": 3}, run("manual__2", "manual"))
    assert to_document(planned)["jobs"] == [{"pipeline": "orders", "mode": "full-refresh", "version": 3}]
    finish(planned, 0, sourceTableId=store.load().source_id)
    report = commit(config, store, planned)
    assert store.load().applied_version == 3
    assert report["pipelines"]["orders"]["checkpointReset"] == {"from": 7, "to": 3}
    assert [(j["start"], j["end"]) for j in to_document(plan(config, checkpoints(store), {}, run("s")))["jobs"]] == [
        (4, 6),
        (7, 7),
    ]


def target_commit(config, **user_metadata):
    """A commit on the target, tagged as the CDF job of pipeline orders tags its MERGEs and full refreshes."""
    from deltalake import CommitProperties

    write_deltalake(
        config.pipelines[0].target_table,
        pa.table({"id": [1]}),
        mode="append",
        commit_properties=CommitProperties(
            custom_metadata={
                "userMetadata": json.dumps(
                    {"pipeline": "delta_cdf", "pipelineId": config.pipelines[0].checkpoint_variable, **user_metadata}
                )
            }
        ),
    )


@pytest.mark.parametrize("merged_after_refresh", [False, True])
def test_ranges_a_full_refresh_replaced_after_they_committed_are_not_credited(config, store, merged_after_refresh):
    """Audit case (issue 21): a scheduled run planned at version 1 applies 2..4 and 5..7 while a full refresh
    of an overlapping run rebuilds the target at source version 5 and resets the checkpoint there. A range
    MERGEd before the rebuild is gone from the target: crediting it moved the checkpoint to 7, and versions
    6..7 never reached the rebuilt target."""
    source_id = DeltaLog(Store(config.pipelines[0].source_table)).table_id()
    store.update(lambda cp: cp.moved(applied_version=1, source_id=source_id, source=config.pipelines[0].source_table))
    planned = plan(config, checkpoints(store), {}, run("scheduled__2"))
    assert [(j["start"], j["end"]) for j in to_document(planned)["jobs"]] == [(2, 4), (5, 7)]
    target_commit(config, startingVersion=2, endingVersion=4)  # target v0: job 0's MERGE
    finish(planned, 0, targetVersion=0, sourceTableId=source_id)
    if merged_after_refresh:
        target_commit(config, fullRefreshVersion=5)  # v1: the rebuild at 5
        target_commit(config, startingVersion=5, endingVersion=7)  # v2: job 1 (reads 6..7)
        finish(planned, 1, targetVersion=2, sourceTableId=source_id)
    else:
        target_commit(config, startingVersion=5, endingVersion=7)  # v1: job 1's MERGE
        finish(planned, 1, targetVersion=1, sourceTableId=source_id)
        target_commit(config, fullRefreshVersion=5)  # v2: the rebuild at 5
    store.update(lambda cp: cp.moved(applied_version=5))  # the refresh's commit step
    report = commit(config, store, planned)["pipelines"]["orders"]
    if merged_after_refresh:  # job 1 ran on the rebuilt table: 6..7 are in it
        assert store.load().applied_version == 7
        assert [(j["start"], j["rebuiltAt"]) for j in report["jobsVoided"]] == [(2, 1)]
    else:
        assert store.load().applied_version == 5  # the next run applies 6.. again
        assert [(j["start"], j["rebuiltAt"]) for j in report["jobsVoided"]] == [(2, 2), (5, 2)]
    assert report["jobsFailed"] == []


def test_a_failed_full_refresh_leaves_the_checkpoint(config, store):
    store.update(lambda cp: cp.moved(applied_version=7))
    planned = plan(config, checkpoints(store), {"full_refresh": True}, run("m", "manual"))
    with pytest.raises(RuntimeError, match="1 of 1"):
        commit(config, store, planned)
    assert store.load().applied_version == 7


def test_a_recreated_source_is_refused_naming_it_until_a_full_refresh(config, store, tmp_path):
    planned = plan(config, checkpoints(store), {}, run())
    for index in range(3):
        finish(planned, index)
    commit(config, store, planned)
    shutil.rmtree(tmp_path / "source")
    commit_versions(tmp_path / "source", 3)  # a new table with a shorter history
    source = config.pipelines[0].source_table
    with pytest.raises(
        CheckpointMismatchError,
        match=f"source table {source} is table .* but the table there now.*pipeline=orders and full_refresh=true",
    ):
        plan(config, checkpoints(store), {}, run("s2"))
    watched = [
        {
            "name": "orders",
            "source_table": source,
            "checkpoint_variable": "cp",
            "applied_version": 7,
            "source_table_id": store.load().source_id,
        }
    ]
    with pytest.raises(CheckpointMismatchError, match="dropped and recreated"):
        sources_behind(watched)  # the sensor refuses too, instead of waiting forever for version 8
    refresh = plan(config, checkpoints(store), {"full_refresh": True}, run("m", "manual"))
    finish(refresh, 0, sourceTableId=DeltaLog(Store(source)).table_id())
    commit(config, store, refresh)
    assert store.load().applied_version == 2 and store.load().source_id == DeltaLog(Store(source)).table_id()
    assert to_document(plan(config, checkpoints(store), {}, run("s3")))["jobs"] == []


def test_a_checkpoint_ahead_of_the_source_or_of_another_source_is_refused(config, store):
    source_id = DeltaLog(Store(config.pipelines[0].source_table)).table_id()
    ahead = {"orders": CdfCheckpoint(applied_version=20, source_id=source_id)}
    with pytest.raises(ChangeDataError, match="up to 20 .* latest version is 7: the table was replaced"):
        plan(config, ahead, {}, run())
    other = {"orders": CdfCheckpoint(applied_version=2, source="/elsewhere")}
    with pytest.raises(CheckpointMismatchError, match="made reading /elsewhere"):
        plan(config, other, {}, run())


@pytest.mark.parametrize(
    "params, error, message",
    [
        ({"pipeline": "nope", "full_refresh": True}, ConfigError, "pipeline 'nope' is not configured: choose one of"),
        ({"starting_version": 5}, ConfigError, "needs both starting_version and ending_version"),
        ({"starting_version": 5, "ending_version": 2}, ConfigError, "ending_version 2 is before starting_version 5"),
        ({"starting_version": 5, "ending_version": 99}, ChangeDataError, "beyond the latest version 7"),
        ({"starting_version": -1, "ending_version": 3}, ConfigError, "starting_version -1 is negative"),
        ({"full_refresh": True, "starting_version": 2}, ConfigError, "ending_version .* only"),
        ({"full_refresh": True, "ending_version": 12}, ChangeDataError, "beyond the latest"),
    ],
)
def test_bad_params_are_refused(config, store, params, error, message):
    with pytest.raises(error, match=message):
        plan(config, checkpoints(store), params, run("m", "manual"))


def test_several_pipelines_need_the_pipeline_param_for_a_backfill(config, store, tmp_path):
    two = CdfConfig(
        pipelines=[
            *config.pipelines,
            CdfPipeline(
                name="b", source_table=config.pipelines[0].source_table, target_table=str(tmp_path / "b"), keys=["id"]
            ),
        ]
    )
    with pytest.raises(ConfigError, match="names its pipeline: choose one of orders, b"):
        plan(two, {"orders": store.load(), "b": store.load()}, {"full_refresh": True}, run("m", "manual"))


def test_an_airflow_backfill_run_re_applies_the_versions_committed_in_its_interval(config, store):
    delta_log = DeltaLog(Store(config.pipelines[0].source_table))

    def moment(version):
        return datetime.fromtimestamp(delta_log.commit_timestamp(version) / 1000, tz=UTC)

    planned = plan(config, checkpoints(store), {}, run("backfill__1", "backfill", moment(2), moment(6)))
    assert planned.kind == "backfill" and [(j["start"], j["end"]) for j in to_document(planned)["jobs"]] == [
        (2, 4),
        (5, 5),
    ]
    empty = plan(
        config,
        checkpoints(store),
        {},
        run("b2", "backfill", datetime(2020, 1, 1, tzinfo=UTC), datetime(2020, 1, 2, tzinfo=UTC)),
    )
    assert empty.jobs == []
    # An hour that has not ended, with nothing committed in it yet: not ready, not an empty range.
    hour = datetime.now(UTC).replace(minute=0, second=0, microsecond=0) + timedelta(hours=1)
    with pytest.raises(WindowNotReadyError, match="the hour has not ended"):
        plan(config, checkpoints(store), {}, run("b3", "backfill", hour, hour + timedelta(hours=1)))
    finish(planned, 0)
    finish(planned, 1)
    commit(config, store, planned)
    assert store.load() == CdfCheckpoint()


def test_a_summary_of_another_range_is_not_credited(config, store):
    planned = plan(config, checkpoints(store), {}, run())
    job_outputs(planned).summaries[0] = {"mode": "changes", "startingVersion": 3, "endingVersion": 5}
    finish(planned, 1)
    with pytest.raises(RuntimeError, match="2 of 3"):
        commit(config, store, planned)
    assert store.load().applied_version is None  # job 0 is not done, so nothing before job 1 counts


def test_changed_keys_or_columns_are_refused_naming_old_and_new_until_a_full_refresh(config, store):
    from dataclasses import replace

    planned = plan(config, checkpoints(store), {}, run())
    for index in range(len(to_document(planned)["jobs"])):
        finish(planned, index)
    commit(config, store, planned)
    assert (store.load().keys, store.load().columns) == (("id",), None)
    rekeyed = replace(config, pipelines=[replace(config.pipelines[0], keys=["id", "v"])])
    with pytest.raises(
        CheckpointMismatchError,
        match=r"keys \[id\], but the configuration now says \[id, v\].*"
        r"full_refresh=true",
    ):
        plan(rekeyed, checkpoints(store), {}, run("r2"))
    narrowed = replace(config, pipelines=[replace(config.pipelines[0], columns=["v"])])
    with pytest.raises(CheckpointMismatchError, match="columns all columns, but the configuration now says v"):
        plan(narrowed, checkpoints(store), {}, run("r3"))
    planned = plan(rekeyed, checkpoints(store), {"full_refresh": True}, run("m1", "manual"))
    finish(planned, 0)
    commit(rekeyed, store, planned)
    assert store.load().keys == ("id", "v")
    plan(rekeyed, checkpoints(store), {}, run("r4"))  # the new definition is the checkpoint's now


def test_a_missing_source_is_refused_by_the_plan_and_the_sensor_naming_it(tmp_path, store):
    from dataclasses import replace

    config = CdfConfig(
        pipelines=[
            CdfPipeline(
                name="ghost", source_table=str(tmp_path / "nowhere"), target_table=str(tmp_path / "t"), keys=["id"]
            )
        ]
    )
    for params, run_ in (
        ({}, run()),
        ({"starting_version": 0, "ending_version": 1}, run("m", "manual")),
        ({"full_refresh": True}, run("m2", "manual")),
    ):
        with pytest.raises(ChangeDataError, match=f"the source table {tmp_path / 'nowhere'} does not exist"):
            plan(config, {"ghost": store.load()}, params, run_)
    with pytest.raises(ChangeDataError, match="does not exist"):
        sources_behind(
            [
                {
                    "name": "ghost",
                    "source_table": str(tmp_path / "nowhere"),
                    "checkpoint_variable": "v",
                    "applied_version": None,
                }
            ]
        )
    assert replace(config).pipelines[0].name == "ghost"


def test_versions_cleaned_from_the_log_are_refused_for_ranges_and_backfill_intervals(tmp_path, store):
    from deltalake import DeltaTable

    from lakefeed.errors import DataLossError

    source = tmp_path / "source"
    commit_versions(source, 4)
    DeltaTable(str(source)).create_checkpoint()  # at version 3: the table stays readable without 0 and 1
    for version in (0, 1):
        (source / "_delta_log" / f"{version:020d}.json").unlink()
    config = CdfConfig(
        pipelines=[CdfPipeline(name="orders", source_table=str(source), target_table=str(tmp_path / "t"), keys=["id"])]
    )
    with pytest.raises(DataLossError, match=f"versions 0..1 of {source} are no longer in its log"):
        plan(config, checkpoints(store), {"starting_version": 0, "ending_version": 3}, run("m", "manual"))
    plan(config, checkpoints(store), {"starting_version": 2, "ending_version": 3}, run("m2", "manual"))
    interval = run(
        "backfill__1",
        "backfill",
        datetime(2020, 1, 1, tzinfo=UTC),
        datetime(2020, 1, 1, 1, tzinfo=UTC),
    )
    with pytest.raises(DataLossError, match="versions 0..1 .* are no longer in its log"):  # before: nothing, green
        plan(config, checkpoints(store), {}, interval)


def test_a_commit_step_that_fails_after_one_pipelines_checkpoint_leaves_its_entries_due(config, store, tmp_path):
    """Two pipelines: the first's checkpoint is written, then the second's update fails, so the task fails
    and Airflow drops the events it would have emitted: the first's marks never passed its entries (they
    move only past entries a recorded event names), so the next step announces them."""
    two = CdfConfig(
        pipelines=[
            *config.pipelines,
            CdfPipeline(
                name="b", source_table=config.pipelines[0].source_table, target_table=str(tmp_path / "b"), keys=["id"]
            ),
        ]
    )
    other = file_store(tmp_path / "cp", CdfCheckpoint, "b")
    planned = plan(two, {"orders": store.load(), "b": other.load()}, {}, run())
    for index, _job in enumerate(to_document(planned)["jobs"]):
        finish(planned, index)
    target_commit(config, pipelineId="lakefeed_cdf_checkpoint__orders", startingVersion=0, endingVersion=2)

    def broken(change):
        raise OSError("the Variable could not be written")

    other.update = broken
    with pytest.raises(OSError):
        commit_plan(cdf_pipeline.HOOKS, {"orders": store, "b": other}, planned, job_outputs(planned), "r")
    assert store.load().applied_version == 7  # its progress stands ...
    [(location, mark)] = store.load().announced.items()
    assert location == config.pipelines[0].target_table and mark.version == -1  # ... its announcement does not

    del other.update
    report = commit_plan(cdf_pipeline.HOOKS, {"orders": store, "b": other}, planned, job_outputs(planned), "r retry")
    assert [c["extra"]["commits"] for c in report["targetsChanged"]] == [[0]]


def test_a_pipeline_whose_target_lost_its_jobs_commits_keeps_its_checkpoint_and_the_others_move(
    config, store, tmp_path
):
    from deltalake import CommitProperties, DeltaTable

    two = CdfConfig(
        pipelines=[
            *config.pipelines,
            CdfPipeline(
                name="b", source_table=config.pipelines[0].source_table, target_table=str(tmp_path / "b"), keys=["id"]
            ),
        ]
    )
    other = file_store(tmp_path / "cp", CdfCheckpoint, "b")
    planned = plan(two, {"orders": store.load(), "b": other.load()}, {}, run())
    variables = {"orders": "lakefeed_cdf_checkpoint__orders", "b": "lakefeed_cdf_checkpoint__b"}
    for index, job in enumerate(to_document(planned)["jobs"]):
        target = two.pipeline(job["pipeline"]).target_table
        token = f"job-{index}"
        write_deltalake(
            target,
            pa.table({"id": [index]}),
            mode="append",
            commit_properties=CommitProperties(
                custom_metadata={
                    "userMetadata": json.dumps({"pipelineId": variables[job["pipeline"]], "commitToken": token})
                }
            ),
        )
        finish(
            planned,
            index,
            committed=True,
            targetVersion=DeltaTable(target).version(),
            commits=[{"table": target, "version": DeltaTable(target).version(), "token": token}],
        )
    shutil.rmtree(config.pipelines[0].target_table)  # the orders target is dropped before the commit step
    with pytest.raises(
        CheckpointMismatchError,
        match=(
            "checkpoint Variable cp was left as it was: .* the job committed version 0 of .*/target, but there is no "
            "Delta table there any more \\(dropped or moved\\)"
        ),
    ) as refused:
        commit_plan(cdf_pipeline.HOOKS, {"orders": store, "b": other}, planned, job_outputs(planned), "r")
    assert store.load() == CdfCheckpoint()  # nothing recorded for the lost target
    assert other.load().applied_version == 7  # the other pipeline's jobs are in its target's log: it moved
    report = refused.value.report  # kept in XCom for the monitor, with both pipelines
    assert report["pipelines"]["orders"]["appliedVersion"] is None and "refused" in report["pipelines"]["orders"]
    assert report["pipelines"]["b"]["appliedVersion"] == 7
