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
