"""Planning and checkpoint commit of the CockroachDB DAG, and its trigger, on a real generated sink folder,
real summary files and the real compare-and-set store over a file cell."""

import asyncio
import os
from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest
from lakefeed_testing.crdb_generator import SinkSpec, generate_sink

from lakefeed.crdb import pipeline as crdb_pipeline
from lakefeed.crdb.checkpoint import CrdbCheckpoint
from lakefeed.crdb.config import CrdbConfig
from lakefeed.crdb.hlc import Hlc
from lakefeed.documents import to_document
from lakefeed.errors import CheckpointMismatchError, ConfigError, WindowNotReadyError
from lakefeed.pipeline import RunContext
from lakefeed_airflow.triggers import ResolvedTimestampTrigger
from tests.cells import commit_plan, file_store, job_outputs, plan_one

DAG = "cockroach_changefeed_to_delta"


def plan(config, checkpoint, params, run_context):
    return plan_one(crdb_pipeline.HOOKS, config, checkpoint, params, run_context)


def commit(store, planned, outputs, run_id, announced_since=None):
    return commit_plan(crdb_pipeline.HOOKS, store, planned, outputs, run_id, announced_since)


def run(run_id="scheduled__1", run_type="scheduled", start=None, end=None):
    return RunContext(DAG, run_id, run_type, start, end)


@pytest.fixture
def sink(tmp_path):
    return generate_sink(tmp_path / "sink", SinkSpec(steps=30, changes_per_step=3))


@pytest.fixture
def config(tmp_path, sink):
    return CrdbConfig(
        sink_root=str(tmp_path / "sink"),
        target_root=str(tmp_path / "lake"),
        resolved_per_batch=2,
        max_batches_per_run=2,
    )


@pytest.fixture
def store(tmp_path):
    return file_store(tmp_path / "cp", CrdbCheckpoint)


def finish(planned, index):
    batch = planned.batches[index]
    summary = {
        "afterResolved": batch.after,
        "throughResolved": batch.through,
        "messagesRead": 10,
        "topics": {},
        "targetRoot": planned.target_root,
    }
    job_outputs(planned).summaries[index] = summary


def test_scheduled_runs_take_resolved_files_in_batches_from_the_first_file(config, store, sink):
    planned = plan(config, store.load(), {}, run())
    r = sink.resolved
    assert to_document(planned)["batches"] == [{"after": None, "through": r[1]}, {"after": r[1], "through": r[3]}]
    assert planned.newest_resolved == r[-1] and planned.sink.startswith("file://")
    args = crdb_pipeline.HOOKS.arguments(planned)
    assert "--after-resolved" not in args[0] and args[1][4:8] == ["--after-resolved", r[1], "--through-resolved", r[3]]
    assert "--quarantine-table" not in args[0]
    quarantining = replace(planned, config=replace(config, quarantine_table="/lake/quarantine"))
    args = crdb_pipeline.HOOKS.arguments(quarantining)[0]
    assert args[args.index("--quarantine-table") + 1] == "/lake/quarantine"
    removing = crdb_pipeline.HOOKS.arguments(replace(planned, config=replace(config, tombstone_retention_hours=48.0)))
    assert removing[0][removing[0].index("--tombstone-retention-hours") + 1] == "48.0"
    assert "--tombstone-retention-hours" not in removing[1]  # the first batch of a scheduled run only
    finish(planned, 1)  # the first batch failed: nothing may move past it
    with pytest.raises(RuntimeError, match="1 of 2 batch"):
        commit(store, planned, job_outputs(planned), "r1")
    assert store.load().resolved is None and store.load().sink == planned.sink
    finish(planned, 0)
    report = commit(store, planned, job_outputs(planned), "r1 retry")
    assert store.load().resolved == r[3] and report["checkpointMoved"]
    assert report["lagSeconds"] == (Hlc.parse(r[-1]).wall - Hlc.parse(r[3]).wall) / 1e9
    nxt = plan(config, store.load(), {}, run("scheduled__2"))
    assert to_document(nxt)["batches"][0] == {"after": r[3], "through": r[5]}


def test_a_backfill_is_exactly_its_range_and_never_moves_the_checkpoint(config, store, sink):
    r = sink.resolved
    planned = plan(config, store.load(), {"after_resolved": r[0], "through_resolved": r[2]}, run("m", "manual"))
    assert planned.kind == "backfill" and to_document(planned)["batches"] == [{"after": r[0], "through": r[2]}]
    finish(planned, 0)
    commit(store, planned, job_outputs(planned), "m")
    assert store.load() == CrdbCheckpoint()
    cases = [
        ({"after_resolved": r[0]}, ConfigError, "needs through_resolved"),
        ({"after_resolved": r[2], "through_resolved": r[0]}, ConfigError, "must be before"),
        ({"through_resolved": "yesterday"}, ConfigError, "not a RESOLVED timestamp"),
        ({"through_resolved": "1.0000000000"}, WindowNotReadyError, "no RESOLVED file at 1.0000000000"),
    ]
    for params, error, message in cases:
        with pytest.raises(error, match=message):
            plan(config, store.load(), params, run("m", "manual"))


def test_an_airflow_backfill_run_takes_the_resolved_ranges_of_its_interval(config, store, sink):
    r = [Hlc.parse(x) for x in sink.resolved]

    def moment(stamp):
        return datetime.fromtimestamp(stamp.wall / 1e9, tz=UTC)

    planned = plan(config, store.load(), {}, run("b", "backfill", moment(r[1]), moment(r[3])))
    assert to_document(planned)["batches"] == [{"after": str(r[1]), "through": str(r[2])}]
    before = plan(
        config,
        store.load(),
        {},
        run("b", "backfill", datetime(2020, 1, 1, tzinfo=UTC), datetime(2020, 1, 1, 1, tzinfo=UTC)),
    )
    assert before.batches == []
    # An hour the changefeed has not resolved yet (its newest RESOLVED is before the hour's end): not ready,
    # not an empty range.
    newest = moment(r[-1])
    with pytest.raises(WindowNotReadyError, match=f"newest RESOLVED timestamp in .* is {r[-1]}"):
        plan(config, store.load(), {}, run("b", "backfill", newest, newest + timedelta(hours=1)))


def test_a_checkpoint_of_another_sink_is_refused_until_a_reset(config, store, sink):
    other = CrdbCheckpoint(resolved=sink.resolved[1], sink="azure://acct/feeds/crdb")
    with pytest.raises(CheckpointMismatchError, match="belongs to the feed azure://acct/feeds/crdb.*reset_checkpoint"):
        plan(config, other, {}, run())
    planned = plan(config, other, {"reset_checkpoint": True}, run("m", "manual"))
    assert planned.kind == "reset" and planned.batches[0].after is None


def first_event(trigger):
    async def go():
        return await anext(trigger.run())

    return asyncio.run(go()).payload


def test_the_trigger_serializes_exactly_and_fires_on_a_newer_resolved_file(config, sink):
    kwargs = {
        "sink_root": config.sink_root,
        "wasb_conn_id": None,
        "resolved": sink.resolved[-2],
        "sink_identity": None,
        "checkpoint_variable": "cp",
        "deadline": "2099-01-01T00:00:00Z",
        "poke_interval": 0.05,
    }
    trigger = ResolvedTimestampTrigger(**kwargs)
    assert trigger.serialize() == ("lakefeed_airflow.triggers.ResolvedTimestampTrigger", kwargs)
    assert first_event(trigger) == {
        "status": "ready",
        "resolved": sink.resolved[-2],
        "newestResolved": sink.resolved[-1],
    }
    done = ResolvedTimestampTrigger(**{**kwargs, "resolved": sink.resolved[-1], "deadline": "2000-01-01T00:00:00Z"})
    assert first_event(done)["status"] == "timeout"
    moved = ResolvedTimestampTrigger(**{**kwargs, "sink_identity": "file:///elsewhere"})
    assert first_event(moved)["status"] == "refused"


def test_a_moved_target_root_is_refused_naming_both_and_a_reset_records_the_new(config, store, sink):
    planned = plan(config, store.load(), {}, run())
    for index in range(len(planned.batches)):
        finish(planned, index)
    commit(store, planned, job_outputs(planned), "r1")
    assert store.load().target_root == config.target_root
    moved = CrdbConfig(**{**config.__dict__, "target_root": config.target_root + "_moved"})
    with pytest.raises(
        CheckpointMismatchError,
        match=f"target_root {config.target_root}, but the configuration "
        f"now says {moved.target_root}.*reset_checkpoint=true",
    ):
        plan(moved, store.load(), {}, run("r2"))
    planned = plan(moved, store.load(), {"reset_checkpoint": True}, run("r3"))
    assert planned.target_root == moved.target_root and "--target-root" in crdb_pipeline.HOOKS.arguments(planned)[0]
    # A checkpoint written before targetRoot was recorded: its topic tables' folder is the root it was made with.
    legacy = CrdbCheckpoint(resolved=sink.resolved[0], targets={})
    assert crdb_pipeline.recorded_root(legacy) is None
    from lakefeed.checkpoint import TableMark

    legacy = CrdbCheckpoint(resolved=sink.resolved[0], targets={f"{config.target_root}/orders": TableMark("t", 1)})
    assert crdb_pipeline.recorded_root(legacy) == config.target_root


def test_topic_tables_are_the_tables_under_the_root_but_the_applied_files_ledger(tmp_path):
    import pyarrow as pa
    from deltalake import write_deltalake

    from lakefeed.crdb import APPLIED_FILES_TABLE

    for name in ("orders", "users", APPLIED_FILES_TABLE):
        write_deltalake(str(tmp_path / "lake" / name), pa.table({"id": [1]}))
    (tmp_path / "lake" / "not_a_table").mkdir()
    root = str(tmp_path / "lake")
    assert crdb_pipeline.topic_tables(root + "/") == [f"{root}/orders", f"{root}/users"]
    # A quarantine table kept under the root is no topic, however its location is spelled.
    write_deltalake(str(tmp_path / "lake" / "_quarantine"), pa.table({"id": [1]}))
    relative = os.path.relpath(tmp_path / "lake" / "_quarantine")
    assert crdb_pipeline.topic_tables(root, relative + "/") == [f"{root}/orders", f"{root}/users"]
