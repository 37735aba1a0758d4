"""The CockroachDB changefeed pipeline as the monitor shows it (:class:`lakefeed.monitor.Watched`): the
checkpoint's RESOLVED against the sink's newest RESOLVED file, in seconds."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict
from typing import Any

from lakefeed import pipeline as skeleton
from lakefeed.checkpoint_store import CheckpointStore
from lakefeed.crdb.checkpoint import CrdbCheckpoint
from lakefeed.crdb.config import CrdbConfig
from lakefeed.crdb.hlc import Hlc
from lakefeed.crdb.sink import resolved_stamps
from lakefeed.monitor import RunRow, Watched, figures_row

# The row's figures: the run summary's counts each adds up.
FIGURES = {
    "read": ("messagesRead",),
    "duplicates": ("duplicatesDropped",),
    "inserted": ("inserted",),
    "updated": ("updated",),
    "deleted": ("deleted",),
    "quarantined": ("quarantined",),
    "lag": ("lagSeconds",),
}


def watched(
    config: CrdbConfig, checkpoints: Callable[[CrdbConfig], CheckpointStore], storage: skeleton.Storage
) -> list[Watched]:
    def newest_resolved(resolved: str | None) -> str | None:
        """Lists the sink from the checkpoint's partition on, never the whole sink."""
        since = Hlc.parse(resolved) if resolved else None
        store = storage.feed(config.sink_root, config.wasb_conn_id)
        found = resolved_stamps(store, since)
        return str(max(found)) if found else None

    def recorded(checkpoint: CrdbCheckpoint) -> str | None:
        return checkpoint.resolved

    return [
        Watched(
            key="cockroach",
            title="CockroachDB changefeed → Delta",
            config=asdict(config),
            load_checkpoint=checkpoints(config).load,
            checkpoint_label="resolved",
            recorded=recorded,
            position_label="newest RESOLVED",
            read_position=newest_resolved,
            lag_unit="seconds",
            lag=lambda newest, resolved: round((Hlc.parse(newest).wall - Hlc.parse(resolved).wall) / 1e9, 3),
            row=run_row,
        )
    ]


def run_row(base: dict[str, Any], report: dict[str, Any] | None) -> RunRow:
    """A CockroachDB run: resolved span, messages read, duplicates dropped, rows inserted/updated/deleted."""
    if not report:
        return RunRow(**base)
    before, after = report.get("resolvedBefore"), report.get("resolved")
    applied = f"{before or 'first file'} → {after}" if after and after != before else None
    return figures_row(base, report, applied, FIGURES)
