"""Schema rules by range (issue 20), JVM-free: the target check against the source as of the range's end and
its latest schema, and ranges whose columns a later version dropped, renamed, retyped or made NOT NULL."""

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake
from deltalake.schema import Field

from lakefeed.cdf.log import check_later_changes, check_range, check_target, latest_schema, schema_change
from lakefeed.deltalog import DeltaLog
from lakefeed.errors import ChangeDataError
from lakefeed.storage import Store

CDF_ON = {"delta.enableChangeDataFeed": "true"}
OWN = ("_cdf_version",)


def field(name: str, kind: str = "string", nullable: bool = True) -> dict:
    return {"name": name, "type": kind, "nullable": nullable, "metadata": {}}


AT_END = [field("id", "long"), field("name")]  # the source as of the range's end
LATEST = AT_END + [field("note"), field("score", "double")]  # note, score added later
TARGET = LATEST + [field("_cdf_version", "long")]


def test_columns_added_after_the_range_are_accepted():
    """Before: "column(s) missing from the source: note, score" for every range older than the change."""
    check_target("src", "tgt", AT_END, TARGET, OWN, LATEST)
    check_target("src", "tgt", LATEST, TARGET, OWN, LATEST)  # a range after the change
    check_target("src", "tgt", AT_END, AT_END + [field("_cdf_version", "long")], OWN, LATEST)  # target older
    with pytest.raises(ChangeDataError, match="missing from the source: note, score"):
        check_target("src", "tgt", AT_END, TARGET, OWN)  # no latest schema: as before


def test_a_column_in_neither_schema_was_dropped_or_renamed_and_is_refused():
    target = TARGET + [field("touched", "integer")]
    with pytest.raises(ChangeDataError, match=r"missing from the source: touched; type differs: -\..*full refresh"):
        check_target("src", "tgt", AT_END, target, OWN, LATEST)
    renamed = [field("id", "long"), field("full_name"), field("note"), field("score", "double")]
    with pytest.raises(ChangeDataError, match=r"missing from the source: name; type differs: -"):
        check_target("src", "tgt", renamed, TARGET, OWN, renamed)  # renamed before the range
    check_target("src", "tgt", AT_END, TARGET, OWN, renamed)  # after it: the range has it (check_later_changes)


def test_type_differences_are_refused_against_the_range_then_the_latest_schema():
    with pytest.raises(ChangeDataError, match=r"type differs: score \(double in the target, string in the source\)"):
        check_target("src", "tgt", AT_END, TARGET, OWN, AT_END + [field("note"), field("score")])
    # Retyped after the range, the target made from a newer range: the range's own type counts.
    newer = [field("id", "double"), field("name")]
    with pytest.raises(ChangeDataError, match=r"type differs: id \(double in the target, long in the source\)"):
        check_target("src", "tgt", AT_END, newer + [field("_cdf_version", "long")], OWN, newer)


def test_schema_change_reports_tightened_nullability_only_when_asked():
    before, after = [field("id", "long"), field("name")], [field("id", "long"), field("name", nullable=False)]
    assert schema_change(3, before, after).additive
    change = schema_change(3, before, after, nullability=True)
    assert (change.tightened, change.additive) == (("name",), False)
    assert schema_change(3, after, before, nullability=True).additive  # loosening is fine


def rows(n: int, **extra: pa.Array) -> pa.Table:
    return pa.table({"id": pa.array(range(n), pa.int64()), "name": pa.array([f"n{i}" for i in range(n)]), **extra})


def delta_log(path) -> DeltaLog:
    return DeltaLog(Store(str(path)))


def test_additive_changes_after_the_range_read_fine(tmp_path):
    write_deltalake(str(tmp_path), rows(3), configuration=CDF_ON)  # v0
    write_deltalake(str(tmp_path), rows(3), mode="append")  # v1
    DeltaTable(str(tmp_path)).alter.add_columns([Field("note", "string")])  # v2
    write_deltalake(str(tmp_path), rows(2, note=pa.array(["a", "b"])), mode="append", schema_mode="merge")  # v3
    for start, end in [(0, 0), (0, 1), (1, 1), (1, 2), (3, 3)]:
        check_later_changes(delta_log(tmp_path), start, end)
    assert [f["name"] for f in latest_schema(delta_log(tmp_path))] == ["id", "name", "note"]


def test_a_drop_after_the_range_is_refused_naming_the_version_and_column(tmp_path):
    """Before: Spark's read failed with DELTA_CHANGE_DATA_FEED_INCOMPATIBLE_DATA_SCHEMA (exit 1, retried)."""
    write_deltalake(str(tmp_path), rows(3, note=pa.array(["a"] * 3)), configuration=CDF_ON)  # v0
    write_deltalake(str(tmp_path), rows(3, note=pa.array(["b"] * 3)), mode="append")  # v1
    write_deltalake(str(tmp_path), rows(3, note=pa.nulls(3, pa.string())), mode="append")  # v2
    write_deltalake(str(tmp_path), rows(3), mode="overwrite", schema_mode="overwrite")  # v3 drops note
    write_deltalake(str(tmp_path), rows(3), mode="append")  # v4
    for start, end in [(0, 1), (2, 2), (1, 2)]:
        with pytest.raises(
            ChangeDataError,
            match=rf"range \[{start}, {end}\] of .* cannot be read as change data.*"
            r"latest schema.*\(removed: note; type changed: -\), first at "
            r"version 3\. .*full refresh .*at version 3 or later",
        ):
            check_later_changes(delta_log(tmp_path), start, end)
    with pytest.raises(ChangeDataError, match=r"version 3 .* non-additively \(removed: note"):
        check_range(delta_log(tmp_path), 2, 3)  # inside
    check_later_changes(delta_log(tmp_path), 3, 4)  # after it


def test_dropped_then_added_back_with_its_type_reads_fine_with_another_type_does_not(tmp_path):
    write_deltalake(str(tmp_path), rows(3, note=pa.array(["a"] * 3)), configuration=CDF_ON)  # v0
    write_deltalake(str(tmp_path), rows(3), mode="overwrite", schema_mode="overwrite")  # v1 drops note
    write_deltalake(str(tmp_path), rows(3, note=pa.array(["b"] * 3)), mode="append", schema_mode="merge")  # v2
    check_later_changes(delta_log(tmp_path), 0, 0)
    write_deltalake(
        str(tmp_path), rows(3, note=pa.array([1, 2, 3])), mode="overwrite", schema_mode="overwrite"
    )  # v3: note long
    with pytest.raises(ChangeDataError, match=r"\(removed: -; type changed: note\), first at version 1"):
        check_later_changes(delta_log(tmp_path), 0, 0)
    with pytest.raises(ChangeDataError, match=r"\(removed: -; type changed: note\), first at version 3"):
        check_later_changes(delta_log(tmp_path), 2, 2)


def test_a_column_made_not_null_after_the_range_is_refused(tmp_path):
    write_deltalake(str(tmp_path), rows(3), configuration=CDF_ON)  # v0
    required = pa.schema([pa.field("id", pa.int64()), pa.field("name", pa.string(), nullable=False)])
    write_deltalake(str(tmp_path), rows(3).cast(required), mode="overwrite", schema_mode="overwrite")  # v1
    with pytest.raises(
        ChangeDataError,
        match=r"\(removed: -; type changed: -; made NOT NULL: name\), first at "
        r"version 1",
    ):
        check_later_changes(delta_log(tmp_path), 0, 0)


@pytest.mark.parametrize(
    "code", ["DELTA_CHANGE_DATA_FEED_INCOMPATIBLE_DATA_SCHEMA", "DELTA_CHANGE_DATA_FEED_INCOMPATIBLE_SCHEMA_CHANGE"]
)
def test_deltas_own_refusal_of_the_read_becomes_a_change_data_error(tmp_path, code):
    """A schema change committed between the check and Spark's read, or one the check does not model."""
    from lakefeed.cdf.job import _unreadable_schema

    write_deltalake(str(tmp_path), rows(3, note=pa.array(["a"] * 3)), configuration=CDF_ON)  # v0
    write_deltalake(str(tmp_path), rows(3, note=pa.array(["b"] * 3)), mode="append")  # v1
    message = (
        f"[{code}] Retrieving table changes between version 0 and 1 failed because of an incompatible "
        f"schema.\nYour read schema is {{...}} at version 1, but we found an incompatible data schema at "
        f"version 0."
    )
    error = _unreadable_schema(RuntimeError(message), delta_log(tmp_path), 0, 1)
    assert "range [0, 1]" in str(error) and "incompatible data schema at version 0" in str(error)
    assert "full refresh" in str(error)
    write_deltalake(str(tmp_path), rows(3), mode="overwrite", schema_mode="overwrite")  # v2 drops note
    error = _unreadable_schema(RuntimeError(message), delta_log(tmp_path), 0, 1)
    assert "(removed: note; type changed: -), first at version 2" in str(error)
    assert _unreadable_schema(RuntimeError("[UNRESOLVED_COLUMN] note"), delta_log(tmp_path), 0, 1) is None
