"""Planning and checkpoint commit of the blob DAG, on a real generated feed, real summary files, real
Delta logs (written by delta-rs) and the real compare-and-set store over a file cell."""

import dataclasses
import json
from pathlib import Path

import pyarrow as pa
import pytest
from lakefeed_testing.blob_generator import FeedSpec, generate_feed

from lakefeed.assets import announced_in
from lakefeed.blob import pipeline as blob_pipeline
from lakefeed.blob.checkpoint import BlobCheckpoint
from lakefeed.blob.config import BlobPipelineConfig
from lakefeed.blob.run_plan import BlobPlan
from lakefeed.blob.summary import RunSummary
from lakefeed.checkpoint import TableMark
from lakefeed.documents import from_document, to_document
from lakefeed.errors import (
    CheckpointMismatchError,
    ConfigError,
    FeedConfigError,
    FeedCorruptError,
    WindowNotReadyError,
)
from lakefeed.pipeline import RunContext
from lakefeed.times import format_time, parse_time
from tests.cells import commit_plan, file_store, job_outputs, plan_one

DAG = "blob_changefeed_to_delta"


def plan(config, checkpoint, params, run_context):
    return plan_one(blob_pipeline.HOOKS, config, checkpoint, params, run_context)


def commit(store, planned, outputs, run_id, announced_since=None):
    return commit_plan(blob_pipeline.HOOKS, store, planned, outputs, run_id, announced_since)


def run(run_id="scheduled__1", run_type="scheduled", start=None, end=None):
    return RunContext(DAG, run_id, run_type, parse_time(start) if start else None, parse_time(end) if end else None)


@pytest.fixture
def config(tmp_path):
    generate_feed(tmp_path / "feed", FeedSpec(hours=5, events_per_hour=10, gap_hours=()))  # lastConsumable 04:10
    return BlobPipelineConfig(
        feed_root=str(tmp_path / "feed"),
        events_table=str(tmp_path / "events"),
        state_table=str(tmp_path / "state"),
        windows_per_batch=2,
        max_windows_per_run=5,
    )


@pytest.fixture
def store(tmp_path):
    return file_store(tmp_path / "cp", BlobCheckpoint)


def finish(planned, index, **extra):
    """What a job leaves after its MERGEs committed: a summary naming its windows."""
    batch = planned.batches[index]
    summary = {
        "windows": blob_pipeline.windows_of(batch),
        "lastConsumable": "2026-01-01T04:10:00Z",
        "segments": [],
        "eventsInserted": 1,
        "eventsTable": planned.target_tables["events"],
        "stateTable": planned.target_tables["state"],
        **extra,
    }
    job_outputs(planned).summaries[index] = summary


def make_tables(config):
    from deltalake import write_deltalake

    for table in (config.events_table, config.state_table):
        write_deltalake(table, pa.table({"id": [1]}))


def test_first_plan_batches_every_ready_window_up_to_the_cap(config):
    planned = plan(config, BlobCheckpoint(), {}, run())
    assert planned.kind == "scheduled" and planned.windows == 5 and planned.grid_minute == 10
    assert planned.origin == parse_time("2025-12-31T23:10Z") and planned.feed == f"file://{config.feed_root}"
    assert to_document(planned)["batches"] == [
        {"start": "2025-12-31T23:10:00Z", "end": "2026-01-01T01:10:00Z"},
        {"start": "2026-01-01T01:10:00Z", "end": "2026-01-01T03:10:00Z"},
        {"start": "2026-01-01T03:10:00Z", "end": "2026-01-01T04:10:00Z"},
    ]
    args = blob_pipeline.HOOKS.arguments(planned)
    assert args[1][:6] == [
        "--feed-root",
        config.feed_root,
        "--window-start",
        "2026-01-01T01:10:00Z",
        "--window-end",
        "2026-01-01T03:10:00Z",
    ]
    # The summary location is the submit task's to choose (LakefeedSparkSubmitOperator), not the plan's.
    assert args[1][-4:] == ["--decoder", "auto", "--pipeline-id", "lakefeed_blob_checkpoint"]


@pytest.mark.parametrize("retention", [7, "unlimited"])
def test_the_accounts_change_feed_retention_reaches_every_job(config, retention):
    configured = dataclasses.replace(config, change_feed_retention_days=retention)
    planned = plan(configured, BlobCheckpoint(), {}, run())
    for args in blob_pipeline.HOOKS.arguments(planned):
        assert args[args.index("--change-feed-retention-days") + 1] == str(retention)
    assert all(
        "--change-feed-retention-days" not in a
        for a in blob_pipeline.HOOKS.arguments(plan(config, BlobCheckpoint(), {}, run()))
    )


@pytest.mark.parametrize("value", [0, -3, "forever", "7", True, 1.5])
def test_a_retention_that_is_not_days_or_unlimited_is_refused_naming_the_key(value):
    with pytest.raises(ConfigError, match="change_feed_retention_days"):
        BlobPipelineConfig.from_mapping({"change_feed_retention_days": value}, "lakefeed_blob_config")


def test_plan_resumes_from_the_watermark_and_refuses_a_regressing_feed(config):
    checkpoint = BlobCheckpoint(
        watermark=parse_time("2026-01-01T03:10Z"), last_consumable=parse_time("2026-01-01T04:10Z")
    )
    assert to_document(plan(config, checkpoint, {}, run()))["batches"] == [
        {"start": "2026-01-01T03:10:00Z", "end": "2026-01-01T04:10:00Z"}
    ]
    ahead = BlobCheckpoint(watermark=checkpoint.watermark, last_consumable=parse_time("2026-01-02T00:10Z"))
    with pytest.raises(FeedCorruptError, match="moved backwards"):
        plan(config, ahead, {}, run())


def test_backfill_plan_is_exactly_the_range_and_bad_params_are_refused(config):
    planned = plan(
        config,
        BlobCheckpoint(),
        {"window_start": "2026-01-01T00:10Z", "window_end": "2026-01-01T01:10:00Z"},
        run("manual__1", "manual"),
    )
    assert planned.kind == "backfill" and to_document(planned)["batches"] == [
        {"start": "2026-01-01T00:10:00Z", "end": "2026-01-01T01:10:00Z"}
    ]
    cases = [
        ({"window_start": "2026-01-01T00:10Z"}, ConfigError, "both window_start and window_end"),
        ({"window_end": "2026-01-01T00:10Z"}, ConfigError, "both window_start and window_end"),
        (
            {"window_start": "yesterday", "window_end": "2026-01-01T01:10Z"},
            ConfigError,
            "window_start 'yesterday' is not a time",
        ),
        ({"window_start": "2026-01-01T02:10Z", "window_end": "2026-01-01T01:10Z"}, ConfigError, "must be after"),
        ({"window_start": "2026-01-01T00:00Z", "window_end": "2026-01-01T01:10Z"}, FeedConfigError, "minute 10"),
        ({"window_start": "2026-01-01T00:10Z", "window_end": "2026-01-01T09:10Z"}, WindowNotReadyError, "not ready"),
        (
            {"window_start": "2026-01-01T00:10Z", "window_end": "2026-01-01T01:10Z", "reset_checkpoint": True},
            ConfigError,
            "not both",
        ),
    ]
    for params, error, message in cases:
        with pytest.raises(error, match=message):
            plan(config, BlobCheckpoint(), params, run("manual__2", "manual"))


def test_an_airflow_backfill_run_re_processes_the_window_of_its_data_interval(config):
    planned = plan(
        config, BlobCheckpoint(), {}, run("backfill__1", "backfill", "2026-01-01T01:00Z", "2026-01-01T02:00Z")
    )
    assert planned.kind == "backfill" and to_document(planned)["batches"] == [
        {"start": "2026-01-01T01:10:00Z", "end": "2026-01-01T02:10:00Z"}
    ]
    with pytest.raises(WindowNotReadyError, match="not ready"):
        plan(config, BlobCheckpoint(), {}, run("b", "backfill", "2026-01-01T04:00Z", "2026-01-01T05:00Z"))
    with pytest.raises(ConfigError, match="no data interval"):  # a trigger timetable's point-in-time run
        plan(config, BlobCheckpoint(), {}, run("b", "backfill", "2026-01-01T01:00Z", "2026-01-01T01:00Z"))
    with pytest.raises(ConfigError, match="one of Airflow's Backfill runs"):
        plan(
            config,
            BlobCheckpoint(),
            {"window_start": "2026-01-01T00:10Z", "window_end": "2026-01-01T01:10Z"},
            run("b", "backfill", "2026-01-01T01:00Z", "2026-01-01T02:00Z"),
        )


def test_commit_advances_over_the_finished_prefix_then_completes_on_retry(config, store):
    planned = plan(config, BlobCheckpoint(), {}, run("scheduled__2"))
    for index in (0, 2):  # batch 1 failed: batch 2's success must not move the checkpoint past it
        finish(planned, index, seconds={"merge": 1.5})
    job_outputs(planned).refused[1] = "FeedCorruptError: x.avro: bad"
    with pytest.raises(RuntimeError, match="1 of 3 batch"):
        commit(store, planned, job_outputs(planned), "scheduled__2")
    first = store.load()
    assert first.watermark == parse_time("2026-01-01T01:10Z") and first.feed == planned.feed
    assert first.generation == 1 and first.grid_minute == 10

    finish(planned, 1)
    report = commit(store, planned, job_outputs(planned), "scheduled__2 retry")
    assert report["eventsInserted"] == 3 and report["batchesFailed"] == []
    assert report["watermark"] == "2026-01-01T04:10:00Z" and report["lagHours"] == 0
    assert store.load().updated_by == "scheduled__2 retry" and store.load().generation == 2


def test_a_refused_batch_is_reported_with_its_reason(config, store):
    planned = plan(config, BlobCheckpoint(), {}, run())
    job_outputs(planned).refused[0] = "FeedCorruptError: x.avro: bad"
    with pytest.raises(RuntimeError, match="3 of 3 batch.*refused.*x.avro"):
        commit(store, planned, job_outputs(planned), "r")
    # Nothing finished, but a first scheduled run records where the feed starts.
    assert store.load().watermark == parse_time("2025-12-31T23:10Z")


def test_a_summary_of_other_windows_is_not_credited(config, store):
    planned = plan(config, BlobCheckpoint(), {}, run())
    job_outputs(planned).summaries[0] = {
        "windows": ["2026-01-01T03:10:00Z"],
        "lastConsumable": "2026-01-01T04:10:00Z",
        "segments": [],
        "eventsTable": planned.target_tables["events"],
        "stateTable": planned.target_tables["state"],
    }
    with pytest.raises(RuntimeError, match="3 of 3"):
        commit(store, planned, job_outputs(planned), "r")
    assert store.load().watermark == parse_time("2025-12-31T23:10Z")


@pytest.mark.parametrize("stored", [None, "2026-01-01T04:10Z"])
def test_a_backfill_never_creates_nor_moves_the_checkpoint(config, store, stored):
    if stored:
        store.update(lambda cp: cp.moved(watermark=parse_time(stored), last_consumable=parse_time(stored)))
    before = store.load()
    planned = plan(
        config,
        before,
        {"window_start": "2026-01-01T01:10Z", "window_end": "2026-01-01T03:10Z"},
        run("manual__3", "manual"),
    )
    finish(planned, 0)
    report = commit(store, planned, job_outputs(planned), "manual__3")
    assert store.load() == before and report["checkpointMoved"] is False
    assert report["watermark"] == (None if stored is None else "2026-01-01T04:10:00Z")


def test_a_checkpoint_of_another_feed_stops_scheduled_runs_until_a_reset(config, store, tmp_path):
    other = BlobCheckpoint(watermark=parse_time("2026-01-01T02:10Z"), feed="azure://acct/$blobchangefeed")
    with pytest.raises(CheckpointMismatchError, match="belongs to the feed azure://acct.*reset_checkpoint=true"):
        plan(config, other, {}, run())
    store.update(lambda cp: other.moved(generation=1))
    planned = plan(config, store.load(), {"reset_checkpoint": True}, run("manual__4", "manual"))
    assert planned.kind == "reset" and planned.batches[0].start == parse_time("2025-12-31T23:10Z")
    finish(planned, 0)
    with pytest.raises(RuntimeError, match="2 of 3"):
        commit(store, planned, job_outputs(planned), "manual__4")
    reset = store.load()
    assert reset.feed == planned.feed and reset.watermark == parse_time("2026-01-01T01:10Z")


def test_targets_dropped_or_recreated_behind_the_checkpoint_are_refused(config, store):
    import shutil

    from deltalake import write_deltalake

    make_tables(config)  # written by delta-rs, not this pipeline: a first run adopts them explicitly
    with pytest.raises(CheckpointMismatchError, match="already holds rows: version 0 \\(WRITE\\) changed its rows"):
        plan(config, BlobCheckpoint(), {}, run())
    planned = plan(config, BlobCheckpoint(), {"adopt_targets": True}, run())
    finish(planned, 0)
    with pytest.raises(RuntimeError):
        commit(store, planned, job_outputs(planned), "r")
    recorded = store.load()
    assert set(recorded.targets) == {config.events_table, config.state_table}
    plan(config, recorded, {}, run("r2"))  # same tables: fine

    shutil.rmtree(config.state_table)
    with pytest.raises(
        CheckpointMismatchError,
        match=f"state table {config.state_table} holds its work, but there is no Delta table there",
    ):
        plan(config, recorded, {}, run("r3"))
    write_deltalake(config.state_table, pa.table({"id": [2]}))
    with pytest.raises(CheckpointMismatchError, match="dropped and\\s+recreated"):
        plan(config, recorded, {}, run("r4"))
    moved = BlobPipelineConfig(**{**config.__dict__, "events_table": config.events_table + "_v2"})
    with pytest.raises(CheckpointMismatchError, match="events table is now configured as .*_v2"):
        plan(moved, recorded, {}, run("r5"))


def _drop_segment(config, start: str) -> None:
    import shutil

    moment = parse_time(start)
    feed = Path(config.feed_root)
    shutil.rmtree(feed / "idx" / "segments" / f"{moment:%Y/%m/%d/%H%M}")
    for shard in (feed / "log").iterdir():
        shutil.rmtree(shard / f"{moment:%Y/%m/%d/%H%M}", ignore_errors=True)


def test_segments_lost_to_retention_are_refused_until_acknowledged_and_the_commit_records_the_next(config, store):
    from lakefeed.errors import DataLossError

    small = BlobPipelineConfig(**{**config.__dict__, "max_windows_per_run": 2})
    planned = plan(small, BlobCheckpoint(), {}, run())  # windows 23:10, 00:10
    assert planned.segment_marks["2026-01-01T01:10:00Z"] == "2026-01-01T00:10:00Z"
    for index in range(len(planned.batches)):
        finish(planned, index)
    commit(store, planned, job_outputs(planned), "r1")
    recorded = store.load()
    assert recorded.watermark == parse_time("2026-01-01T01:10Z")
    assert recorded.next_segment == parse_time("2026-01-01T00:10Z")
    assert recorded.segments_listed_through == parse_time("2026-01-01T04:10Z")

    _drop_segment(config, "2026-01-01T00:10Z")
    _drop_segment(config, "2026-01-01T01:10Z")
    with pytest.raises(
        DataLossError,
        match=r"windows 2026-01-01T01:10:00Z \.\. 2026-01-01T03:10:00Z .*"
        r"acknowledge_data_loss=true",
    ):
        plan(small, recorded, {}, run("r2"))
    planned = plan(small, recorded, {"acknowledge_data_loss": True}, run("r3"))
    assert planned.data_loss["windows"] == ["2026-01-01T01:10:00Z", "2026-01-01T03:10:00Z"]
    assert to_document(planned)["batches"] == [{"start": "2026-01-01T01:10:00Z", "end": "2026-01-01T03:10:00Z"}]
    assert "--acknowledge-data-loss" in blob_pipeline.HOOKS.arguments(planned)[0]
    finish(planned, 0)
    report = commit(store, planned, job_outputs(planned), "r3")
    assert report["dataLossAcknowledged"]["acknowledgedBy"] == "r3" and report["watermark"] == "2026-01-01T03:10:00Z"
    assert store.load().next_segment == parse_time("2026-01-01T02:10Z")
    plan(small, store.load(), {}, run("r4"))  # every segment it needs is there: no refusal


def test_the_commit_works_from_the_plans_configuration_not_the_variable_as_edited(config, tmp_path):
    planned = plan(config, BlobCheckpoint(), {}, run())
    edited = BlobPipelineConfig(**{**config.__dict__, "events_table": str(tmp_path / "elsewhere")})
    assert blob_pipeline.HOOKS.config_of(planned) == config != edited
    assert all(
        args[args.index("--events-table") + 1] == config.events_table for args in blob_pipeline.HOOKS.arguments(planned)
    )
    # A summary of a job that wrote elsewhere is not credited to the plan.
    batch = planned.batches[0]
    summary = {
        "windows": blob_pipeline.windows_of(batch),
        "lastConsumable": "2026-01-01T04:10:00Z",
        "segments": [],
        "eventsTable": edited.events_table,
        "stateTable": config.state_table,
    }
    assert not blob_pipeline.HOOKS.belongs(planned, from_document(RunSummary, summary, "a summary"), planned.batches[0])


def job_commit(table: str, pipeline_id: str, windows: list[str]) -> None:
    """A commit as a job makes it: rows, tagged with the pipeline and the windows applied."""
    from deltalake import CommitProperties, write_deltalake

    tags = json.dumps({"pipelineId": pipeline_id, "pipeline": "blob_changefeed", "windows": windows})
    write_deltalake(
        table,
        pa.table({"id": [1]}),
        mode="append",
        commit_properties=CommitProperties(custom_metadata={"userMetadata": tags}),
    )


def announced_commits(report) -> dict[str, list[int]]:
    return {change["table"]: change["extra"]["commits"] for change in report["targetsChanged"]}


def test_asset_events_come_from_the_ledger_once_each_whatever_the_runs_did(config, store):
    planned = plan(config, BlobCheckpoint(), {}, run("scheduled__5"))
    pipeline_id, events = config.checkpoint_variable, config.events_table
    windows = [blob_pipeline.windows_of(b) for b in planned.batches]
    # Batch 0 committed, but its task was killed before its summary reached XCom; batch 1 was refused.
    job_commit(events, pipeline_id, windows[0])
    job_commit(events, "another_pipeline", windows[0])  # not this pipeline's entry
    # The run adopted the table with the other pipeline's commit in it (its plan, made again, saw both); a
    # commit by another writer during a run is refused (tested below).
    planned = plan(config, BlobCheckpoint(), {"adopt_targets": True}, run("scheduled__5"))
    job_outputs(planned).refused[1] = "FeedCorruptError: x.avro: bad"
    with pytest.raises(RuntimeError, match="3 of 3") as failed:
        commit(store, planned, job_outputs(planned), "scheduled__5")
    # The task fails, so Airflow would drop its events: none announced, the entry kept for later.
    assert failed.value.report["targetsChanged"] == [] and failed.value.report["announcementsDeferred"] == 1
    table_id = store.load().announced[events].table_id
    assert store.load().announced == {events: TableMark(table_id, -1)}  # none of its commits announced yet

    # The next run: batch 0 replays (commits nothing) and batch 2 commits, batch 1 fails again. Its task
    # fails too, though the checkpoint moves over batch 0 and records the tables as they are now.
    finish(planned, 0, eventsInserted=0)
    job_commit(events, pipeline_id, windows[2])
    with pytest.raises(RuntimeError, match="2 of 3") as failed:
        commit(store, planned, job_outputs(planned), "scheduled__6")
    assert failed.value.report["announcementsDeferred"] == 2 and store.load().targets[events].version == 2
    # Its targets' marks must not pass for announced ones: announcing still stands before version 0.
    assert store.load().announced == {events: TableMark(table_id, -1)}

    # The retries: every batch has finished; every entry is announced once. Airflow records the events of
    # the succeeding step (``recorded``); the marks move past entries only once an event names them.
    recorded: list = []

    def succeeded(report):
        recorded.extend((change["uri"], change["extra"]) for change in report["targetsChanged"])
        return report

    def airflow_events(since_ms):
        return announced_in(recorded)

    for index in (1, 2):
        finish(planned, index, eventsInserted=0)
    job_commit(events, pipeline_id, windows[1])
    report = succeeded(commit(store, planned, job_outputs(planned), "scheduled__6 retry", airflow_events))
    assert announced_commits(report) == {events: [0, 2, 3]} and report["announcementsDeferred"] == 0
    [change] = report["targetsChanged"]
    assert change["extra"]["windows"] == sorted(windows[0] + windows[1] + windows[2])
    assert store.load().announced[events].version == -1  # not yet confirmed by a recorded event

    # The commit step cleared and run again: its events are recorded, so it announces nothing and moves
    # the marks past the entries they name (so purged events cannot have them announced again). A step
    # after it finds nothing new and writes nothing.
    generation = store.load().generation
    again = commit(store, planned, job_outputs(planned), "scheduled__6 cleared", airflow_events)
    assert again["targetsChanged"] == [] and store.load().announced[events].version == 3
    generation = store.load().generation
    commit(store, planned, job_outputs(planned), "scheduled__6 cleared twice", airflow_events)
    assert store.load().generation == generation

    # A backfill's commit step announces its own entries, without moving the watermark.
    watermark = store.load().watermark
    backfill = plan(
        config,
        store.load(),
        {"window_start": "2026-01-01T01:10Z", "window_end": "2026-01-01T02:10Z"},
        run("manual__6", "manual"),
    )
    finish(backfill, 0, eventsInserted=7, eventsTableVersion=4)  # its job reported its commit's rows
    job_commit(events, pipeline_id, ["2026-01-01T01:10:00Z"])
    report = succeeded(commit(store, backfill, job_outputs(backfill), "manual__7", airflow_events))
    assert announced_commits(report) == {events: [4]} and report["targetsChanged"][0]["extra"]["rowsInserted"] == 7
    assert store.load().announced[events].version == 3  # up to the one announced now, not past it
    assert commit(store, backfill, job_outputs(backfill), "manual__7 cleared", airflow_events)["targetsChanged"] == []
    assert store.load().watermark == watermark and store.load().announced[events].version == 4  # now past it


def reported_job_commit(table: str, pipeline_id: str, windows: list[str], token: str) -> dict:
    """A job's commit as its summary reports it (:func:`lakefeed.delta.reported_commit`)."""
    from deltalake import CommitProperties, DeltaTable, write_deltalake

    tags = json.dumps(
        {"pipelineId": pipeline_id, "pipeline": "blob_changefeed", "windows": windows, "commitToken": token}
    )
    write_deltalake(
        table,
        pa.table({"id": [1]}),
        mode="append",
        commit_properties=CommitProperties(custom_metadata={"userMetadata": tags}),
    )
    return {"table": table, "version": DeltaTable(table).version(), "token": token}


def jobs_committed(config, planned, run_id: str) -> None:
    """Every batch of ``planned`` committed to both tables, as its job would, and reported it."""
    for index, batch in enumerate(planned.batches):
        windows = blob_pipeline.windows_of(batch)
        finish(
            planned,
            index,
            commits=[
                reported_job_commit(table, config.checkpoint_variable, windows, f"{run_id}-{index}-{table}")
                for table in (config.events_table, config.state_table)
            ],
        )


def test_a_target_recreated_after_the_jobs_committed_is_refused_and_the_checkpoint_stays(config, store):
    import shutil

    planned = plan(config, BlobCheckpoint(), {}, run("scheduled__1"))
    jobs_committed(config, planned, "scheduled__1")
    report = commit(store, planned, job_outputs(planned), "scheduled__1")
    assert report["watermark"] == format_time(planned.batches[-1].end)  # every commit is in the targets' logs
    recorded = store.load()

    # The next run's jobs commit; then the state table is dropped and recreated by another tool before the
    # commit step (a moved target). Crediting the jobs would record the new table as holding the work.
    generate_feed(Path(config.feed_root), FeedSpec(hours=7, events_per_hour=10, gap_hours=()))
    planned = plan(config, recorded, {}, run("scheduled__2"))
    jobs_committed(config, planned, "scheduled__2")
    shutil.rmtree(config.state_table)
    from deltalake import write_deltalake

    for rows in ([7], [8], [9], [10], [11]):
        write_deltalake(config.state_table, pa.table({"id": rows}), mode="append")
    with pytest.raises(
        CheckpointMismatchError,
        match=(
            f"checkpoint {store.where} was left as it was: the targets' logs do not hold what this run's jobs "
            f"committed: the job committed version \\d+ of {config.state_table}, but version \\d+ there now is "
            "WRITE by another writer"
        ),
    ):
        commit(store, planned, job_outputs(planned), "scheduled__2")
    assert store.load() == recorded  # position, target marks and announcements as they were
    with pytest.raises(CheckpointMismatchError, match="dropped and\\s+recreated"):
        plan(config, store.load(), {}, run("scheduled__3"))  # the next run refuses the table by name


def test_rows_another_writer_changed_after_the_checkpoint_are_refused_until_adopted(config, store):
    from deltalake import DeltaTable, write_deltalake

    planned = plan(config, BlobCheckpoint(), {}, run("scheduled__1"))
    jobs_committed(config, planned, "scheduled__1")
    commit(store, planned, job_outputs(planned), "scheduled__1")
    recorded = store.load()
    mark = recorded.targets[config.state_table].version

    # Compaction changes no rows: not another writer's rows.
    DeltaTable(config.state_table).optimize.compact()
    generate_feed(Path(config.feed_root), FeedSpec(hours=7, events_per_hour=10, gap_hours=()))
    plan(config, recorded, {}, run("scheduled__2"))

    # Another tool deletes rows of the state table: the next run is refused, naming the commit and the writer.
    DeltaTable(config.state_table).delete("id = 1")
    with pytest.raises(
        CheckpointMismatchError,
        match=(
            f"says the target {config.state_table} holds only this pipeline's work through version {mark}, but since "
            f"then version {mark + 2} \\(DELETE\\) changed its rows, written by another writer \\(delta-rs.*"
            "adopt_targets=true"
        ),
    ):
        plan(config, recorded, {}, run("scheduled__2"))

    # Adopted: the run goes on and the checkpoint records the tables as they are now.
    planned = plan(config, recorded, {"adopt_targets": True}, run("scheduled__3"))
    for index, _batch in enumerate(planned.batches):
        finish(planned, index)
    commit(store, planned, job_outputs(planned), "scheduled__3")
    assert store.load().targets[config.state_table].version == DeltaTable(config.state_table).version()
    adopted = store.load()

    # Rows another writer appends while a run's jobs run: the commit step refuses them and moves nothing.
    generate_feed(Path(config.feed_root), FeedSpec(hours=9, events_per_hour=10, gap_hours=()))
    planned = plan(config, adopted, {}, run("scheduled__4"))
    for index, _batch in enumerate(planned.batches):
        finish(planned, index)
    write_deltalake(config.events_table, pa.table({"id": [99]}), mode="append")
    with pytest.raises(
        CheckpointMismatchError,
        match=f"was left as it was: the target {config.events_table} changed "
        "under this run: since version \\d+, where the run's plan saw "
        "it, version \\d+ \\(WRITE\\) changed its rows",
    ):
        commit(store, planned, job_outputs(planned), "scheduled__4")
    assert store.load() == adopted


def test_a_target_dropped_after_the_plan_and_made_anew_by_the_jobs_is_refused(config, store):
    """The plan saw the state table at some version; an operator deletes it while the run waits, and the
    jobs create a new table there holding only this run's windows. Their commits are the pipeline's own
    (the ledger bears them out), but the table lost everything before: the checkpoint must not record it."""
    import shutil

    planned = plan(config, BlobCheckpoint(), {}, run("scheduled__1"))
    jobs_committed(config, planned, "scheduled__1")
    commit(store, planned, job_outputs(planned), "scheduled__1")
    recorded = store.load()
    generate_feed(Path(config.feed_root), FeedSpec(hours=7, events_per_hour=10, gap_hours=()))
    planned = plan(config, recorded, {}, run("scheduled__2"))
    seen = planned.target_marks[config.state_table].version
    shutil.rmtree(config.state_table)
    jobs_committed(config, planned, "scheduled__2")
    with pytest.raises(
        CheckpointMismatchError,
        match=(
            f"the target {config.state_table} changed under this run: since version {seen}, where the run's plan "
            f"saw it, it is at version 0, below version {seen} it was at"
        ),
    ):
        commit(store, planned, job_outputs(planned), "scheduled__2")
    assert store.load() == recorded


def test_a_run_planned_before_plans_recorded_target_marks_is_not_checked_for_changes_during_it(config, store):
    """A run in flight across an upgrade: its plan has no targetMarks, so the commit step cannot tell what
    changed during the run from what was there before (an adopted table, a log cleanup); it credits the run
    as before the upgrade, and the next plan checks the targets against the checkpoint."""
    from deltalake import write_deltalake

    make_tables(config)  # rows another writer made, adopted by the first run
    planned = plan(config, BlobCheckpoint(), {"adopt_targets": True}, run("scheduled__1"))
    document = to_document(planned)
    del document["targetMarks"]  # a plan an earlier version of this code made, before it recorded them
    planned = from_document(BlobPlan, document, "the run's plan")
    jobs_committed(config, planned, "scheduled__1")
    commit(store, planned, job_outputs(planned), "scheduled__1")
    assert store.load().watermark is not None
    write_deltalake(config.events_table, pa.table({"id": [5]}), mode="append")
    with pytest.raises(CheckpointMismatchError, match="version \\d+ \\(WRITE\\) changed its rows"):
        plan(config, store.load(), {}, run("scheduled__2"))
