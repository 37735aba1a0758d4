"""The monitor's cards as each feed describes its pipelines (``lakefeed.<feed>.monitoring``), read from a
real generated feed, sink and Delta source and real checkpoint files: the checkpoint's position, the
source's, the lag between them, and a source or checkpoint that cannot be read shown on its own card."""

from __future__ import annotations

import json

import pyarrow as pa
from deltalake import write_deltalake
from lakefeed_testing.blob_generator import FeedSpec, generate_feed
from lakefeed_testing.crdb_generator import SinkSpec, generate_sink

from lakefeed.blob import monitoring as blob
from lakefeed.blob.checkpoint import BlobCheckpoint
from lakefeed.blob.config import BlobPipelineConfig
from lakefeed.cdf import monitoring as cdf
from lakefeed.cdf.checkpoint import CdfCheckpoint
from lakefeed.cdf.config import CdfConfig, CdfPipeline
from lakefeed.crdb import monitoring as crdb
from lakefeed.crdb.checkpoint import CrdbCheckpoint
from lakefeed.crdb.config import CrdbConfig
from lakefeed.crdb.hlc import Hlc
from lakefeed.monitor import card, run_base
from lakefeed.pipeline import LOCAL
from lakefeed.times import parse_time
from tests.cells import file_store

RUNS = [(run_base("scheduled__1", "scheduled", "success", None, None), {"kind": "scheduled", "recordsRead": 5})]


def test_a_blob_card_shows_the_watermark_against_last_consumable_in_hours(tmp_path):
    generate_feed(tmp_path / "feed", FeedSpec(hours=5, events_per_hour=5, gap_hours=()))  # lastConsumable 04:10
    config = BlobPipelineConfig(feed_root=str(tmp_path / "feed"), spark_conf={"fs.azure.sas.x": "sig=abc"})
    store = file_store(tmp_path / "cp", BlobCheckpoint)
    (shown,) = [card(w, "blob_changefeed_to_delta", RUNS) for w in blob.watched(config, lambda _: store, LOCAL)]
    assert shown["checkpoint"]["value"] is None and shown["lag"] == {"value": None, "unit": "hours"}
    assert shown["source"] == {"label": "lastConsumable", "value": "2026-01-01T04:10:00Z", "error": None}
    store.update(lambda c: c.moved(watermark=parse_time("2026-01-01T01:10Z")))
    (shown,) = [card(w, "blob_changefeed_to_delta", RUNS) for w in blob.watched(config, lambda _: store, LOCAL)]
    assert shown["checkpoint"]["label"] == "watermark" and shown["checkpoint"]["value"] == "2026-01-01T01:10:00Z"
    assert shown["checkpoint"]["document"]["watermark"] == "2026-01-01T01:10:00Z"
    assert shown["lag"] == {"value": 3.0, "unit": "hours"} and shown["runs"][0]["read"] == 5
    assert "sig=abc" not in json.dumps(shown) and shown["health"]["status"] == "healthy"


def test_a_crdb_card_shows_the_resolved_against_the_newest_resolved_file_in_seconds(tmp_path):
    sink = generate_sink(tmp_path / "sink", SinkSpec(steps=6, changes_per_step=2))
    config = CrdbConfig(sink_root=str(tmp_path / "sink"), target_root=str(tmp_path / "lake"))
    store = file_store(tmp_path / "cp", CrdbCheckpoint)
    store.update(lambda c: c.moved(resolved=sink.resolved[1]))
    (shown,) = [card(w, "cockroach_changefeed_to_delta", []) for w in crdb.watched(config, lambda _: store, LOCAL)]
    assert shown["source"]["value"] == sink.resolved[-1] and shown["checkpoint"]["value"] == sink.resolved[1]
    expected = round((Hlc.parse(sink.resolved[-1]).wall - Hlc.parse(sink.resolved[1]).wall) / 1e9, 3)
    assert shown["lag"] == {"value": expected, "unit": "seconds"} and shown["health"]["status"] == "no runs"


def test_cdf_cards_are_one_per_pipeline_and_a_missing_source_is_that_cards_error(tmp_path):
    write_deltalake(str(tmp_path / "orders"), pa.table({"id": [1]}))
    write_deltalake(str(tmp_path / "orders"), pa.table({"id": [2]}), mode="append")
    pipelines = [
        CdfPipeline(
            name="orders", source_table=str(tmp_path / "orders"), target_table=str(tmp_path / "t1"), keys=["id"]
        ),
        CdfPipeline(name="gone", source_table=str(tmp_path / "gone"), target_table=str(tmp_path / "t2"), keys=["id"]),
    ]
    stores = {p.name: file_store(tmp_path / "cp", CdfCheckpoint, p.name) for p in pipelines}
    stores["orders"].update(lambda c: c.moved(applied_version=0))
    cards = [
        card(w, "delta_cdf_to_delta", RUNS)
        for w in cdf.watched(CdfConfig(pipelines=pipelines), lambda p: stores[p.name], LOCAL)
    ]
    assert [c["key"] for c in cards] == ["cdf:orders", "cdf:gone"]
    assert cards[0]["lag"] == {"value": 1, "unit": "versions"} and cards[0]["source"]["value"] == 1
    assert cards[1]["source"]["value"] is None and cards[1]["error"] is None


def test_a_checkpoint_that_cannot_be_read_is_the_cards_error_and_the_source_is_still_shown(tmp_path):
    generate_feed(tmp_path / "feed", FeedSpec(hours=2, events_per_hour=5, gap_hours=()))
    (tmp_path / "cp").mkdir()
    (tmp_path / "cp" / "cp.json").write_text("{not json")
    config = BlobPipelineConfig(feed_root=str(tmp_path / "feed"))
    (shown,) = [
        card(w, "blob_changefeed_to_delta", [])
        for w in blob.watched(config, lambda _: file_store(tmp_path / "cp", BlobCheckpoint), LOCAL)
    ]
    assert shown["error"] and "cp" in shown["error"] and shown["checkpoint"]["document"] is None
    assert shown["source"]["value"] == "2026-01-01T01:10:00Z"
    missing = BlobPipelineConfig(feed_root=str(tmp_path / "nowhere"))
    (shown,) = [
        card(w, "x", []) for w in blob.watched(missing, lambda _: file_store(tmp_path / "cp2", BlobCheckpoint), LOCAL)
    ]
    assert shown["source"]["value"] is None and "nowhere" in shown["source"]["error"]
