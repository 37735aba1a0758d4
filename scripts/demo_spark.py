"""The demo's Spark-side helpers, run by scripts/demo.py as child processes so that Ivy's resolution
report and Spark's start-up chatter go to the demo's log files, not the screen.

    python scripts/demo_spark.py make-cdf-source <data dir>          # prints {"latestVersion": N}
    python scripts/demo_spark.py check <data dir> <expected.json>    # prints {"check": bool, ...}
"""

from __future__ import annotations

import json
import sys
from pathlib import Path


def session():
    from lakefeed.spark import get_session

    spark = get_session("lakefeed-demo", extra={"spark.ui.enabled": "false"})
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def make_cdf_source(data: Path) -> dict:
    """A source table with change data feed on: inserts, one key updated three times, deletes, and an
    overwrite of a slice (versions 0..6)."""
    from lakefeed_testing.cdf_simulator import create_source, latest_version

    spark = session()
    source = data / "cdf" / "source"
    table = f"delta.`{source}`"
    create_source(spark, str(source), rows=12)  # v0 create, v1 12 rows
    spark.sql(f"UPDATE {table} SET amount = amount + 1, touched = 2 WHERE id IN (1, 2, 3)")
    spark.sql(f"UPDATE {table} SET amount = amount + 1, touched = 3 WHERE id = 1")  # key 1 again
    spark.sql(f"DELETE FROM {table} WHERE id IN (4, 5)")
    spark.sql(f"UPDATE {table} SET amount = 999, touched = 5 WHERE id = 1")  # and again
    (
        spark.createDataFrame(
            [(9, "replaced-9", 90, 6), (20, "new-20", 200, 6)], "id BIGINT, name STRING, amount BIGINT, touched INT"
        )
        .write.format("delta")
        .mode("overwrite")
        .option("replaceWhere", "id >= 9")
        .save(str(source))
    )
    return {"latestVersion": latest_version(spark, str(source))}


def check(data: Path, expected: dict) -> dict:
    """Every target against the ground truth the demo generated (tables read by Spark: deletion vectors)."""
    from lakefeed_testing.cdf_simulator import live_rows

    spark = session()
    lake = data / "lake"
    read = spark.read.format("delta")
    events = {r["id"] for r in read.load(str(lake / "blob_events")).select("id").collect()}
    state = {r["subject"]: r["eventId"] for r in read.load(str(lake / "blob_state")).collect()}
    cdf_target = sorted(map(tuple, live_rows(spark, str(data / "cdf" / "target")).collect()))
    cdf_source = sorted(map(tuple, read.load(str(data / "cdf" / "source")).collect()))
    crdb = {
        topic: {
            r["_crdb_key"]
            for r in read.load(str(lake / "crdb" / topic)).where("NOT _crdb_deleted").select("_crdb_key").collect()
        }
        == set(keys)
        for topic, keys in expected["crdb"].items()
    }
    figures = {
        "blob events": events == set(expected["events"]),
        "blob state": state == expected["state"],
        "cdf target": cdf_target == cdf_source,
        **{f"crdb {topic}": same for topic, same in crdb.items()},
    }
    return {"check": all(figures.values()), "figures": figures}


def main(argv: list[str]) -> int:
    command, data = argv[0], Path(argv[1])
    if command == "make-cdf-source":
        result = make_cdf_source(data)
    elif command == "check":
        result = check(data, json.loads(Path(argv[2]).read_text()))
    else:
        raise SystemExit(f"unknown command {command!r}")
    print("RESULT " + json.dumps(result), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
