"""Schema rules by range (issue 20), with real Spark and real Delta: ranges across additive column changes
apply in any chunking and order; drops, renames and type changes inside, before or after a range are
refused by name, with nothing written.

Spark reads a batch change feed range with the source's *latest* schema, so a target made from an old
range already has the columns added later; the target check must not call them drops.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from lakefeed_testing.cdf_simulator import create_source, latest_version, live_rows

from lakefeed.cdf.job import full_refresh, run
from lakefeed.errors import ChangeDataError

pytestmark = pytest.mark.integration

COLUMNS = ("id", "name", "amount", "touched", "note", "score")


@pytest.fixture(scope="module")
def source(spark, tmp_path_factory) -> str:
    """Two additive changes: ``note`` added at version 3, ``score`` at version 7 (read-only for the tests)."""
    path = str(tmp_path_factory.mktemp("schema_ranges") / "source")
    create_source(spark, path, rows=10)  # v0 create, v1 ids 0-9
    table = f"delta.`{path}`"
    for statement in (
        f"UPDATE {table} SET amount = -2, touched = 2 WHERE id IN (1, 2)",  # v2
        f"ALTER TABLE {table} ADD COLUMNS (note STRING)",  # v3
        f"UPDATE {table} SET note = 'n4', touched = 4 WHERE id IN (1, 3)",  # v4
        f"DELETE FROM {table} WHERE id = 3",  # v5: had a note
        f"INSERT INTO {table} VALUES (20, 'name-20', 200, 6, 'n6')",  # v6
        f"ALTER TABLE {table} ADD COLUMNS (score DOUBLE)",  # v7
        f"UPDATE {table} SET score = 0.5, touched = 8 WHERE id IN (2, 20)",  # v8
    ):
        spark.sql(statement)
    assert latest_version(spark, path) == 8
    return path


def rows_by_key(df) -> list[tuple]:
    return sorted((tuple(r) for r in df.select(*COLUMNS).collect()), key=lambda row: row[0])


def assert_target_is_latest_snapshot(spark, source: str, target: str) -> None:
    expected = rows_by_key(spark.read.format("delta").load(source))
    live = rows_by_key(live_rows(spark, target))
    assert live == expected
    notes = {row[0]: row[4] for row in live}
    assert notes[1] == "n4" and notes[20] == "n6" and notes[0] is None and 3 not in notes  # null: never set


def _target_version(spark, target: str) -> int:
    return spark.sql(f"DESCRIBE HISTORY delta.`{target}`").collect()[0]["version"]


@pytest.mark.parametrize(
    "chunks",
    [
        pytest.param([(3, 8), (0, 2)], id="newer-first-note-at-first-score-in-middle"),
        pytest.param([(0, 3), (4, 6), (7, 8)], id="older-first-note-at-last-score-at-first"),
    ],
)
def test_ranges_across_additive_changes_apply_in_any_chunking_and_order(spark, source, tmp_path, chunks):
    """Before: the first range older than an additive change applied after a newer one (or into a target
    created by one) was refused with "column(s) missing from the source: note"."""
    target = str(tmp_path / "target")
    for start, end in chunks:
        run(spark, source, target, ["id"], start, end)
    assert_target_is_latest_snapshot(spark, source, target)


def test_replays_across_additive_changes_and_after_a_full_refresh_change_nothing(spark, source, tmp_path):
    target = str(tmp_path / "target")
    run(spark, source, target, ["id"], 0, 8)
    assert_target_is_latest_snapshot(spark, source, target)
    before, version = rows_by_key(spark.read.format("delta").load(target)), _target_version(spark, target)
    for start, end in [(0, 2), (3, 3), (2, 8)]:
        summary = run(spark, source, target, ["id"], start, end)
        assert (summary.inserted, summary.updated, summary.deleted, summary.committed) == (0, 0, 0, False)
    assert rows_by_key(spark.read.format("delta").load(target)) == before
    assert _target_version(spark, target) == version

    full_refresh(spark, source, target, ["id"], version=8)
    for start, end in [(0, 2), (2, 5)]:  # inside the snapshot: no-ops, not refusals
        assert run(spark, source, target, ["id"], start, end).keys_changed == 0
    assert_target_is_latest_snapshot(spark, source, target)


def test_drops_renames_and_type_changes_inside_before_or_after_a_range_are_refused_by_name(spark, tmp_path):
    """Before: a range older than a drop, rename or type change failed inside Spark with Delta's
    DELTA_CHANGE_DATA_FEED_INCOMPATIBLE_DATA_SCHEMA (a stack trace, exit code 1, retried)."""
    source, target, fresh = str(tmp_path / "source"), str(tmp_path / "target"), str(tmp_path / "fresh")
    table = f"delta.`{source}`"
    create_source(spark, source, rows=6)  # v0, v1
    spark.sql(f"ALTER TABLE {table} ADD COLUMNS (note STRING)")  # v2
    spark.sql(f"UPDATE {table} SET note = 'n3' WHERE id = 1")  # v3
    run(spark, source, target, ["id"], 0, 3)
    applied = _target_version(spark, target)
    snapshot = spark.read.format("delta").load(source)
    (
        snapshot.withColumn("amount", snapshot["amount"].cast("string"))
        .write.format("delta")
        .mode("overwrite")
        .option("overwriteSchema", "true")
        .save(source)
    )  # v4: amount long → string
    spark.sql(f"UPDATE {table} SET note = 'n5' WHERE id = 2")  # v5
    (
        spark.read.format("delta")
        .load(source)
        .withColumnRenamed("touched", "touched_at")
        .write.format("delta")
        .mode("overwrite")
        .option("overwriteSchema", "true")
        .save(source)
    )  # v6: touched renamed
    spark.sql(f"UPDATE {table} SET note = 'n7' WHERE id = 3")  # v7

    hint = r".*full refresh"
    refusals = [
        # after the range: Spark would read it with the latest schema, which lacks or retypes its columns
        (
            target,
            0,
            3,
            r"range \[0, 3\] of .*latest schema.*\(removed: touched; type changed: amount\), "
            r"first at version 4",
        ),
        (fresh, 0, 2, r"range \[0, 2\] of .*\(removed: touched; type changed: amount\), first at version 4"),
        (fresh, 5, 5, r"range \[5, 5\] of .*\(removed: touched; type changed: -\), first at version 6"),
        # inside the range, its first version included
        (target, 3, 4, r"version 4 of .* non-additively \(removed: -; type changed: amount\)"),
        (fresh, 6, 6, r"version 6 of .* non-additively \(removed: touched; type changed: -\)"),
        # before the range: the target still has the old column or type
        (target, 5, 5, r"does not match source .*missing from the source: -; type differs: amount"),
        (target, 7, 7, r"does not match source .*missing from the source: touched; type differs: amount"),
    ]
    for into, start, end, message in refusals:
        with pytest.raises(ChangeDataError, match=message + hint):
            run(spark, source, into, ["id"], start, end)
    assert _target_version(spark, target) == applied and not Path(fresh).exists()  # nothing written

    full_refresh(spark, source, target, ["id"])  # what the messages say
    for start, end in [(0, 3), (5, 5), (7, 7)]:  # then no-ops, not refusals
        assert run(spark, source, target, ["id"], start, end).keys_changed == 0
