import pytest
from pyspark.sql.types import LongType, TimestampType

from lakefeed.delta import statistics_on


def test_statistics_on_exactly_the_columns_named_each_quoted_where_no_identifier():
    assert statistics_on(("eventTimeTicks", "claimWindow", "odd name", "a`b")) == {
        "delta.dataSkippingStatsColumns": "eventTimeTicks,claimWindow,`odd name`,`a``b`"
    }


def test_the_events_table_keeps_statistics_on_time_columns_of_its_rows_that_delta_can_order():
    from lakefeed.blob.claim import CLAIMED_SCHEMA
    from lakefeed.blob.job import EVENTS_PARTITIONS, EVENTS_STATISTICS
    from lakefeed.blob.schema import spark_schema

    names = EVENTS_STATISTICS["delta.dataSkippingStatsColumns"].split(",")
    assert "eventTimeTicks" in names  # what the events MERGE prunes by
    claimed = {f.name: f.dataType for f in spark_schema(CLAIMED_SCHEMA).fields}
    for name in names:
        assert name not in EVENTS_PARTITIONS
        assert name in claimed or name in ("eventTimestamp", "ingestedAt")  # derived by to_event_rows
        assert isinstance(claimed.get(name, TimestampType()), (LongType, TimestampType))


@pytest.mark.integration  # two Delta writes: with the slow suite
def test_columns_written_plain_have_no_dictionary_and_the_others_keep_theirs(spark, tmp_path):
    """:func:`plain_encoded` reaches the Parquet writer of a Delta write, nested paths included, and is undone
    after the block (a setting in place before it comes back)."""
    import pyarrow.parquet as pq

    from lakefeed.delta import plain_encoded

    rows = spark.createDataFrame(
        [(f"id-{i % 3}", (f"url-{i % 3}",), f"kind-{i % 3}") for i in range(300)],
        "id string, data struct<url: string>, kind string",
    ).coalesce(1)

    def encodings(folder):
        [file] = list(folder.glob("*.parquet"))
        meta = pq.ParquetFile(file).metadata.row_group(0)
        return {
            meta.column(i).path_in_schema: "dictionary"
            if any("DICTIONARY" in e for e in meta.column(i).encodings)
            else "plain"
            for i in range(meta.num_columns)
        }

    spark.conf.set("parquet.enable.dictionary#kind", "true")
    with plain_encoded(spark, ("id", "data.url")):
        rows.write.format("delta").save(str(tmp_path / "plain"))
    assert encodings(tmp_path / "plain") == {"id": "plain", "data.url": "plain", "kind": "dictionary"}
    rows.write.format("delta").save(str(tmp_path / "after"))
    assert encodings(tmp_path / "after") == {"id": "dictionary", "data.url": "dictionary", "kind": "dictionary"}
    assert spark.conf.get("parquet.enable.dictionary#kind") == "true"
    assert spark.conf.get("parquet.enable.dictionary#id", None) is None
    spark.conf.unset("parquet.enable.dictionary#kind")
