"""Delta CDF: 1M changed rows over 100 source versions applied by our job (its planner picks a rebuild: the
range changed every key), versus a plain change-feed read + overwrite of the same data, measured side by
side in one Spark session.

    python bench/cdf_bench.py            # via `make bench`
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import DATA, save, timed

KEYS = 200_000
VERSIONS = 100
ROWS_PER_VERSION = 10_000


def main() -> None:
    from delta.tables import DeltaTable
    from lakefeed_testing.cdf_simulator import live_rows

    from lakefeed.cdf.job import run
    from lakefeed.documents import to_document
    from lakefeed.spark import get_session

    spark = get_session("bench-cdf", master="local[2]", extra={"spark.ui.enabled": "false"})
    spark.sparkContext.setLogLevel("ERROR")
    source, target, plain = DATA / "cdf_source", DATA / "cdf_target", DATA / "cdf_plain_copy"
    figures: dict = {}
    seconds: dict = {}
    first, last = 2, VERSIONS + 1
    ready = (
        source.exists()
        and DeltaTable.isDeltaTable(spark, str(source))
        and DeltaTable.forPath(spark, str(source)).history(1).collect()[0]["version"] == last
    )
    if not ready:
        shutil.rmtree(source, ignore_errors=True)
        print(f"building the source: {KEYS} keys, then {VERSIONS} commits of {ROWS_PER_VERSION} updates", flush=True)
        spark.sql(
            f"CREATE TABLE delta.`{source}` (id BIGINT, name STRING, amount BIGINT, touched INT) USING delta "
            "TBLPROPERTIES (delta.enableChangeDataFeed = true)"
        )  # v0
        spark.range(KEYS).selectExpr(
            "id", "concat('name-', id) AS name", "id * 10 AS amount", "0 AS touched"
        ).write.format("delta").mode("append").save(str(source))  # v1
        stripes = KEYS // ROWS_PER_VERSION
        for version in range(first, last + 1):  # v2..v101
            spark.sql(
                f"UPDATE delta.`{source}` SET amount = amount + {version}, touched = {version} "
                f"WHERE pmod(id, {stripes}) = {version % stripes}"
            )
    changes = (
        spark.read.format("delta")
        .option("readChangeFeed", "true")
        .option("startingVersion", first)
        .option("endingVersion", last)
        .load(str(source))
    )
    changes.where("_change_type != 'update_preimage'").write.format("noop").mode("overwrite").save()  # warm-up
    for attempt in range(1, 4):  # interleaved, best of 3 each: the same noise reaches both
        for folder in (target, plain):
            shutil.rmtree(folder, ignore_errors=True)
        run(spark, str(source), str(target), ["id"], 0, 1)  # the target holds the starting snapshot
        with timed(seconds, f"plain_read_and_overwrite_{attempt}"):
            changes.write.format("delta").mode("overwrite").save(str(plain))
        with timed(seconds, f"ours_apply_{attempt}"):
            summary = run(spark, str(source), str(target), ["id"], first, last)
    for name in ("plain_read_and_overwrite", "ours_apply"):
        seconds[name] = min(seconds.pop(f"{name}_{attempt}") for attempt in range(1, 4))
    same = live_rows(spark, str(target)).count() == KEYS
    # A rebuild reads the snapshot, not the change rows: the range's changed rows are the plan's, from metrics.
    changed = summary.plan.changed_rows if summary.plan and summary.plan.changed_rows is not None else summary.rows_read
    figures.update(
        {
            "versions": VERSIONS,
            "changedRows": changed,
            "keysChanged": summary.keys_changed,
            "updated": summary.updated,
            "plan": to_document(summary.plan) if summary.plan is not None else None,
            "seconds": seconds,
            "targetMatchesSourceRowCount": same,
            "ours_rows_per_s": round(changed / seconds["ours_apply"]),
            "ratios": {"ours_vs_plain_time": round(seconds["ours_apply"] / seconds["plain_read_and_overwrite"], 2)},
        }
    )
    spark.stop()
    save("cdf", figures)
    print(json.dumps(figures, indent=2))


if __name__ == "__main__":
    main()
