"""JVM-free range checks against real Delta tables written by delta-rs."""

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake

from lakefeed.cdf.log import check_range
from lakefeed.deltalog import DeltaLog
from lakefeed.errors import ChangeDataError
from lakefeed.storage import Store

CDF_ON = {"delta.enableChangeDataFeed": "true"}


def rows(n, extra=False):
    data = {"id": pa.array(range(n), pa.int64()), "name": pa.array([f"n{i}" for i in range(n)])}
    if extra:
        data["score"] = pa.array([1.0] * n)
    return pa.table(data)


def delta_log(path):
    return DeltaLog(Store(str(path)))


def test_latest_version_and_not_a_table(tmp_path):
    assert delta_log(tmp_path).latest_version() is None
    write_deltalake(str(tmp_path), rows(3), configuration=CDF_ON)
    write_deltalake(str(tmp_path), rows(3), mode="append")
    assert delta_log(tmp_path).latest_version() == 1
    assert check_range(delta_log(tmp_path), 0, 1) == []


def test_range_past_latest_is_refused(tmp_path):
    write_deltalake(str(tmp_path), rows(3), configuration=CDF_ON)
    with pytest.raises(ChangeDataError, match="starting version 3 is beyond the latest version 0"):
        check_range(delta_log(tmp_path), 3, 4)
    with pytest.raises(ChangeDataError, match="ending version 2 is beyond the latest version 0"):
        check_range(delta_log(tmp_path), 0, 2)


def test_range_before_cdf_was_enabled_names_the_version(tmp_path):
    write_deltalake(str(tmp_path), rows(3))  # v0: no CDF
    write_deltalake(str(tmp_path), rows(3), mode="append")  # v1
    DeltaTable(str(tmp_path)).alter.set_table_properties(CDF_ON)  # v2 enables it
    write_deltalake(str(tmp_path), rows(3), mode="append")  # v3
    with pytest.raises(ChangeDataError, match="enabled at version 2.*version 0 has no change data.*full-refresh"):
        check_range(delta_log(tmp_path), 0, 3)
    with pytest.raises(ChangeDataError, match="enabled at version 2"):
        check_range(delta_log(tmp_path), 0, 1)
    assert check_range(delta_log(tmp_path), 2, 3) == []


def test_cdf_never_enabled(tmp_path):
    write_deltalake(str(tmp_path), rows(3))
    with pytest.raises(ChangeDataError, match="not enabled.*delta.enableChangeDataFeed"):
        check_range(delta_log(tmp_path), 0, 0)


def test_additive_schema_change_is_reported_non_additive_refused(tmp_path):
    write_deltalake(str(tmp_path), rows(3), configuration=CDF_ON)  # v0
    write_deltalake(str(tmp_path), rows(3, extra=True), mode="append", schema_mode="merge")  # v1 adds score
    [change] = check_range(delta_log(tmp_path), 0, 1)
    assert (change.version, change.added) == (1, ("score",))
    write_deltalake(str(tmp_path), rows(2), mode="overwrite", schema_mode="overwrite")  # v2 drops it
    with pytest.raises(ChangeDataError, match=r"version 2 .* non-additively \(removed: score"):
        check_range(delta_log(tmp_path), 1, 2)


def test_versions_removed_from_the_log(tmp_path):
    write_deltalake(str(tmp_path), rows(3), configuration=CDF_ON)
    write_deltalake(str(tmp_path), rows(3), mode="append")
    write_deltalake(str(tmp_path), rows(3), mode="append")
    (tmp_path / "_delta_log" / f"{1:020d}.json").unlink()
    with pytest.raises(ChangeDataError, match="versions 1..1 .* no longer in its log.*full refresh"):
        check_range(delta_log(tmp_path), 1, 2)


def test_schema_change_at_the_first_version_of_a_range_is_refused(tmp_path):
    """Before: check_range compared commit ``start``'s schema with itself, so with one version per job a
    type change or a drop slipped through."""
    write_deltalake(str(tmp_path), rows(3), configuration=CDF_ON)  # v0
    retyped = rows(3).set_column(0, "id", pa.array([1.5, 2.5, 3.5]))
    write_deltalake(str(tmp_path), retyped, mode="overwrite", schema_mode="overwrite")  # v1: id long → double
    write_deltalake(str(tmp_path), retyped, mode="append")  # v2
    with pytest.raises(ChangeDataError, match=r"version 1 .* non-additively .*type changed: id"):
        check_range(delta_log(tmp_path), 1, 1)
    with pytest.raises(ChangeDataError, match=r"version 1 .* non-additively"):
        check_range(delta_log(tmp_path), 1, 2)
    assert check_range(delta_log(tmp_path), 2, 2) == []  # after the change: a new range
    assert check_range(delta_log(tmp_path), 0, 0) == []


def test_additive_change_at_the_first_version_is_reported(tmp_path):
    write_deltalake(str(tmp_path), rows(3), configuration=CDF_ON)
    write_deltalake(str(tmp_path), rows(3, extra=True), mode="append", schema_mode="merge")
    [change] = check_range(delta_log(tmp_path), 1, 1)
    assert change.added == ("score",)


def test_column_mapping_tables_are_refused_by_name(tmp_path):
    write_deltalake(
        str(tmp_path),
        rows(3),
        configuration={
            **CDF_ON,
            "delta.columnMapping.mode": "name",
            "delta.minReaderVersion": "2",
            "delta.minWriterVersion": "5",
        },
    )
    with pytest.raises(ChangeDataError, match=r"uses column mapping \(delta.columnMapping.mode = name"):
        check_range(delta_log(tmp_path), 0, 0)


def test_target_checked_against_the_source():
    from lakefeed.cdf.log import check_target

    source = [
        {"name": "id", "type": "long", "nullable": True, "metadata": {}},
        {
            "name": "tags",
            "type": {"type": "array", "elementType": "string", "containsNull": True},
            "nullable": True,
            "metadata": {},
        },
    ]
    target = [
        {"name": "id", "type": "long", "nullable": False, "metadata": {"comment": "x"}},
        {
            "name": "tags",
            "type": {"type": "array", "elementType": "string", "containsNull": False},
            "nullable": True,
            "metadata": {},
        },
        {"name": "_cdf_version", "type": "long", "nullable": True, "metadata": {}},
    ]
    check_target("src", "tgt", source, target, ("_cdf_version",))  # nullability and metadata do not count
    with pytest.raises(
        ChangeDataError,
        match=r"target tgt does not match source src: .*missing from the source: "
        r"tags; type differs: -",
    ):
        check_target("src", "tgt", source[:1], target, ("_cdf_version",))
    with pytest.raises(ChangeDataError, match=r"type differs: id \(long in the target, double in the source\)"):
        check_target("src", "tgt", [{**source[0], "type": "double"}, source[1]], target, ("_cdf_version",))


@pytest.mark.parametrize(
    "message, vacuumed",
    [
        (
            "[DELTA_CHANGE_DATA_FILE_NOT_FOUND] File file:/data/src/_change_data/cdc-00001.c000.snappy.parquet "
            "referenced in the transaction log cannot be found",
            True,
        ),
        (
            "[FAILED_READ_FILE.FILE_NOT_EXIST] Error while reading file file:///data/src/part-0001.snappy.parquet. "
            "File does not exist.",
            True,
        ),
        ("java.io.FileNotFoundException: /data/src/_change_data/cdc-2.parquet", True),
        # Before: any error containing "does not exist" was reported as VACUUM.
        ("[TABLE_OR_VIEW_NOT_FOUND] The table or view `db`.`lookup` does not exist.", False),
        ("[UNRESOLVED_COLUMN] A column with name `amount` does not exist.", False),
        ("Path does not exist: file:/other/table/part-1.parquet", False),
        ("java.io.FileNotFoundException: /data/src2/part-1.parquet", False),
    ],
)
def test_the_vacuum_message_is_only_for_missing_files_of_the_source(message, vacuumed):
    from lakefeed.cdf.job import _vacuumed

    error = _vacuumed(RuntimeError(message), "/data/src", 3, 4)
    assert (error is not None) == vacuumed
    if vacuumed:
        assert "removed by VACUUM" in str(error) and "versions 3..4" in str(error)
