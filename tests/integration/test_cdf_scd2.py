"""SCD type 2 targets of the Delta CDF job with real Spark and real Delta: random commit histories applied
in random chunks and replayed equal the history computed independently from the source's snapshots; out of
order ranges, gaps, a second full refresh and mixed SCD types are refused with nothing written."""

from __future__ import annotations

import json
import random
import subprocess
from pathlib import Path

import pytest
from lakefeed_testing.cdf_simulator import SourceSimulator, create_source, history_from_snapshots, latest_version

from lakefeed.cdf.job import full_refresh, run
from lakefeed.cdf.scd2 import END_AT, HISTORY_FROM, HISTORY_THROUGH, START_AT
from lakefeed.cdf.schedule import split_range
from lakefeed.errors import ChangeDataError, FeedConfigError

pytestmark = pytest.mark.integration
ROOT = Path(__file__).resolve().parents[2]
ALL = ["name", "amount", "touched"]
KINDS = ("append", "update", "delete", "reinsert", "merge", "overwrite", "touch", "noop")


def history_of(spark, target, columns=ALL) -> list[tuple]:
    rows = spark.read.format("delta").load(target).select("id", *columns, START_AT, END_AT).collect()
    return sorted((tuple(r) for r in rows), key=repr)


def target_version(spark, target) -> int:
    return spark.sql(f"DESCRIBE HISTORY delta.`{target}`").collect()[0]["version"]


def properties(spark, target) -> dict:
    return {r["key"]: r["value"] for r in spark.sql(f"SHOW TBLPROPERTIES delta.`{target}`").collect()}


@pytest.mark.parametrize("seed, columns", [(5, ["name", "amount"])])
def test_random_histories_in_random_chunks_with_replays_equal_the_snapshots_history(spark, tmp_path, seed, columns):
    """``touched`` is left out: an UPDATE that changes only it (``touch``) adds no row, nor does one that changes
    nothing (``noop``); the other tests of this file keep every column."""
    source, target = str(tmp_path / "source"), str(tmp_path / "target")
    rng = random.Random(seed)
    create_source(spark, source, rows=20)
    simulator = SourceSimulator(spark, source, seed=seed, key_space=50, kinds=KINDS)
    kinds = [simulator.commit() for _ in range(7)] + [simulator.commit(k) for k in ("noop", "touch", "overwrite")]
    assert {"noop", "touch", "overwrite"} <= set(kinds)
    latest = latest_version(spark, source)
    ranges = split_range(0, latest, rng.randint(2, 4))
    wanted = ["id", *columns] if columns != ALL else None
    for r in ranges:
        run(spark, source, target, ["id"], r.start, r.end, wanted, scd_type=2)
    expected = history_from_snapshots(spark, source, columns, 0, latest)
    assert history_of(spark, target, columns) == expected
    assert any(row[-1] is not None for row in expected) and len(expected) > 20  # rows ended, history kept
    assert properties(spark, target)[HISTORY_FROM] == "0" and properties(spark, target)[HISTORY_THROUGH] == str(latest)

    # Replays of applied ranges, any of them, in any order, read and write nothing.
    version = target_version(spark, target)
    for r in rng.sample(ranges, min(2, len(ranges))) + [split_range(0, latest, latest + 1)[0]]:
        summary = run(spark, source, target, ["id"], r.start, r.end, wanted, scd_type=2)
        assert (summary.committed, summary.commits, summary.rows_read) == (False, [], 0)
    assert target_version(spark, target) == version

    # More commits, then a range overlapping the applied one: only the new versions are applied.
    for _ in range(3):
        simulator.commit()
    newest = latest_version(spark, source)
    summary = run(spark, source, target, ["id"], latest - 1, newest, wanted, scd_type=2)
    assert summary.scd_type == 2
    assert history_of(spark, target, columns) == history_from_snapshots(spark, source, columns, 0, newest)


def test_a_run_killed_after_its_merge_is_re_applied_without_adding_anything_twice(spark, tmp_path):
    """The MERGE landed, the metadata commit recording the version did not: the re-run finds each key's
    changes already in its history and adds nothing, then records the version."""
    source, target = str(tmp_path / "source"), str(tmp_path / "target")
    create_source(spark, source, rows=15)
    simulator = SourceSimulator(spark, source, seed=8, key_space=40, kinds=KINDS)
    run(spark, source, target, ["id"], 0, latest_version(spark, source), scd_type=2)
    middle = latest_version(spark, source)
    for kind in ("update", "delete", "reinsert", "touch", "noop", "merge"):
        simulator.commit(kind)
    latest = latest_version(spark, source)
    run(spark, source, target, ["id"], middle + 1, latest, scd_type=2)
    after = history_of(spark, target)
    spark.sql(f"ALTER TABLE delta.`{target}` SET TBLPROPERTIES ('{HISTORY_THROUGH}' = '{middle}')")  # the kill

    summary = run(spark, source, target, ["id"], middle + 1, latest, scd_type=2)
    assert (summary.inserted, summary.updated, summary.deleted, summary.committed) == (0, 0, 0, False)
    assert summary.unchanged == summary.rows_read > 0
    assert history_of(spark, target) == after == history_from_snapshots(spark, source, ALL, 0, latest)
    assert properties(spark, target)[HISTORY_THROUGH] == str(latest)


def test_counts_an_unchanged_update_a_delete_and_a_re_insert(spark, tmp_path):
    source, target = str(tmp_path / "source"), str(tmp_path / "target")
    create_source(spark, source, rows=4)  # v0 create, v1 four rows
    run(spark, source, target, ["id"], 0, 1, scd_type=2)
    spark.sql(f"UPDATE delta.`{source}` SET amount = amount WHERE id = 1")  # v2: changes nothing
    spark.sql(f"UPDATE delta.`{source}` SET amount = 7 WHERE id = 2")  # v3
    spark.sql(f"DELETE FROM delta.`{source}` WHERE id = 3")  # v4
    spark.sql(f"INSERT INTO delta.`{source}` VALUES (3, 'back', 30, 5)")  # v5
    summary = run(spark, source, target, ["id"], 2, 5, scd_type=2)
    assert (summary.inserted, summary.updated, summary.deleted, summary.unchanged) == (1, 1, 1, 1)
    history = {(r[0], r[-2]): r[-1] for r in history_of(spark, target)}
    assert history == {(0, 1): None, (1, 1): None, (2, 1): 3, (2, 3): None, (3, 1): 4, (3, 5): None}


def test_a_two_column_key_with_nulls_and_a_source_column_named_like_a_working_column(spark, tmp_path):
    """Keys (region, id) with a null region are told apart null-safely; ``_deleted`` and ``_rank`` are the
    source's own columns (a soft-delete flag, say), kept as data."""
    source, target = str(tmp_path / "source"), str(tmp_path / "target")
    spark.sql(
        f"CREATE TABLE delta.`{source}` (region STRING, id BIGINT, name STRING, _deleted BOOLEAN, _rank INT) "
        "USING delta TBLPROPERTIES (delta.enableChangeDataFeed = true)"
    )  # v0
    spark.sql(f"INSERT INTO delta.`{source}` VALUES ('eu', 1, 'a', false, 1), (NULL, 1, 'b', false, 1)")  # v1
    spark.sql(f"UPDATE delta.`{source}` SET name = 'b2' WHERE region IS NULL")  # v2: only the null-region key
    spark.sql(f"UPDATE delta.`{source}` SET _deleted = true WHERE region = 'eu'")  # v3: a soft delete is a change
    spark.sql(f"DELETE FROM delta.`{source}` WHERE region IS NULL")  # v4
    run(spark, source, target, ["region", "id"], 0, 2, scd_type=2)
    run(spark, source, target, ["region", "id"], 3, 4, scd_type=2)
    rows = spark.read.format("delta").load(target).select("region", "id", "name", "_deleted", START_AT, END_AT)
    assert sorted((tuple(r) for r in rows.collect()), key=repr) == sorted(
        [
            ("eu", 1, "a", False, 1, 3),
            ("eu", 1, "a", True, 3, None),
            (None, 1, "b", False, 1, 2),
            (None, 1, "b2", False, 2, 4),
        ],
        key=repr,
    )


def test_out_of_order_ranges_and_gaps_are_refused_with_nothing_written(spark, tmp_path):
    source, target = str(tmp_path / "source"), str(tmp_path / "target")
    create_source(spark, source, rows=10)
    simulator = SourceSimulator(spark, source, seed=3, key_space=30)
    for kind in ("update", "delete", "update", "reinsert", "update", "merge"):
        simulator.commit(kind)
    run(spark, source, target, ["id"], 3, 5, scd_type=2)  # a history that starts at version 3
    version, history = target_version(spark, target), history_of(spark, target)
    with pytest.raises(
        ChangeDataError, match=r"versions 0\.\.2 are older than the history .* starts at source version 3"
    ):
        run(spark, source, target, ["id"], 0, 2, scd_type=2)
    with pytest.raises(ChangeDataError, match=r"would leave source versions 6\.\.6 out of the history"):
        run(spark, source, target, ["id"], 7, 7, scd_type=2)
    with pytest.raises(ChangeDataError, match="SCD type 2 target .* this run writes SCD type 1"):
        run(spark, source, target, ["id"], 6, 7)
    with pytest.raises(ChangeDataError, match="already holds a history, which a full refresh would replace"):
        full_refresh(spark, source, target, ["id"], scd_type=2)
    with pytest.raises(ChangeDataError, match="SCD type 2 target .* this run writes SCD type 1"):
        full_refresh(spark, source, target, ["id"])
    assert (target_version(spark, target), history_of(spark, target)) == (version, history)

    other = str(tmp_path / "type1")
    run(spark, source, other, ["id"], 0, 2)
    with pytest.raises(ChangeDataError, match="SCD type 1 target .* this run writes SCD type 2"):
        run(spark, source, other, ["id"], 3, 4, scd_type=2)


def test_a_first_full_refresh_starts_the_history_at_its_snapshot(spark, tmp_path):
    source, target = str(tmp_path / "source"), str(tmp_path / "target")
    create_source(spark, source, rows=10)
    simulator = SourceSimulator(spark, source, seed=4, key_space=30, kinds=KINDS)
    for _ in range(4):
        simulator.commit()
    at = latest_version(spark, source)
    summary = full_refresh(spark, source, target, ["id"], scd_type=2)
    assert (summary.scd_type, len(summary.commits)) == (2, 1)
    assert properties(spark, target)[HISTORY_FROM] == properties(spark, target)[HISTORY_THROUGH] == str(at)
    for _ in range(5):
        simulator.commit()
    latest = latest_version(spark, source)
    older = run(spark, source, target, ["id"], 0, at - 1, scd_type=2)  # in the snapshot: nothing to read
    assert (older.rows_read, older.commits) == (0, [])
    run(spark, source, target, ["id"], 0, latest, scd_type=2)  # overlaps the snapshot: applies at+1.. only
    assert history_of(spark, target) == history_from_snapshots(spark, source, ALL, at, latest)


def test_map_columns_are_refused_by_name(spark, tmp_path):
    source, target = str(tmp_path / "source"), str(tmp_path / "target")
    spark.sql(
        f"CREATE TABLE delta.`{source}` (id BIGINT, tags MAP<STRING, STRING>, name STRING) USING delta "
        "TBLPROPERTIES (delta.enableChangeDataFeed = true)"
    )
    spark.sql(f"INSERT INTO delta.`{source}` VALUES (1, map('a', 'b'), 'x')")
    with pytest.raises(FeedConfigError, match="column\\(s\\) tags hold maps"):
        run(spark, source, target, ["id"], 0, 1, scd_type=2)
    run(spark, source, target, ["id"], 0, 1, ["id", "name"], scd_type=2)
    assert [tuple(r) for r in spark.read.format("delta").load(target).collect()] == [(1, "x", 1, None)]
    # A map column in a type 1 target (the tie-break of the last change per key hashes it as JSON).
    run(spark, source, str(tmp_path / "type1"), ["id"], 0, 1)
    assert [r["tags"] for r in spark.read.format("delta").load(str(tmp_path / "type1")).collect()] == [{"a": "b"}]


def test_spark_submit_contract_scd_type_2(spark, tmp_path):
    source, target = str(tmp_path / "source"), str(tmp_path / "target")
    create_source(spark, source, rows=5)
    spark.sql(f"UPDATE delta.`{source}` SET name = 'changed' WHERE id = 2")
    summary_file = tmp_path / "summary.json"
    args = ["--source-table", source, "--target-table", target, "--keys", "id", "--summary-json", str(summary_file)]
    done = subprocess.run(
        [
            "spark-submit",
            str(ROOT / "spark_jobs" / "delta_cdf_job.py"),
            *args,
            "--scd-type",
            "2",
            "--starting-version",
            "0",
            "--ending-version",
            "2",
        ],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    summary = json.loads(summary_file.read_text())
    assert (summary["scdType"], summary["inserted"], summary["updated"]) == (2, 5, 1)
    assert history_of(spark, target) == history_from_snapshots(spark, source, ALL, 0, 2)

    refused = subprocess.run(
        ["spark-submit", str(ROOT / "spark_jobs" / "delta_cdf_job.py"), *args, "--scd-type", "2", "--full-refresh"],
        capture_output=True,
        text=True,
    )
    assert refused.returncode == 2, refused.stderr[-3000:]
    reason = json.loads((tmp_path / "summary.refused.json").read_text())["error"]
    assert "already holds a history" in reason
