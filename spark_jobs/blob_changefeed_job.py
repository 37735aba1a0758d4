"""Ingest windows of an Azure Blob Storage change feed into Delta tables.

    spark-submit spark_jobs/blob_changefeed_job.py \\
        --feed-root data/demo/feed \\
        --window-start 2026-01-01T00:10Z --window-end 2026-01-01T03:10Z \\
        --events-table data/demo/lake/blob_events --state-table data/demo/lake/blob_state

Processes every hourly grid window in [window-start, window-end). A window T
that is not ready (lastConsumable < T + 1h) is refused: exit code 2, nothing
written. Bad input (corrupt Avro, malformed manifest, unknown schemaVersion)
also exits 2 with a message naming the file; other failures exit 1. So does
data loss: a shard folder of a segment read that holds no chunk file where the
evidence says retention may have deleted them (lakefeed.blob.shards: the
account's retention, --change-feed-retention-days, or else an older segment
that still holds all its chunk files); --acknowledge-data-loss skips such shards
and lists them in the summary's missingShards. A shard the evidence says is
empty is read as empty and counted (emptyShards, with shardVerdicts' reasons).
--summary-json writes the run summary (counts, table versions) to a file
(on exit 2, the reason to FILE's stem + ".refused.json").
"""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path

try:
    import lakefeed  # noqa: F401  (installed, or shipped with --py-files)
except ImportError:  # running from a checkout without `pip install -e .`
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "include"))

from lakefeed.blob.config import DECODERS
from lakefeed.jobs import add_pipeline_id_argument, run_spark_job
from lakefeed.times import parse_time

log = logging.getLogger("blob_changefeed_job")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--feed-root", required=True, help="the $blobchangefeed container: a local folder or a storage URL"
    )
    parser.add_argument("--window-start", required=True, type=_time, help="first window start (ISO-8601, UTC)")
    parser.add_argument("--window-end", required=True, type=_time, help="end of the last window (exclusive)")
    parser.add_argument("--events-table", required=True, help="Delta events table path or URL")
    parser.add_argument("--state-table", required=True, help="Delta state table path or URL")
    parser.add_argument("--summary-json", help="write the run summary as JSON to this file")
    parser.add_argument(
        "--decoder",
        choices=DECODERS,
        default="auto",
        help="auto: the columnar decoder (arrow-avro) for chunk files whose writer schema the "
        "superset represents exactly, fastavro record by record for the rest; python: "
        "fastavro record by record for every file",
    )
    parser.add_argument(
        "--acknowledge-data-loss",
        action="store_true",
        help="apply what remains when a segment read names shard folders holding no chunk file "
        "that retention may have emptied: skip them and list them in the summary's missingShards; "
        "without it such a run is refused (exit 2)",
    )
    parser.add_argument(
        "--change-feed-retention-days",
        type=_retention,
        help="the account's change feed retention: a number of days, or 'unlimited'; tells an empty shard "
        "from one retention emptied by the segment's age (without it, by the order retention deletes in)",
    )
    add_pipeline_id_argument(parser)
    return parser.parse_args(argv)


def _retention(text: str):
    if text == "unlimited":
        return text
    if text.isdigit() and int(text) >= 1:
        return int(text)
    raise argparse.ArgumentTypeError(f"a number of days (at least 1) or 'unlimited', not {text!r}")


def _time(text: str):
    try:
        return parse_time(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)

    def prepare():
        from lakefeed.blob.job import reading

        return reading(
            args.feed_root,
            args.window_start,
            args.window_end,
            acknowledge_data_loss=args.acknowledge_data_loss,
            retention_days=args.change_feed_retention_days,
        )

    def work(spark, read):
        from lakefeed.blob.job import format_summary, run

        summary = run(spark, read, args.feed_root, args.events_table, args.state_table, decoder=args.decoder)
        log.info("summary\n%s", format_summary(summary))
        return summary

    return run_spark_job("blob_changefeed_to_delta", args.summary_json, prepare, work, args.pipeline_id)


if __name__ == "__main__":
    sys.exit(main())
