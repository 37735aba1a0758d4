"""The Delta CDF pipelines as the monitor shows them (:class:`lakefeed.monitor.Watched`), one card each:
the applied version against the source's latest version."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict
from functools import partial
from typing import Any

from lakefeed import pipeline as skeleton
from lakefeed.cdf.checkpoint import CdfCheckpoint
from lakefeed.cdf.config import CdfConfig, CdfPipeline
from lakefeed.checkpoint_store import CheckpointStore
from lakefeed.deltalog import DeltaLog
from lakefeed.monitor import RunRow, Watched, figures_row, span

# The row's figures: the counts of the pipeline's part of the run summary each adds up.
FIGURES = {
    "read": ("rowsRead",),
    "inserted": ("inserted",),
    "updated": ("updated",),
    "deleted": ("deleted",),
    "lag": ("lagVersions",),
}


def watched(
    config: CdfConfig, checkpoints: Callable[[CdfPipeline], CheckpointStore], storage: skeleton.Storage
) -> list[Watched]:
    def recorded(checkpoint: CdfCheckpoint) -> int | None:
        return checkpoint.applied_version

    def latest_version(pipeline: CdfPipeline, _: Any) -> int | None:
        return DeltaLog(storage.table(pipeline.source_table, pipeline.wasb_conn_id)).latest_version()

    return [
        Watched(
            key=f"cdf:{pipeline.name}",
            title=f"Delta CDF {pipeline.name} → Delta",
            config=asdict(pipeline),
            load_checkpoint=checkpoints(pipeline).load,
            checkpoint_label="applied version",
            recorded=recorded,
            position_label="latest version",
            read_position=partial(latest_version, pipeline),
            lag_unit="versions",
            lag=lambda latest, applied: latest - applied,
            row=partial(run_row, pipeline=pipeline.name),
        )
        for pipeline in config.pipelines
    ]


def run_row(base: dict[str, Any], report: dict[str, Any] | None, pipeline: str) -> RunRow:
    """One CDF pipeline's part of a run: version ranges, change rows read, rows inserted/updated/deleted."""
    mine = (report or {}).get("pipelines", {}).get(pipeline)
    if not mine:
        return RunRow(**base)
    assert report is not None  # ``mine`` comes from it
    applied = span([f"{a}..{b}" if a != b else f"{a}" for a, b in mine.get("versions", [])])
    changed = [c for c in report.get("targetsChanged", []) if c["extra"].get("pipeline") == f"cdf:{pipeline}"]
    return figures_row(base, mine, applied, FIGURES, failed="jobsFailed", targets_changed=changed)
