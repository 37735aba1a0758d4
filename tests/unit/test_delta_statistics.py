import pytest
from pyspark.sql.types import (
    BooleanType,
    DateType,
    LongType,
    MapType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from lakefeed.delta import statistics_on


def test_statistics_on_every_ordered_top_level_column_and_none_nested():
    schema = StructType(
        [
            StructField("id", StringType()),
            StructField("data", StructType([StructField("sequencer", StringType())])),
            StructField("extra", MapType(StringType(), StringType())),
            StructField("eventDate", DateType()),
            StructField("isStray", BooleanType()),  # Delta keeps no statistics for booleans: it refuses them
            StructField("eventTimeTicks", LongType()),
            StructField("claimWindow", TimestampType()),
            StructField("odd name", StringType()),
        ]
    )
    # The partition column is left out (Delta refuses statistics on one); a name that is no identifier is quoted.
    assert statistics_on(schema, ("eventDate",)) == {
        "delta.dataSkippingStatsColumns": "id,eventTimeTicks,claimWindow,`odd name`"
    }
    assert statistics_on(schema)["delta.dataSkippingStatsColumns"].startswith("id,eventDate,")


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
