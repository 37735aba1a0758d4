"""Record what a release of this code plans and commits, as documents, for tests/unit/test_compatibility.py.

Run against the release to record (its include/ and plugins/ first on the path), e.g. the code before the
plan and commit sequences were written once (4df6928):

    git worktree add /tmp/old 4df6928
    PYTHONPATH=/tmp/old/include:/tmp/old/plugins:/tmp/old python tests/compat/record.py tests/compat/4df6928.json

For each feed, on a generated feed, sink or source under a scratch root: the plan document of a scheduled
run from an empty checkpoint, its jobs' arguments, the summaries its jobs report (no Delta commits: the
targets do not exist), the run summary and checkpoint document its commit step writes, and the plan of
the next scheduled run from that checkpoint. Paths are written with the root as ``{root}``.
"""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path

import pyarrow as pa
from deltalake import write_deltalake
from lakefeed_testing.blob_generator import FeedSpec, generate_feed
from lakefeed_testing.crdb_generator import SinkSpec, generate_sink

from lakefeed.blob.checkpoint import BlobCheckpoint
from lakefeed.blob.timegrid import HOUR
from lakefeed.cdf.checkpoint import CdfCheckpoint
from lakefeed.checkpoint_store import CheckpointStore
from lakefeed.crdb.checkpoint import CrdbCheckpoint
from lakefeed.documents import to_document
from lakefeed.pipeline import JobOutputs, RunContext
from lakefeed.times import format_time

try:  # where this code keeps the feeds' configurations
    from lakefeed.blob.config import BlobPipelineConfig
    from lakefeed.cdf.config import CdfConfig, CdfPipeline
    from lakefeed.crdb.config import CrdbConfig
except ImportError:  # the release before the feed specs (4df6928)
    from lakefeed.config import BlobPipelineConfig, CdfConfig, CdfPipeline, CrdbConfig  # type: ignore[attr-defined,no-redef]

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from tests.cells import FileCell


def blob_source(root: Path) -> BlobPipelineConfig:
    generate_feed(root / "feed", FeedSpec(hours=5, events_per_hour=10, gap_hours=()))
    return BlobPipelineConfig(
        feed_root=str(root / "feed"),
        events_table=str(root / "events"),
        state_table=str(root / "state"),
        windows_per_batch=2,
        max_windows_per_run=5,
    )


def blob_summaries(planned) -> dict[int, dict]:
    """Every batch but the last reports (the last failed)."""
    return {
        i: {
            "windows": [format_time(batch.start + k * HOUR) for k in range(batch.windows)],
            "lastConsumable": "2026-01-01T04:10:00Z",
            "segments": [],
            "eventsTable": planned.target_tables["events"],
            "stateTable": planned.target_tables["state"],
        }
        for i, batch in enumerate(planned.batches[:-1])
    }


def crdb_source(root: Path) -> CrdbConfig:
    generate_sink(root / "sink", SinkSpec(steps=30, changes_per_step=3))
    (root / "lake").mkdir()
    return CrdbConfig(
        sink_root=str(root / "sink"), target_root=str(root / "lake"), resolved_per_batch=2, max_batches_per_run=3
    )


def crdb_summaries(planned) -> dict[int, dict]:
    return {
        i: {"afterResolved": batch.after, "throughResolved": batch.through, "targetRoot": planned.config.target_root}
        for i, batch in enumerate(planned.batches)
    }


def cdf_source(root: Path) -> CdfConfig:
    for i in range(8):
        table = pa.table({"id": [i], "v": [i]})
        write_deltalake(
            str(root / "source"), table, mode="append", configuration={"delta.enableChangeDataFeed": "true"}
        )
    pipeline = CdfPipeline(
        name="orders",
        source_table=str(root / "source"),
        target_table=str(root / "target"),
        keys=["id"],
        versions_per_job=3,
    )
    return CdfConfig(pipelines=[pipeline])


def cdf_summaries(planned) -> dict[int, dict]:
    """The first two jobs report (the last failed)."""
    pipeline = planned.config.pipelines[0]
    return {
        i: {
            "mode": job.mode,
            "startingVersion": job.first,
            "endingVersion": job.last,
            "latestVersion": 7,
            "source": pipeline.source_table,
            "target": pipeline.target_table,
            "inserted": 1,
        }
        for i, job in enumerate(planned.jobs[:2])
    }


# Each feed: its DAG, checkpoint type and Variable, its source and the summaries its jobs report.
FEEDS = {
    "blob": ("blob_changefeed_to_delta", BlobCheckpoint, "lakefeed_blob_checkpoint", blob_source, blob_summaries),
    "crdb": ("cockroach_changefeed_to_delta", CrdbCheckpoint, "lakefeed_crdb_checkpoint", crdb_source, crdb_summaries),
    "cdf": ("delta_cdf_to_delta", CdfCheckpoint, "lakefeed_cdf_checkpoint__orders", cdf_source, cdf_summaries),
}


def old_steps(name: str):
    """plan(config, checkpoint, run), commit(store, plan, outputs, run_id) and job_arguments(plan) of the
    release before the sequences (4df6928)."""
    from importlib import import_module

    module = import_module(f"lakefeed.{name}.pipeline")
    if name != "cdf":
        return (lambda config, cp, run: module.plan(config, cp, {}, run)), module.commit, module.job_arguments
    return (
        lambda config, cp, run: module.plan(config, {"orders": cp}, {}, run),
        lambda store, planned, outputs, run_id: module.commit({"orders": store}, planned, outputs, run_id),
        module.job_arguments,
    )


def scenario(name: str, root: Path) -> dict:
    dag, kind, variable, source, summaries_of = FEEDS[name]
    plan, commit, job_arguments = old_steps(name)
    config = source(root)
    store = CheckpointStore(FileCell(root / "checkpoint.json", variable), kind)
    planned = plan(config, store.load(), RunContext(dag, "scheduled__1", "scheduled"))
    summaries = summaries_of(planned)
    try:
        report = commit(store, planned, JobOutputs(summaries=dict(summaries)), "scheduled__1")
    except Exception as exc:  # a failed job: the report is kept on the error
        report = exc.report
    return {
        "plan": to_document(planned),
        "arguments": job_arguments(planned),
        "summaries": {str(i): s for i, s in summaries.items()},
        "report": report,
        "checkpoint": store.cell.get(),
        "nextPlan": to_document(plan(config, store.load(), RunContext(dag, "scheduled__2", "scheduled"))),
    }


def main(out: str) -> None:
    recorded = {}
    for name in FEEDS:
        with tempfile.TemporaryDirectory() as scratch:
            root = Path(scratch) / "root"
            root.mkdir()
            text = json.dumps(scenario(name, root), indent=1, sort_keys=True)
            recorded[name] = json.loads(text.replace(str(root), "{root}"))
    Path(out).write_text(json.dumps(recorded, indent=1, sort_keys=True) + "\n")


if __name__ == "__main__":
    main(sys.argv[1])
