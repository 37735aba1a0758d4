"""The demo: the three pipelines end to end with spark-submit on local Spark and real Delta.

1. Blob change feed: generate a feed, ingest every ready window, show both targets.
2. Delta CDF: create a source table with change data feed on, commit inserts,
   updates (one key several times), deletes and an overwrite, apply the range,
   show the target next to the source.
3. CockroachDB changefeed: generate a cloud storage sink folder (two topics, duplicates, a restart,
   a schema change), apply it through its newest RESOLVED file, show the topic tables.

    make demo            # or: python scripts/demo.py --events-per-hour 20000
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

from lakefeed.blob.feed import ChangeFeed
from lakefeed.blob.generator import FeedSpec, generate_feed
from lakefeed.blob.plan import plan_ready_windows
from lakefeed.blob.timegrid import format_time
from lakefeed.storage import Store

ROOT = Path(__file__).resolve().parents[1]


def show_table(path: Path, columns: list[str], sort: list[str], rows: int = 5) -> None:
    """A few rows of a Delta table, read by Spark (the state and topic tables have deletion vectors)."""
    from lakefeed.spark import get_session

    spark = get_session("lakefeed-demo-show", extra={"spark.ui.enabled": "false"})
    spark.sparkContext.setLogLevel("ERROR")
    table = spark.read.format("delta").load(str(path))
    version = spark.sql(f"DESCRIBE HISTORY delta.`{path}`").collect()[0]["version"]
    print(f"\n{path.relative_to(ROOT)} (Delta version {version}, {table.count()} rows)")
    print(table.select(*columns).orderBy(*sort).limit(rows).toPandas().to_string(index=False, max_colwidth=48))


def spark_submit(script: str, args: list[str]) -> tuple[int, float, str]:
    command = ["spark-submit", str(ROOT / "spark_jobs" / script), *args]
    print("$ " + " ".join(command), flush=True)
    started = time.perf_counter()
    result = subprocess.run(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if result.returncode != 0:
        print(result.stdout[-5000:], file=sys.stderr)
    return result.returncode, time.perf_counter() - started, result.stdout


def cdf_demo(data: Path) -> int:
    from lakefeed.cdf.simulator import create_source, latest_version, live_rows
    from lakefeed.spark import get_session

    source, target = data / "cdf" / "source", data / "cdf" / "target"
    for folder in (source, target):
        shutil.rmtree(folder, ignore_errors=True)
    spark = get_session("lakefeed-demo-source", extra={"spark.ui.enabled": "false"})
    spark.sparkContext.setLogLevel("ERROR")
    table = f"delta.`{source}`"
    create_source(spark, str(source), rows=12)                                   # v0 create, v1 12 rows
    spark.sql(f"UPDATE {table} SET amount = amount + 1, touched = 2 WHERE id IN (1, 2, 3)")
    spark.sql(f"UPDATE {table} SET amount = amount + 1, touched = 3 WHERE id = 1")   # key 1 again
    spark.sql(f"DELETE FROM {table} WHERE id IN (4, 5)")
    spark.sql(f"UPDATE {table} SET amount = 999, touched = 5 WHERE id = 1")          # and again
    (spark.createDataFrame([(9, "replaced-9", 90, 6), (20, "new-20", 200, 6)], "id BIGINT, name STRING, amount BIGINT, touched INT")
     .write.format("delta").mode("overwrite").option("replaceWhere", "id >= 9").save(str(source)))  # overwrite a slice
    latest = latest_version(spark, str(source))
    print(f"\nsource {source.relative_to(ROOT)}: change data feed on, versions 0..{latest}")
    summary_file = data / "cdf_summary.json"
    code, seconds, _ = spark_submit("delta_cdf_job.py", [
        "--source-table", str(source), "--target-table", str(target), "--keys", "id",
        "--starting-version", "0", "--ending-version", str(latest), "--summary-json", str(summary_file)])
    if code != 0:
        spark.stop()
        return code
    summary = json.loads(summary_file.read_text())
    print(f"spark-submit finished in {seconds:.1f}s")
    for key in ("startingVersion", "endingVersion", "rowsRead", "keysChanged", "inserted", "updated", "deleted",
                "targetVersion", "lagVersions", "seconds"):
        print(f"  {key:<20} {summary[key]}")
    print(f"\n{target.relative_to(ROOT)} (tombstones included; readers filter NOT _cdf_deleted)")
    spark.read.format("delta").load(str(target)).orderBy("id").show(30, truncate=False)
    same = sorted(map(tuple, live_rows(spark, str(target)).collect())) == sorted(
        map(tuple, spark.read.format("delta").load(str(source)).collect()))
    print(f"target's live rows equal the source's latest snapshot: {same}")
    spark.stop()
    return 0 if same else 1


def crdb_demo(data: Path) -> int:
    from lakefeed.crdb.generator import SinkSpec, generate_sink

    sink, lake = data / "crdb_sink", data / "lake" / "crdb"
    for folder in (sink, lake):
        shutil.rmtree(folder, ignore_errors=True)
    truth = generate_sink(sink, SinkSpec(steps=30, changes_per_step=60))
    print(f"\ngenerated a changefeed sink under {sink.relative_to(ROOT)}: {truth.messages} messages "
          f"({truth.duplicates} duplicates), {len(truth.resolved)} RESOLVED files")
    summary_file = data / "crdb_summary.json"
    code, seconds, _ = spark_submit("cockroach_changefeed_job.py", [
        "--sink-root", str(sink), "--target-root", str(lake), "--through-resolved", truth.resolved[-1],
        "--summary-json", str(summary_file)])
    if code != 0:
        return code
    summary = json.loads(summary_file.read_text())
    print(f"spark-submit finished in {seconds:.1f}s")
    for key in ("files", "messagesRead", "duplicatesDropped", "supersededInBatch", "inserted", "throughResolved"):
        print(f"  {key:<20} {summary[key]}")
    same = True
    for topic in ("customers", "orders"):
        show_table(lake / topic, ["_crdb_key", "_crdb_updated", "_crdb_deleted"], ["_crdb_key"], rows=3)
        from lakefeed.spark import get_session

        live = get_session("lakefeed-demo-show").read.format("delta").load(str(lake / topic)).where("NOT _crdb_deleted")
        same &= {row["_crdb_key"] for row in live.select("_crdb_key").collect()} == set(truth.live(topic))
    print(f"topic tables' live keys equal the ground truth: {same}")
    return 0 if same else 1


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", default=str(ROOT / "data" / "demo"))
    parser.add_argument("--hours", type=int, default=4)
    parser.add_argument("--events-per-hour", type=int, default=5_000)
    parser.add_argument("--shards", type=int, default=4)
    args = parser.parse_args()
    started = time.perf_counter()

    data = Path(args.data)
    feed_root, lake = data / "feed", data / "lake"
    for folder in (feed_root, lake):
        shutil.rmtree(folder, ignore_errors=True)
    truth = generate_feed(feed_root, FeedSpec(hours=args.hours, events_per_hour=args.events_per_hour,
                                              shards=args.shards, records_per_chunk=2_000))
    print(f"generated {len(truth.events)} events ({truth.control_records} Control records, "
          f"{truth.duplicate_records} duplicated records) under {feed_root.relative_to(ROOT)}")

    ready = plan_ready_windows(ChangeFeed(Store(str(feed_root))))
    if ready is None:
        print("no window is ready")
        return 1
    start, end = (format_time(t) for t in ready)
    summary_file = data / "blob_summary.json"
    code, job_seconds, _ = spark_submit("blob_changefeed_job.py", [
        "--feed-root", str(feed_root), "--window-start", start, "--window-end", end,
        "--events-table", str(lake / "blob_events"), "--state-table", str(lake / "blob_state"),
        "--summary-json", str(summary_file)])
    if code != 0:
        return code

    summary = json.loads(summary_file.read_text())
    print(f"\nspark-submit finished in {job_seconds:.1f}s")
    for key, value in summary.items():
        print(f"  {key:<20} {value}")
    show_table(lake / "blob_events", ["id", "eventType", "eventTime", "subject", "claimWindow", "shard"],
               ["eventTime"])
    show_table(lake / "blob_state", ["container", "blobName", "eventType", "isDeleted", "sequencer"],
               ["container", "blobName"])
    print(f"blob pipeline: {summary['eventsUnique'] / job_seconds:,.0f} events/s through spark-submit "
          f"(JVM start included)")
    code = cdf_demo(data) or crdb_demo(data)
    print(f"\ndemo finished in {time.perf_counter() - started:.1f}s")
    return code


if __name__ == "__main__":
    sys.exit(main())
