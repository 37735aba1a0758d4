"""The Delta CDF job with real Spark and real Delta: random commit sequences, replays, every error case."""

from __future__ import annotations

import json
import random
import subprocess
from pathlib import Path

import pytest
from lakefeed_testing.cdf_simulator import SourceSimulator, create_source, latest_version, live_rows

from lakefeed.cdf.job import full_refresh, run
from lakefeed.cdf.schedule import split_range
from lakefeed.errors import ChangeDataError

pytestmark = pytest.mark.integration
ROOT = Path(__file__).resolve().parents[2]


def rows_of(df):
    return sorted(tuple(r) for r in df.select("id", "name", "amount", "touched").collect())


def assert_target_equals_source(spark, source, target, version=None):
    reader = spark.read.format("delta")
    if version is not None:
        reader = reader.option("versionAsOf", version)
    assert rows_of(live_rows(spark, target)) == rows_of(reader.load(source))


@pytest.mark.parametrize("seed", [11, 23])
def test_random_commit_sequences_in_any_chunking_and_replay_order(spark, tmp_path, seed):
    source, target = str(tmp_path / "source"), str(tmp_path / "target")
    rng = random.Random(seed)
    create_source(spark, source, rows=30)
    simulator = SourceSimulator(spark, source, seed=seed, key_space=80)
    kinds = {simulator.commit() for _ in range(8)}
    assert {"update", "delete", "overwrite"} <= kinds | {simulator.commit(k) for k in ("update", "delete", "overwrite")}
    latest = latest_version(spark, source)
    ranges = split_range(0, latest, rng.randint(2, 5))
    for r in ranges:
        run(spark, source, target, ["id"], r.start, r.end)
    assert_target_equals_source(spark, source, target)

    before = rows_of(spark.read.format("delta").load(target))
    target_version = spark.sql(f"DESCRIBE HISTORY delta.`{target}`").collect()[0]["version"]
    for r in rng.sample(ranges, min(3, len(ranges))) + [split_range(0, latest, latest + 1)[0]]:
        summary = run(spark, source, target, ["id"], r.start, r.end)  # replays, in random order
        assert (summary.inserted, summary.updated, summary.deleted) == (0, 0, 0)
        # nothing written: the guard lets no row through and, with deletion vectors, Delta commits nothing
        assert (summary.committed, summary.bytes_written, summary.rows_copied) == (False, 0, 0)
    assert rows_of(spark.read.format("delta").load(target)) == before
    assert spark.sql(f"DESCRIBE HISTORY delta.`{target}`").collect()[0]["version"] == target_version


def test_newest_range_first_then_older_never_regresses_or_resurrects(spark, tmp_path):
    source, target = str(tmp_path / "source"), str(tmp_path / "target")
    create_source(spark, source, rows=10)  # v0 create, v1 ten rows
    spark.sql(f"UPDATE delta.`{source}` SET amount = -1, touched = 2 WHERE id = 3")  # v2
    spark.sql(f"DELETE FROM delta.`{source}` WHERE id = 4")  # v3
    spark.sql(f"UPDATE delta.`{source}` SET amount = -2, touched = 4 WHERE id = 3")  # v4
    newest = run(spark, source, target, ["id"], 3, 4)
    assert newest.deleted == 0 and newest.inserted == 1  # id 3 appears; id 4 is a tombstone for an unseen key
    run(spark, source, target, ["id"], 0, 2)  # older: must not regress id 3 nor resurrect id 4
    assert_target_equals_source(spark, source, target)


def test_counts_of_inserts_updates_deletes(spark, tmp_path):
    source, target = str(tmp_path / "source"), str(tmp_path / "target")
    create_source(spark, source, rows=10)
    first = run(spark, source, target, ["id"], 0, 1)
    assert (first.inserted, first.updated, first.deleted, first.keys_changed) == (10, 0, 0, 10)
    spark.sql(f"UPDATE delta.`{source}` SET amount = 0 WHERE id < 3")  # v2: 3 updates
    spark.sql(f"UPDATE delta.`{source}` SET amount = 1 WHERE id = 0")  # v3: key 0 twice in the range
    spark.sql(f"DELETE FROM delta.`{source}` WHERE id >= 8")  # v4: 2 deletes
    second = run(spark, source, target, ["id"], 2, 4)
    assert (second.inserted, second.updated, second.deleted, second.keys_changed) == (0, 3, 2, 5)
    assert second.rows_read == 6  # 4 post-images + 2 deletes; pre-images dropped
    history = spark.sql(f"DESCRIBE HISTORY delta.`{target}`").collect()
    metadata = json.loads(history[0]["userMetadata"])
    assert len(metadata.pop("commitToken")) == 32  # which job made the commit, among concurrent writers
    assert metadata == {"pipeline": "delta_cdf", "source": source, "startingVersion": 2, "endingVersion": 4}


def test_range_before_cdf_was_enabled_names_the_version_and_writes_nothing(spark, tmp_path):
    source, target = str(tmp_path / "source"), str(tmp_path / "target")
    create_source(spark, source, rows=5, cdf=False)  # v0, v1
    spark.sql(f"ALTER TABLE delta.`{source}` SET TBLPROPERTIES (delta.enableChangeDataFeed = true)")  # v2
    spark.sql(f"UPDATE delta.`{source}` SET amount = 0 WHERE id = 1")  # v3
    with pytest.raises(ChangeDataError, match="enabled at version 2"):
        run(spark, source, target, ["id"], 0, 3)
    assert not Path(target).exists()
    refreshed = full_refresh(spark, source, target, ["id"], version=1)
    assert refreshed.mode == "full-refresh" and refreshed.inserted == 5
    run(spark, source, target, ["id"], 2, 3)
    assert_target_equals_source(spark, source, target)


def test_vacuumed_change_data_points_to_full_refresh(spark, tmp_path):
    source, target = str(tmp_path / "source"), str(tmp_path / "target")
    create_source(spark, source, rows=20)
    spark.sql(f"UPDATE delta.`{source}` SET amount = 0 WHERE id < 5")  # v2 writes _change_data files
    spark.sql(f"DELETE FROM delta.`{source}` WHERE id > 15")  # v3
    spark.conf.set("spark.databricks.delta.retentionDurationCheck.enabled", "false")
    try:
        spark.sql(f"VACUUM delta.`{source}` RETAIN 0 HOURS")
    finally:
        spark.conf.set("spark.databricks.delta.retentionDurationCheck.enabled", "true")
    with pytest.raises(ChangeDataError, match="removed by VACUUM.*full refresh"):
        run(spark, source, target, ["id"], 2, 3)
    full_refresh(spark, source, target, ["id"])
    assert_target_equals_source(spark, source, target)
    assert run(spark, source, target, ["id"], 0, 3).keys_changed == 0  # ranges inside the snapshot are no-ops


def test_starting_version_beyond_latest(spark, tmp_path):
    source = str(tmp_path / "source")
    create_source(spark, source, rows=3)
    with pytest.raises(ChangeDataError, match="starting version 7 is beyond the latest version 1"):
        run(spark, source, str(tmp_path / "target"), ["id"], 7, 9)


def test_additive_schema_change_flows_and_non_additive_is_refused(spark, tmp_path):
    source, target = str(tmp_path / "source"), str(tmp_path / "target")
    create_source(spark, source, rows=5)
    run(spark, source, target, ["id"], 0, 1)
    spark.sql(f"ALTER TABLE delta.`{source}` ADD COLUMNS (score DOUBLE)")  # v2
    spark.sql(f"UPDATE delta.`{source}` SET score = 0.5 WHERE id = 2")  # v3
    summary = run(spark, source, target, ["id"], 2, 3)
    assert summary.added_columns == ["score"]
    scores = {r["id"]: r["score"] for r in live_rows(spark, target).collect()}
    assert scores[2] == 0.5 and scores[1] is None

    narrower = spark.read.format("delta").load(source).drop("score", "touched")
    narrower.write.format("delta").mode("overwrite").option("overwriteSchema", "true").save(source)  # v4
    with pytest.raises(ChangeDataError, match=r"version 4 .* non-additively \(removed: score, touched"):
        run(spark, source, target, ["id"], 3, 4)
    # One version per job: the change is the range's first commit (before: accepted, then MERGE failed).
    with pytest.raises(ChangeDataError, match=r"version 4 .* non-additively \(removed: score, touched"):
        run(spark, source, target, ["id"], 4, 4)
    spark.sql(f"UPDATE delta.`{source}` SET amount = 1 WHERE id = 3")  # v5
    # A range after the change passes the log check; the target still has the dropped columns.
    with pytest.raises(
        ChangeDataError,
        match=r"target .* does not match source .* missing from the source: "
        r"score, touched.*full refresh",
    ):
        run(spark, source, target, ["id"], 5, 5)
    full_refresh(spark, source, target, ["id"])
    assert sorted(r["amount"] for r in live_rows(spark, target).where("id = 3").collect()) == [1]


def _cdf_submit(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["spark-submit", str(ROOT / "spark_jobs" / "delta_cdf_job.py"), *args],
        capture_output=True,
        text=True,
        timeout=600,
    )


def test_spark_submit_contract(spark, tmp_path):
    source, target = str(tmp_path / "source"), str(tmp_path / "target")
    create_source(spark, source, rows=8)
    spark.sql(f"DELETE FROM delta.`{source}` WHERE id = 0")
    refused = _cdf_submit(
        "--source-table",
        source,
        "--target-table",
        target,
        "--keys",
        "id",
        "--starting-version",
        "5",
        "--ending-version",
        "6",
    )
    assert refused.returncode == 2 and "starting version 5 is beyond the latest version 2" in refused.stdout
    summary_file = tmp_path / "summary.json"
    done = _cdf_submit(
        "--source-table",
        source,
        "--target-table",
        target,
        "--keys",
        "id",
        "--starting-version",
        "0",
        "--ending-version",
        "2",
        "--summary-json",
        str(summary_file),
    )
    assert done.returncode == 0, done.stdout[-3000:]
    summary = json.loads(summary_file.read_text())
    assert (summary["inserted"], summary["endingVersion"]) == (7, 2)
    assert_target_equals_source(spark, source, target)


def test_two_jobs_applying_overlapping_ranges_at_once_both_commit(spark, tmp_path):
    """A backfill beside a scheduled run: the version-guarded MERGE is idempotent, so Delta's write
    conflicts are retried inside each job; both exit 0 and the target equals the source."""
    source, target = str(tmp_path / "source"), str(tmp_path / "target")
    create_source(spark, source, rows=40)
    simulator = SourceSimulator(spark, source, seed=31, key_space=80)
    for kind in ("update", "delete", "merge", "reinsert", "update", "overwrite"):
        simulator.commit(kind)
    latest = latest_version(spark, source)
    run(spark, source, target, ["id"], 0, 1)  # the target exists: both jobs MERGE, neither creates
    args = ["--source-table", source, "--target-table", target, "--keys", "id"]
    jobs = [
        subprocess.Popen(
            [
                "spark-submit",
                str(ROOT / "spark_jobs" / "delta_cdf_job.py"),
                *args,
                "--starting-version",
                str(start),
                "--ending-version",
                str(latest),
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        for start in (0, 2)
    ]
    outputs = [job.communicate(timeout=600)[0] for job in jobs]
    assert [job.returncode for job in jobs] == [0, 0], outputs[0][-3000:] + outputs[1][-3000:]
    assert_target_equals_source(spark, source, target)
    print(f"conflicting commits retried: {sum(o.count('a concurrent writer committed first') for o in outputs)}")


def test_full_refresh_is_one_commit_holding_rows_and_base_version(spark, tmp_path):
    """Before: an overwrite, then ALTER TABLE … SET TBLPROPERTIES; a kill between them left the base
    version stale."""
    from delta.tables import DeltaTable

    source, target = str(tmp_path / "source"), str(tmp_path / "target")
    create_source(spark, source, rows=5)  # v0, v1
    run(spark, source, target, ["id"], 0, 1)
    spark.sql(f"ALTER TABLE delta.`{target}` SET TBLPROPERTIES ('owner.team' = 'it''s ours')")
    before = DeltaTable.forPath(spark, target).history(1).collect()[0]["version"]
    spark.sql(f"UPDATE delta.`{source}` SET amount = 7 WHERE id = 2")  # v2
    summary = full_refresh(spark, source, target, ["id"], version=2)
    history = DeltaTable.forPath(spark, target).history().where(f"version > {before}").collect()
    assert len(history) == 1 and summary.target_version == before + 1
    assert json.loads(history[0]["userMetadata"])["fullRefreshVersion"] == 2
    properties = {r["key"]: r["value"] for r in spark.sql(f"SHOW TBLPROPERTIES delta.`{target}`").collect()}
    assert properties["lakefeed.cdf.baseVersion"] == "2" and properties["owner.team"] == "it's ours"
    assert properties["delta.enableDeletionVectors"] == "true"
    assert_target_equals_source(spark, source, target)
    assert run(spark, source, target, ["id"], 1, 2).keys_changed == 0


def test_changed_keys_named_in_the_merge_condition_match_exactly(spark, tmp_path):
    """A few changed keys spread over a larger target are named in the MERGE condition (so Spark joins only
    the target rows holding them): text keys with quotes, backslashes and accents, and a null key, still
    match exactly the rows they did."""
    source, target = str(tmp_path / "source"), str(tmp_path / "target")
    odd = ["it's", "back\\slash", "ünïcode ✓", "quote'\\'mix", "\\u0041"]
    spark.sql(
        f"CREATE TABLE delta.`{source}` (code STRING, amount BIGINT) USING delta "
        "TBLPROPERTIES (delta.enableChangeDataFeed = true)"
    )
    rows = [(f"k{n:05d}", n) for n in range(30_000)] + [(code, -1) for code in odd] + [(None, -2)]
    spark.createDataFrame(rows, "code string, amount bigint").write.format("delta").mode("append").save(source)
    run(spark, source, target, ["code"], 0, 1)
    spark.sql(f"UPDATE delta.`{source}` SET amount = amount + 100 WHERE code IS NULL OR amount < 0 OR code = 'k29999'")
    spark.sql(f"DELETE FROM delta.`{source}` WHERE code IN ('k00000', 'it''s')")
    spark.sql(f"INSERT INTO delta.`{source}` VALUES ('k00000', 7), ('zz', 8)")
    summary = run(spark, source, target, ["code"], 2, latest_version(spark, source))
    predicate = spark.sql(f"DESCRIBE HISTORY delta.`{target}`").collect()[0]["operationParameters"]["predicate"]
    assert " IN (" in predicate and "isnull(" in predicate  # the keys were named, and null
    assert (summary.inserted, summary.updated, summary.deleted) == (1, 7, 1)  # k00000 deleted, back: updated
    expected = sorted(map(tuple, spark.read.format("delta").load(source).collect()), key=repr)
    assert sorted(map(tuple, live_rows(spark, target).select("code", "amount").collect()), key=repr) == expected
