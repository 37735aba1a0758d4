"""The SQL-pulled CockroachDB feed as the monitor shows it: the CockroachDB card
(:mod:`lakefeed.crdb.monitoring`) over the staged folder, its position the newest staged range's end."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from lakefeed import pipeline as skeleton
from lakefeed.checkpoint_store import CheckpointStore
from lakefeed.crdb import monitoring
from lakefeed.crdbsql import KEY
from lakefeed.crdbsql.config import CrdbSqlConfig
from lakefeed.monitor import Watched


def watched(
    config: CrdbSqlConfig, checkpoints: Callable[[CrdbSqlConfig], CheckpointStore], storage: skeleton.Storage
) -> list[Watched]:
    return [
        replace(card, key=KEY, title="CockroachDB over SQL → Delta", position_label="newest staged range end")
        for card in monitoring.watched(config, checkpoints, storage)  # type: ignore[arg-type]
    ]
