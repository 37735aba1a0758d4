"""The demo's data, in one place for `make demo` (local folders) and the Docker stack (Azurite).

A blob change feed, a CockroachDB cloud storage sink and a Delta source table with change data feed on,
generated with fixed seeds; the targets each DAG writes; and the check of those targets against the
ground truth. :class:`DemoLayout` says where each lives: under a local folder (``make demo``) or in the
containers of a storage account (the stack: the feed in ``$blobchangefeed``, the sink at the root of
``changefeeds``, the CDF source and the blob and CDF tables under ``lake``, one CockroachDB table per
topic at the root of ``crdb``).

    python -m lakefeed_testing.demo_data load --wasb-conn-id wasb_lake     # the stack's init (idempotent)
    python -m lakefeed_testing.demo_data check --wasb-conn-id wasb_lake    # every target against the truth

Both read the storage credential from the Airflow ``wasb`` connection, never from the environment.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lakefeed_testing.blob_generator import FeedSpec, GroundTruth, generate_feed
from lakefeed_testing.crdb_generator import SinkSpec, SinkTruth, generate_sink

FEED = FeedSpec(hours=4, events_per_hour=5_000, shards=4, records_per_chunk=2_000)
SINK = SinkSpec(steps=30, changes_per_step=60)
TOPICS = ("customers", "orders")
CDF_PIPELINE = "demo"
SCHEMA = "id BIGINT, name STRING, amount BIGINT, touched INT"


@dataclass(frozen=True)
class DemoLayout:
    """Where the demo's feeds, sources and targets are; ``expected`` is the ground truth's JSON document."""

    feed: str
    sink: str
    cdf_source: str
    events_table: str
    state_table: str
    cdf_target: str
    crdb_root: str
    expected: str
    crdb_sql_root: str | None = None  # the SQL-pulled CockroachDB feed's tables (None: not in this layout)

    @classmethod
    def local(cls, data: Path) -> DemoLayout:
        """``make demo``'s folders: where the pipelines' embedded defaults point (``LAKEFEED_DATA``)."""
        return cls(
            feed=str(data / "feed"),
            sink=str(data / "crdb_sink"),
            cdf_source=str(data / "cdf" / "source"),
            events_table=str(data / "lake" / "blob_events"),
            state_table=str(data / "lake" / "blob_state"),
            cdf_target=str(data / "cdf" / "target"),
            crdb_root=str(data / "lake" / "crdb"),
            expected=str(data / "logs" / "expected.json"),
            crdb_sql_root=str(data / "lake" / "crdb_sql"),
        )

    @classmethod
    def azure(cls) -> DemoLayout:
        """The stack's containers (docker-compose.yaml configures the three DAGs with these)."""
        return cls(
            feed="az://$blobchangefeed",
            sink="az://changefeeds",
            cdf_source="az://lake/cdf/source",
            events_table="az://lake/blob/events",
            state_table="az://lake/blob/state",
            cdf_target="az://lake/cdf/target",
            crdb_root="az://crdb",  # one table per topic at the root of a container
            expected="az://lake/demo/expected.json",
        )

    def dag_configs(self, wasb_conn_id: str | None = None) -> dict[str, dict[str, Any]]:
        """The three DAGs' configuration Variables for this layout (by Variable name)."""
        connection = {"wasb_conn_id": wasb_conn_id} if wasb_conn_id else {}
        return {
            "lakefeed_blob_config": {
                "feed_root": self.feed,
                "events_table": self.events_table,
                "state_table": self.state_table,
                **connection,
            },
            "lakefeed_cdf_config": {
                "pipelines": [
                    {
                        "name": CDF_PIPELINE,
                        "source_table": self.cdf_source,
                        "target_table": self.cdf_target,
                        "keys": ["id"],
                    }
                ],
                **connection,
            },
            "lakefeed_crdb_config": {"sink_root": self.sink, "target_root": self.crdb_root, **connection},
        }


def expected_targets(truth: GroundTruth, sink: SinkTruth) -> dict[str, Any]:
    """What the targets hold once every ready window and every RESOLVED span is applied."""
    windows = truth.ready_windows()
    return {
        "events": [e.id for e in truth.claimed(windows)],
        "state": {subject: e.id for subject, e in truth.state(windows).items()},
        "crdb": {topic: sorted(sink.live(topic)) for topic in TOPICS},
    }


def make_cdf_source(spark: Any, source: str) -> int:
    """A source table with change data feed on: inserts, one key updated three times, deletes, and an
    overwrite of a slice (versions 0..6); its latest version. ``source`` is a path Spark opens."""
    from lakefeed_testing.cdf_simulator import create_source, latest_version

    table = f"delta.`{source}`"
    create_source(spark, source, rows=12)  # v0 create, v1 12 rows
    spark.sql(f"UPDATE {table} SET amount = amount + 1, touched = 2 WHERE id IN (1, 2, 3)")
    spark.sql(f"UPDATE {table} SET amount = amount + 1, touched = 3 WHERE id = 1")  # key 1 again
    spark.sql(f"DELETE FROM {table} WHERE id IN (4, 5)")
    spark.sql(f"UPDATE {table} SET amount = 999, touched = 5 WHERE id = 1")  # and again
    (
        spark.createDataFrame([(9, "replaced-9", 90, 6), (20, "new-20", 200, 6)], SCHEMA)
        .write.format("delta")
        .mode("overwrite")
        .option("replaceWhere", "id >= 9")
        .save(source)
    )
    return latest_version(spark, source)


def check_targets(spark: Any, layout: DemoLayout, expected: dict[str, Any], opened: Callable[[str], str] = str) -> dict:
    """Every target against the ground truth (read by Spark: the tables carry deletion vectors).
    ``opened`` turns a layout location into the path Spark opens."""
    from lakefeed_testing.cdf_simulator import live_rows

    read = spark.read.format("delta")
    events = {r["id"] for r in read.load(opened(layout.events_table)).select("id").collect()}
    state = {r["subject"]: r["eventId"] for r in read.load(opened(layout.state_table)).collect()}
    cdf_target = sorted(map(tuple, live_rows(spark, opened(layout.cdf_target)).collect()))
    cdf_source = sorted(map(tuple, read.load(opened(layout.cdf_source)).collect()))

    def live_keys(root: str, topic: str) -> set[str]:
        table = read.load(opened(f"{root}/{topic}"))
        return {r["_crdb_key"] for r in table.where("NOT _crdb_deleted").select("_crdb_key").collect()}

    crdb = {topic: live_keys(layout.crdb_root, topic) == set(keys) for topic, keys in expected["crdb"].items()}
    crdb_sql = (
        {topic: live_keys(layout.crdb_sql_root, topic) == set(keys) for topic, keys in expected["crdb"].items()}
        if layout.crdb_sql_root
        else {}
    )
    figures = {
        "blob events": events == set(expected["events"]),
        "blob state": state == expected["state"],
        "cdf target": cdf_target == cdf_source,
        **{f"crdb {topic}": same for topic, same in crdb.items()},
        **{f"crdb-sql {topic}": same for topic, same in crdb_sql.items()},
    }
    return {"check": all(figures.values()), "figures": figures}


# The stack: the same data in a storage account, through an Airflow connection.


def _connection(wasb_conn_id: str) -> tuple[Any, dict[str, str]]:
    """The connection's BlobServiceClient (the provider's, for every credential type) and its credential
    as the library names it (:func:`lakefeed.azure.credential_env`)."""
    from airflow.providers.microsoft.azure.hooks.wasb import WasbHook

    from lakefeed_airflow.wasb_feed import connection_credentials  # plugins/ is on the image's PYTHONPATH

    return WasbHook(wasb_conn_id=wasb_conn_id).get_conn(), connection_credentials(wasb_conn_id)


def _container(service: Any, location: str) -> Any:
    """The container of an Azure location, made if missing."""
    from lakefeed.azure import azure_location

    client = service.get_container_client(azure_location(location).container)
    if not client.exists():
        client.create_container()
    return client


def _upload(service: Any, folder: Path, location: str) -> int:
    from lakefeed.azure import azure_location

    where = azure_location(location)
    client = _container(service, location)
    count = 0
    for path in sorted(folder.rglob("*")):
        if path.is_file():
            name = "/".join(p for p in (where.prefix.strip("/"), path.relative_to(folder).as_posix()) if p)
            with path.open("rb") as handle:
                client.upload_blob(name, handle, overwrite=True)
            count += 1
    return count


def _blob(service: Any, location: str) -> Any:
    from lakefeed.azure import azure_location

    where = azure_location(location)
    return service.get_blob_client(where.container, where.prefix.strip("/"))


def _spark(credentials: dict[str, str]) -> Any:
    from lakefeed.spark import apply_storage_credentials, get_session

    spark = get_session("lakefeed-demo-data", master="local[1]", extra={"spark.ui.enabled": "false"})
    spark.sparkContext.setLogLevel("ERROR")
    apply_storage_credentials(spark, credentials)
    return spark


def load(wasb_conn_id: str) -> dict[str, Any]:
    """Put the demo's feed, sink and CDF source in the connection's account, once: a second load finds the
    ground truth written last and leaves everything as it is (the checkpoints of earlier runs stay true)."""
    from lakefeed.azure import hadoop_url

    layout = DemoLayout.azure()
    service, credentials = _connection(wasb_conn_id)
    marker = _blob(service, layout.expected)
    if marker.exists():
        return {"loaded": False, "reason": f"{layout.expected} exists: the demo data is already there"}
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="lakefeed-demo-") as scratch:
        truth = generate_feed(Path(scratch) / "feed", FEED)
        sink = generate_sink(Path(scratch) / "sink", SINK)
        files = _upload(service, Path(scratch) / "feed", layout.feed) + _upload(
            service, Path(scratch) / "sink", layout.sink
        )
    for location in (layout.cdf_source, layout.events_table, layout.cdf_target, layout.crdb_root, layout.expected):
        _container(service, location)  # hadoop-azure and delta-rs write into containers, never make them
    spark = _spark(credentials)
    try:
        latest = make_cdf_source(spark, hadoop_url(layout.cdf_source, credentials))
    finally:
        spark.stop()
    expected = expected_targets(truth, sink)
    marker.upload_blob(json.dumps(expected), overwrite=True)  # last: it marks the load complete
    return {
        "loaded": True,
        "blobEvents": len(truth.events),
        "sinkMessages": sink.messages,
        "cdfSourceVersion": latest,
        "filesUploaded": files,
        "seconds": round(time.monotonic() - started, 1),
    }


def check(wasb_conn_id: str) -> dict[str, Any]:
    from lakefeed.azure import hadoop_url

    layout = DemoLayout.azure()
    service, credentials = _connection(wasb_conn_id)
    expected = json.loads(_blob(service, layout.expected).download_blob().readall())
    spark = _spark(credentials)
    try:
        return check_targets(spark, layout, expected, lambda location: hadoop_url(location, credentials))
    finally:
        spark.stop()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("command", choices=("load", "check"))
    parser.add_argument("--wasb-conn-id", default="wasb_lake")
    args = parser.parse_args(argv)
    result = load(args.wasb_conn_id) if args.command == "load" else check(args.wasb_conn_id)
    print("RESULT " + json.dumps(result), flush=True)
    return 0 if result.get("check", True) else 1


if __name__ == "__main__":
    sys.exit(main())
