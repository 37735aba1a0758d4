"""Blob change feed: the Azure SDK, plain fastavro and our Spark job, side by side on the same feed.

    python bench/blob_bench.py            # via `make bench`

Every feed is shaped like the service's own files (its writer schema: enums, null-first unions,
a map of tag maps). Figures (all measured in this one run):
- the SDK's ChangeFeedClient.list_changes against Azurite, on a subset (it is slow);
- a single-process fastavro read of the full ~1M-record feed, from disk and downloaded from Azurite;
- our Spark job's decode stage alone (one task per chunk file, local[2]): the columnar decoder
  (arrow-avro through polars-avro, what the job uses) and the record-by-record fastavro decoder
  (`--decoder python`; files with fields the superset does not know);
- our job end to end via spark-submit (claim + dedupe + MERGE into both targets), cold from disk,
  cold from Azurite, and warm;
- the single-process script a user would write (``blob_reference.py``: fastavro, claim, drop Control,
  dedupe, both tables written with delta-rs), interleaved with our job cold from disk, best of
  ``E2E_ROUNDS`` each, fresh targets every time, with the peak summed RSS of each (spark-submit and every
  process under it: the JVM, the Python driver and workers);
- a long backfill: 24 windows in one Spark application (JVM start and JIT warm-up paid once);
- peak memory of the decoder (the code Python workers run) on ~1 MB versus ~50 MB chunk files;
- a run with no new data: the sensor's check and the planner, without Spark.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from datetime import timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from common import DATA, ROOT, child_peak_rss_mb, run_measured, save, timed
from lakefeed_testing.blob_generator import DEFAULT_START, FeedSpec, generate_feed

from lakefeed.blob.feed import ChangeFeed
from lakefeed.blob.schedule import check_readiness
from lakefeed.blob.timegrid import HOUR
from lakefeed.storage import Store
from lakefeed.times import format_time

FULL = FeedSpec(hours=4, events_per_hour=333_334, shards=8, records_per_chunk=20_000, blobs=200_000, gap_hours=())
PREVIOUS_DAY = FeedSpec(**{**FULL.__dict__, "start": DEFAULT_START - timedelta(days=1), "seed": 8})
SUBSET = FeedSpec(hours=2, events_per_hour=15_000, shards=8, records_per_chunk=20_000, blobs=20_000, gap_hours=())
DAY = FeedSpec(
    hours=24, events_per_hour=40_000, shards=4, records_per_chunk=10_000, blobs=100_000, gap_hours=(), seed=9
)
CONTAINER = "$blobchangefeed"
E2E_ROUNDS = 2  # our job cold and the single-process script, interleaved; each keeps its best time
REFERENCE_SCRIPT = Path(__file__).resolve().parent / "blob_reference.py"


def feed(name: str, spec: FeedSpec) -> tuple[Path, object]:
    """Generate once and reuse: a marker file records the spec the folder was made from."""
    folder = DATA / name
    marker = folder / ".spec.json"
    wanted = json.dumps({**spec.__dict__, "start": format_time(spec.start)}, sort_keys=True)
    if marker.exists() and marker.read_text() == wanted:
        return folder, None
    shutil.rmtree(folder, ignore_errors=True)
    truth = generate_feed(folder, spec)
    marker.write_text(wanted)
    return folder, truth


def chunk_files(folder: Path) -> list[Path]:
    return [p for p in sorted((folder / "log").rglob("*.avro")) if p.stat().st_size > 0]


def fastavro_single_process(paths: list[Path]) -> int:
    import fastavro

    count = 0
    for path in paths:
        with path.open("rb") as handle:
            for _ in fastavro.reader(handle):
                count += 1
    return count


def job_command(feed_root: str, start, end, lake: Path) -> list[str]:
    return [
        "spark-submit",
        str(ROOT / "spark_jobs" / "blob_changefeed_job.py"),
        "--feed-root",
        feed_root,
        "--window-start",
        format_time(start),
        "--window-end",
        format_time(end),
        "--events-table",
        str(lake / "events"),
        "--state-table",
        str(lake / "state"),
        "--summary-json",
        str(lake / "summary.json"),
    ]


def job_summary(result: subprocess.CompletedProcess[str], lake: Path) -> dict:
    if result.returncode != 0:
        raise RuntimeError(result.stdout[-4000:])
    return json.loads((lake / "summary.json").read_text())


def spark_submit(feed_root: str, start, end, lake: Path, env: dict | None = None) -> dict:
    result = subprocess.run(
        job_command(feed_root, start, end, lake), env=env or os.environ.copy(), capture_output=True, text=True
    )
    return job_summary(result, lake)


def cold_side_by_side(feed_root: str, start, end) -> tuple[dict, dict, dict, dict]:
    """Our job cold and the single-process script on the same windows, interleaved, fresh targets each time:
    each one's best seconds and peak summed RSS (the highest of its rounds), the summary of our job's
    fastest round, the script's counts."""
    seconds: dict[str, float] = {}
    peak_mib: dict[str, float] = {}
    lake, reference_lake = DATA / "lake_cold", DATA / "lake_cold_single_process_script"
    script = [
        sys.executable,
        str(REFERENCE_SCRIPT),
        feed_root,
        str(reference_lake),
        format_time(start),
        format_time(end),
    ]
    summary: dict = {}
    counts: dict = {}
    for attempt in range(1, E2E_ROUNDS + 1):
        print(f"  end to end round {attempt} of {E2E_ROUNDS}", flush=True)
        for name, command, target in (
            ("e2e_cold_spark_submit", job_command(feed_root, start, end, lake), lake),
            ("single_process_script", script, reference_lake),
        ):
            shutil.rmtree(target, ignore_errors=True)
            took, peak, result = run_measured(command)
            if name == "single_process_script":
                if result.returncode != 0:
                    raise RuntimeError(result.stderr[-4000:])
                counts = json.loads(result.stdout.splitlines()[-1])
            elif took <= seconds.get(name, took):
                summary = job_summary(result, lake)  # the fastest round's (its stage timings)
            else:
                job_summary(result, lake)  # still checked
            print(f"  {name}: {took:.1f}s, peak summed RSS {peak:.0f} MiB", flush=True)
            seconds[name] = round(min(took, seconds.get(name, took)), 3)
            peak_mib[name] = round(max(peak, peak_mib.get(name, 0.0)), 1)
    return seconds, peak_mib, summary, counts


def decoder_memory() -> dict:
    """Peak memory of the decoder (what Spark's Python workers run) on a ~1 MB and a ~50 MB chunk file."""
    memory = {}
    for label, per_chunk in (("1MB", 1_700), ("50MB", 85_000)):
        folder, _ = feed(
            f"feed_chunk_{label}",
            FeedSpec(hours=2, events_per_hour=per_chunk, shards=1, records_per_chunk=per_chunk, gap_hours=(), seed=4),
        )
        chunk = max(chunk_files(folder), key=lambda p: p.stat().st_size)
        relative = chunk.relative_to(folder)
        memory[label] = {
            "chunkBytes": chunk.stat().st_size,
            "peakMiB": round(
                child_peak_rss_mb(
                    "from datetime import datetime, timezone\n"
                    "from lakefeed.blob.decode import ChunkRef, decode_chunk\n"
                    "from lakefeed.storage import Store\n"
                    f"ref = ChunkRef({str(folder)!r}, {str(relative)!r}, '00', datetime(2026, 1, 1, tzinfo=timezone.utc))\n"
                    f"n = sum(b.num_rows for b in decode_chunk(Store({str(folder)!r}), ref))\n"
                ),
                1,
            ),
        }
    return memory


def main() -> None:
    figures: dict = {}
    seconds: dict = {}
    print("generating feeds (reused when present)", flush=True)
    full, _ = feed("feed_1m", FULL)
    previous, _ = feed("feed_1m_previous_day", PREVIOUS_DAY)
    subset, _ = feed("feed_subset", SUBSET)
    from lakefeed.blob.job import read_records
    from lakefeed.blob.job import reading as plan

    feed_root = str(full)
    last = ChangeFeed(Store(feed_root)).last_consumable()
    start, end = FULL.start - HOUR, last
    run_plan = plan(feed_root, start, end)
    # Exactly the chunk files the job reads (not the Publishing segment past lastConsumable).
    files = [full / c.path for c in run_plan.chunk_files if c.size]
    figures["feed"] = {
        "chunkFiles": len(files),
        "bytes": sum(p.stat().st_size for p in files),
        "windows": len(run_plan.windows),
    }

    # --- Azurite: the SDK on a subset; plain fastavro and our job on the full feed ------------------
    sys.path.insert(0, str(ROOT))
    from tests.azurite import start_azurite, stop_azurite

    azurite = start_azurite(Path(DATA / "azurite"))
    try:
        azurite.upload_folder(subset, CONTAINER)
        from azure.storage.blob import BlobServiceClient
        from azure.storage.blob.changefeed import ChangeFeedClient

        client = ChangeFeedClient.from_connection_string(azurite.connection_string)
        with timed(seconds, "sdk_list_changes"):
            sdk_events = sum(1 for _ in client.list_changes())
        figures["sdk_events_per_s"] = round(sdk_events / seconds["sdk_list_changes"])

        print("uploading the full feed to Azurite", flush=True)
        azurite.upload_folder(full, CONTAINER)
        container = BlobServiceClient.from_connection_string(azurite.connection_string).get_container_client(CONTAINER)
        import io

        import fastavro

        with timed(seconds, "fastavro_azurite_full"):
            count = 0
            for path in files:
                for _ in fastavro.reader(io.BytesIO(container.download_blob(str(path.relative_to(full))).readall())):
                    count += 1
        figures["fastavro_azurite_events_per_s"] = round(count / seconds["fastavro_azurite_full"])
        lake = DATA / "lake_cold_azurite"
        shutil.rmtree(lake, ignore_errors=True)
        env = {**os.environ, "AZURE_STORAGE_CONNECTION_STRING": azurite.connection_string}
        with timed(seconds, "e2e_cold_azurite_spark_submit"):
            cold_azure = spark_submit(f"az://{CONTAINER}", start, end, lake, env=env)
        figures["e2e_cold_azurite_records_per_s"] = round(
            cold_azure["recordsRead"] / seconds["e2e_cold_azurite_spark_submit"]
        )
    finally:
        stop_azurite(azurite)

    # --- local disk: plain fastavro vs our decode stage, interleaved, best of 3 each ------------------
    from lakefeed.spark import get_session

    spark = get_session("bench-decode", master="local[2]", extra={"spark.ui.enabled": "false"})
    spark.sparkContext.setLogLevel("ERROR")

    def decode_stage(decoder: str) -> None:
        read_records(spark, run_plan, feed_root, decoder).write.format("noop").mode("overwrite").save()

    decode_stage("auto"), decode_stage("python")  # start the JVM's JIT and the Python workers
    records = 0
    for attempt in range(1, 4):  # the same noise reaches all three; each keeps its best time
        print(f"  decode round {attempt} of 3", flush=True)
        with timed(seconds, f"fastavro_local_full_{attempt}"):
            records = fastavro_single_process(files)
        with timed(seconds, f"spark_decode_stage_{attempt}"):
            decode_stage("auto")
        with timed(seconds, f"spark_decode_stage_python_decoder_{attempt}"):
            decode_stage("python")
    spark.stop()
    for name in ("fastavro_local_full", "spark_decode_stage", "spark_decode_stage_python_decoder"):
        seconds[name] = min(seconds.pop(f"{name}_{attempt}") for attempt in range(1, 4))
    figures["records_in_files"] = records
    figures["fastavro_local_events_per_s"] = round(records / seconds["fastavro_local_full"])
    figures["spark_decode_events_per_s"] = round(records / seconds["spark_decode_stage"])
    figures["spark_python_decoder_events_per_s"] = round(records / seconds["spark_decode_stage_python_decoder"])

    # --- end to end: cold side by side with the single-process script, then warm -------------------
    e2e_seconds, peak_mib, cold, script_counts = cold_side_by_side(feed_root, start, end)
    seconds.update(e2e_seconds)
    figures["peak_summed_rss_mib"] = peak_mib
    figures["single_process_script"] = script_counts
    figures["single_process_script_counts_match_job"] = (
        script_counts["recordsRead"],
        script_counts["eventsUnique"],
        script_counts["blobs"],
    ) == (cold["recordsRead"], cold["eventsUnique"], cold["stateInserted"])
    if not figures["single_process_script_counts_match_job"]:
        print(f"  WARNING: the script's counts {script_counts} differ from our job's", flush=True)
    figures["script_records_per_s"] = round(script_counts["recordsRead"] / seconds["single_process_script"])
    figures["e2e_cold"] = {
        k: cold[k] for k in ("recordsRead", "eventsUnique", "eventsInserted", "stateInserted", "seconds")
    }
    figures["e2e_cold_events_per_s"] = round(cold["eventsUnique"] / seconds["e2e_cold_spark_submit"])
    figures["e2e_cold_records_per_s"] = round(cold["recordsRead"] / seconds["e2e_cold_spark_submit"])

    lake = DATA / "lake_warm"
    shutil.rmtree(lake, ignore_errors=True)
    prev_last = ChangeFeed(Store(str(previous))).last_consumable()
    with timed(seconds, "warm_up_previous_day"):
        spark_submit(str(previous), PREVIOUS_DAY.start - HOUR, prev_last, lake)
    with timed(seconds, "e2e_warm_spark_submit"):
        warm = spark_submit(feed_root, start, end, lake)
    figures["e2e_warm"] = {
        k: warm[k] for k in ("eventsUnique", "eventsInserted", "stateInserted", "stateUpdated", "seconds")
    }
    figures["e2e_warm_events_per_s"] = round(warm["eventsUnique"] / seconds["e2e_warm_spark_submit"])

    # --- a long backfill: 24 windows, one Spark application -----------------------------------------
    day, _ = feed("feed_day", DAY)
    lake = DATA / "lake_day"
    shutil.rmtree(lake, ignore_errors=True)
    day_last = ChangeFeed(Store(str(day))).last_consumable()
    with timed(seconds, "backfill_24_windows_one_application"):
        backfill = spark_submit(str(day), day_last - 24 * HOUR, day_last, lake)
    figures["backfill_24_windows"] = {
        "windows": len(backfill["windows"]),
        "eventsUnique": backfill["eventsUnique"],
        "events_per_s": round(backfill["eventsUnique"] / seconds["backfill_24_windows_one_application"]),
        "seconds_per_window": round(seconds["backfill_24_windows_one_application"] / len(backfill["windows"]), 2),
    }
    lake = DATA / "lake_day_one_window"
    shutil.rmtree(lake, ignore_errors=True)
    with timed(seconds, "one_window_one_application"):
        spark_submit(str(day), day_last - 2 * HOUR, day_last - HOUR, lake)

    memory = decoder_memory()
    figures["decoder_peak_memory"] = memory

    # --- no new data: the sensor's check, without Spark -------------------------------------------
    started = time.perf_counter()
    readiness = check_readiness(ChangeFeed(Store(feed_root)), watermark=last, last_seen=last, start_from=None)
    figures["no_new_data_check_seconds"] = round(time.perf_counter() - started, 5)
    assert not readiness.ready

    figures["seconds"] = seconds
    figures["ratios"] = {
        "e2e_cold_vs_single_process_script": round(
            seconds["single_process_script"] / seconds["e2e_cold_spark_submit"], 2
        ),
        "e2e_cold_peak_rss_vs_single_process_script": round(
            peak_mib["e2e_cold_spark_submit"] / peak_mib["single_process_script"], 2
        ),
        "e2e_cold_vs_fastavro_local": round(
            figures["e2e_cold_records_per_s"] / figures["fastavro_local_events_per_s"], 2
        ),
        "e2e_cold_azurite_vs_fastavro_azurite": round(
            figures["e2e_cold_azurite_records_per_s"] / figures["fastavro_azurite_events_per_s"], 2
        ),
        "backfill_window_vs_single_window_run": round(
            figures["backfill_24_windows"]["seconds_per_window"] / seconds["one_window_one_application"], 2
        ),
        "e2e_cold_vs_sdk": round(figures["e2e_cold_events_per_s"] / figures["sdk_events_per_s"], 1),
        "e2e_warm_vs_sdk": round(figures["e2e_warm_events_per_s"] / figures["sdk_events_per_s"], 1),
        "decode_vs_single_fastavro": round(
            figures["spark_decode_events_per_s"] / figures["fastavro_local_events_per_s"], 2
        ),
        "record_decoder_vs_single_fastavro": round(
            figures["spark_python_decoder_events_per_s"] / figures["fastavro_local_events_per_s"], 2
        ),
        "decoder_memory_50MB_vs_1MB": round(memory["50MB"]["peakMiB"] / memory["1MB"]["peakMiB"], 2),
        "chunk_size_50MB_vs_1MB": round(memory["50MB"]["chunkBytes"] / memory["1MB"]["chunkBytes"], 1),
    }
    save("blob", figures)
    print(json.dumps(figures, indent=2))


if __name__ == "__main__":
    if sys.argv[1:] == ["memory"]:  # re-measure only the decoder's memory, into the saved results
        results = json.loads((DATA / "results.json").read_text())["blob"]
        results["decoder_peak_memory"] = decoder_memory()
        m = results["decoder_peak_memory"]
        results["ratios"]["decoder_memory_50MB_vs_1MB"] = round(m["50MB"]["peakMiB"] / m["1MB"]["peakMiB"], 2)
        results.pop("measured", None), results.pop("machine", None)
        save("blob", results)
        print(json.dumps(m, indent=2))
    else:
        main()
