"""Cost follows the changes, not the table: the same hourly run into small targets and into big ones,
side by side in one run.

    python bench/scaling_bench.py            # via `make bench`
    python bench/scaling_bench.py cdf        # one part only (blob or cdf); the other's saved figures stay

- Blob: one hour of ~100k service-shaped events (the window after the one that filled the targets),
  through `spark-submit`, into targets holding about as many rows as the batch, and into copies of
  them grown with synthetic rows to 20x the events (same day, earlier and later hours, written in
  time order as the feed fills them) and 100x the state rows; two rounds each, interleaved, best kept.
- CDF: one source commit updating 10k keys, applied by the job into a 100k-row target and into a
  10M-row target; three rounds each, interleaved, best kept. Twice: keys spread evenly over the whole
  key space (every file of the target holds some), and keys among the newest (recent orders, say).
- A replay of the blob window and of the CDF range already applied: what it writes.

Each figure comes with what Delta's commit metrics say was written: bytes added, files rewritten
(removed), rows copied.
"""

from __future__ import annotations

import json
import shutil
import sys
from datetime import UTC, datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from blob_bench import feed, spark_submit
from common import DATA, save, timed
from lakefeed_testing.blob_generator import FeedSpec

from lakefeed.blob.timegrid import HOUR, TICKS_PER_SECOND, to_ticks

HOURLY = FeedSpec(
    hours=3, events_per_hour=100_000, shards=4, records_per_chunk=25_000, blobs=50_000, gap_hours=(), seed=12
)
EVENTS_GROWTH, STATE_GROWTH = 20, 100
CDF_SMALL, CDF_BIG, CDF_CHANGES = 100_000, 10_000_000, 10_000


def _written(summary: dict) -> dict:
    return {
        "bytes": summary["eventsBytesWritten"] + summary["stateBytesWritten"],
        "stateFilesRewritten": summary["stateFilesRewritten"],
        "stateRowsCopied": summary["stateRowsCopied"],
        "commits": summary["commitsMade"],
    }


def grow(spark, small: Path, big: Path) -> dict:
    """``big`` = ``small`` plus synthetic rows: events of the same day in time order, blobs never seen."""
    from pyspark.sql import functions as F

    shutil.rmtree(big, ignore_errors=True)
    shutil.copytree(small, big)
    events = spark.read.format("delta").load(str(small / "events"))
    state = spark.read.format("delta").load(str(small / "state"))
    extra_events = events.count() * (EVENTS_GROWTH - 1)
    day = to_ticks(HOURLY.start.replace(hour=0, minute=0))
    step = (24 * 3600 * TICKS_PER_SECOND) // extra_events
    template = events.limit(1)
    grown = (
        template.crossJoin(spark.range(extra_events).withColumnRenamed("id", "n"))
        .withColumn("id", F.concat(F.lit("synthetic-"), F.col("n").cast("string")))
        .withColumn("eventTimeTicks", F.lit(day) + F.col("n") * F.lit(step))
        .withColumn("subject", F.concat(F.lit("/blobServices/default/containers/s/blobs/"), F.col("n") % 997))
        .drop("n")
        .select(*events.columns)
    )
    grown.repartitionByRange(40, "eventTimeTicks").write.format("delta").mode("append").save(str(big / "events"))
    extra_state = state.count() * (STATE_GROWTH - 1)
    (
        state.limit(1)
        .crossJoin(spark.range(extra_state).withColumnRenamed("id", "n"))
        .withColumn(
            "subject", F.concat(F.lit("/blobServices/default/containers/s/blobs/synthetic-"), F.col("n").cast("string"))
        )
        .drop("n")
        .select(*state.columns)
        .repartition(8)
        .write.format("delta")
        .mode("append")
        .save(str(big / "state"))
    )
    return {"events": events.count() + extra_events, "state": state.count() + extra_state}


def blob(spark) -> dict:
    root, _ = feed("feed_hourly_100k", HOURLY)
    first, window = HOURLY.start - HOUR, HOURLY.start + HOUR
    small = DATA / "scaling_small"
    shutil.rmtree(small, ignore_errors=True)
    print("filling the small targets with the hours before the measured window", flush=True)
    spark_submit(str(root), first, window, small)
    big = DATA / "scaling_big"
    sizes = {
        "small": {
            "events": spark.read.format("delta").load(str(small / "events")).count(),
            "state": spark.read.format("delta").load(str(small / "state")).count(),
        }
    }
    print("growing the big targets", flush=True)
    sizes["big"] = grow(spark, small, big)
    seconds: dict = {}
    runs: dict = {}
    for attempt in (1, 2):
        for label, prepared in (("small", small), ("big", big)):
            lake = DATA / f"scaling_run_{label}"
            shutil.rmtree(lake, ignore_errors=True)
            shutil.copytree(prepared, lake)
            with timed(seconds, f"blob_{label}_{attempt}"):
                runs[f"{label}_{attempt}"] = spark_submit(str(root), window, window + HOUR, lake)
    figures = {"targets": sizes}
    for label in ("small", "big"):
        best = min((1, 2), key=lambda a: seconds[f"blob_{label}_{a}"])
        summary = runs[f"{label}_{best}"]
        figures[label] = {
            "seconds": seconds[f"blob_{label}_{best}"],
            "eventsUnique": summary["eventsUnique"],
            "written": _written(summary),
            "stages": summary["seconds"],
        }
    lake = DATA / "scaling_run_big"
    with timed(seconds, "blob_replay_big"):
        replay = spark_submit(str(root), window, window + HOUR, lake)
    figures["replay_big"] = {"seconds": seconds["blob_replay_big"], "written": _written(replay)}
    figures["ratio_big_vs_small"] = round(figures["big"]["seconds"] / figures["small"]["seconds"], 2)
    return figures


def cdf(spark) -> dict:
    from lakefeed.cdf.job import full_refresh, run

    figures: dict = {}
    tables = {}
    for label, keys in (("small", CDF_SMALL), ("big", CDF_BIG)):
        source, target = DATA / f"scaling_cdf_{label}_source", DATA / f"scaling_cdf_{label}_target"
        for folder in (source, target):
            shutil.rmtree(folder, ignore_errors=True)
        print(f"building the {label} CDF source and target ({keys:,} keys)", flush=True)
        spark.sql(
            f"CREATE TABLE delta.`{source}` (id BIGINT, name STRING, amount BIGINT, touched INT) USING delta "
            "TBLPROPERTIES (delta.enableChangeDataFeed = true)"
        )
        (
            spark.range(keys)
            .selectExpr("id", "concat('name-', id) AS name", "id * 10 AS amount", "0 AS touched")
            .repartition(max(1, keys // 500_000))
            .write.format("delta")
            .mode("append")
            .save(str(source))
        )
        full_refresh(spark, str(source), str(target), ["id"])
        tables[label] = (source, target, keys)
    seconds: dict = {}
    summaries: dict = {}
    spread = {  # which keys a commit changes: 10k of them
        "spread": lambda keys, attempt: f"pmod(id, {keys // CDF_CHANGES}) = {attempt}",
        "recent": lambda keys, attempt: f"id >= {keys - 2 * CDF_CHANGES} AND pmod(id, 2) = {attempt % 2}",
    }
    for attempt in (1, 2, 3):
        for kind, where in spread.items():
            for label, (source, target, keys) in tables.items():
                spark.sql(
                    f"UPDATE delta.`{source}` SET amount = amount + {attempt}, touched = {attempt} "
                    f"WHERE {where(keys, attempt)}"
                )
                version = spark.sql(f"DESCRIBE HISTORY delta.`{source}`").collect()[0]["version"]
                with timed(seconds, f"cdf_{kind}_{label}_{attempt}"):
                    summaries[f"{kind}_{label}_{attempt}"] = run(
                        spark, str(source), str(target), ["id"], version, version
                    )
    for kind in spread:
        for label in tables:
            best = min((1, 2, 3), key=lambda a: seconds[f"cdf_{kind}_{label}_{a}"])
            s = summaries[f"{kind}_{label}_{best}"]
            figures[f"{kind}_{label}"] = {
                "targetRows": tables[label][2],
                "seconds": seconds[f"cdf_{kind}_{label}_{best}"],
                "keysChanged": s.keys_changed,
                "updated": s.updated,
                "written": {"bytes": s.bytes_written, "filesRewritten": s.files_rewritten, "rowsCopied": s.rows_copied},
            }
        figures[f"ratio_{kind}_big_vs_small"] = round(
            figures[f"{kind}_big"]["seconds"] / figures[f"{kind}_small"]["seconds"], 2
        )
    source, target, _ = tables["big"]
    version = spark.sql(f"DESCRIBE HISTORY delta.`{source}`").collect()[0]["version"]
    with timed(seconds, "cdf_replay_big"):
        replay = run(spark, str(source), str(target), ["id"], version, version)
    figures["replay_big"] = {
        "seconds": seconds["cdf_replay_big"],
        "committed": replay.committed,
        "written": {
            "bytes": replay.bytes_written,
            "filesRewritten": replay.files_rewritten,
            "rowsCopied": replay.rows_copied,
        },
    }
    return figures


def main(parts: list[str]) -> None:
    from common import RESULTS

    from lakefeed.spark import get_session

    unknown = set(parts) - {"blob", "cdf"}
    if unknown:
        raise SystemExit(f"unknown part(s) {sorted(unknown)}: blob, cdf")
    spark = get_session("bench-scaling", master="local[2]", extra={"spark.ui.enabled": "false"})
    spark.sparkContext.setLogLevel("ERROR")
    saved = json.loads(RESULTS.read_text()).get("scaling", {}) if RESULTS.exists() else {}
    figures = {part: saved[part] for part in ("blob", "cdf") if part in saved and part not in parts}
    for part, measure in (("blob", blob), ("cdf", cdf)):
        if part in parts:
            figures[part] = {**measure(spark), "measured": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")}
    spark.stop()
    save("scaling", figures)
    print(json.dumps(figures, indent=2))


if __name__ == "__main__":
    main(sys.argv[1:] or ["blob", "cdf"])
