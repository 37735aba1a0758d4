"""
### A downstream DAG scheduled on a lakefeed target (example; not in dags/, so not loaded by default)

The blob pipeline's commit task emits an asset event for each Delta table a run changed. This DAG runs
after every such event on the events table and reads what was applied from the event's extra: the
windows, the rows inserted and the table's Delta version, e.g. to read just that version's new rows
(`spark.read.format("delta").option("readChangeFeed", ...)` or a time-travel diff).

``make ui`` loads it as shipped (a DAG bundle of its own): it follows the events table of the embedded
defaults, the demo's. To use it elsewhere, copy this file into your DAGs folder and point ``EVENTS`` at
your events table's URI: the configured location, with a local path written as ``file:///abs/path``
(see "Assets" in the README). ``LAKEFEED_EVENTS_ASSET`` overrides it without editing (the tests use it).
"""

from __future__ import annotations

import os

from airflow.sdk import Asset, dag, task

from lakefeed.assets import table_uri
from lakefeed.blob.config import BlobPipelineConfig

EVENTS = Asset(os.environ.get("LAKEFEED_EVENTS_ASSET") or table_uri(BlobPipelineConfig().events_table))


@dag(
    dag_id="lakefeed_events_downstream", schedule=[EVENTS], catchup=False, tags=["lakefeed", "example"], doc_md=__doc__
)
def lakefeed_events_downstream():
    @task
    def new_events(triggering_asset_events=None) -> list[dict]:
        """What each triggering event applied: windows, rows inserted, the table version to read from."""
        applied = []
        for event in triggering_asset_events[EVENTS]:
            extra = dict(event.extra)
            print(
                f"{EVENTS.uri}: windows {extra.get('windows')}, {extra.get('rowsInserted')} rows inserted, "
                f"table version {extra.get('targetVersion')}"
            )
            applied.append(extra)
        return applied

    new_events()


lakefeed_events_downstream()
