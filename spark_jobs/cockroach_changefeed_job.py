"""Apply a resolved range of a CockroachDB changefeed's cloud storage sink to Delta tables, exactly once.

    spark-submit spark_jobs/cockroach_changefeed_job.py \\
        --sink-root data/demo/crdb_sink --target-root data/demo/lake/crdb \\
        [--after-resolved 1714751617108996000.0000000000] --through-resolved 1714751677108996000.0000000000

Applies every data file whose key sorts after the RESOLVED file of --after-resolved (from the first
file when omitted) and before the RESOLVED file of --through-resolved, plus files the sink named
before --after-resolved that were never applied (its known naming bugs): one Delta table per topic
at TARGET-ROOT/<topic>, the greatest `updated` per key MERGEd only when newer than the stored row,
deletes kept as tombstones. A --through-resolved with no RESOLVED file is refused before Spark
starts.

Exit codes: 0 done; 2 refused (no such RESOLVED file, malformed JSON, a message without key or
updated, another envelope, a value that does not fit its column), nothing written, and with
--summary-json FILE the reason in FILE's stem + ".refused.json"; 1 anything else.
"""

from __future__ import annotations

import argparse
import logging
import sys
from datetime import timedelta
from pathlib import Path

try:
    import lakefeed  # noqa: F401  (installed, or shipped with --py-files)
except ImportError:  # running from a checkout without `pip install -e .`
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "include"))

from lakefeed.crdb.hlc import Hlc
from lakefeed.jobs import add_pipeline_id_argument, run_spark_job

log = logging.getLogger("cockroach_changefeed_job")


def _hlc(text: str) -> Hlc:
    try:
        return Hlc.parse(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _parquet_keys(text: str) -> dict[str, list[str]]:
    keys = {}
    for part in filter(None, text.split(";")):
        topic, _, columns = part.partition("=")
        if not topic or not columns:
            raise argparse.ArgumentTypeError(f"expected TOPIC=COL[,COL][;TOPIC=…], got {part!r}")
        keys[topic] = [c.strip() for c in columns.split(",") if c.strip()]
    return keys


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--sink-root", required=True, help="the changefeed's sink path: a local folder or a storage URL"
    )
    parser.add_argument("--target-root", required=True, help="folder of the Delta tables, one per topic")
    parser.add_argument("--after-resolved", type=_hlc, help="apply files after this RESOLVED file (<wall>.<logical>)")
    parser.add_argument("--through-resolved", required=True, type=_hlc, help="up to this RESOLVED file")
    parser.add_argument(
        "--parquet-keys",
        type=_parquet_keys,
        default={},
        help="for format=parquet feeds: TOPIC=COL[,COL][;TOPIC=…], each topic's primary key",
    )
    parser.add_argument(
        "--late-file-lookback-hours",
        type=float,
        default=24.0,
        help="how far before --after-resolved to look for files named late (default 24)",
    )
    parser.add_argument(
        "--quarantine-table",
        help="a Delta table (path or URL) for lines that are not changefeed messages: the run applies the "
        "others and exits 0 (without it such a line refuses the run, exit 2, nothing written)",
    )
    parser.add_argument(
        "--tombstone-retention-hours",
        type=float,
        help="then remove tombstones from before the range whose updated is this long before its RESOLVED "
        "timestamp (a later range ending before them is refused)",
    )
    parser.add_argument(
        "--snapshot-topics",
        type=lambda text: [t for t in text.split(",") if t],
        help="the range is a full snapshot of these topics at --through-resolved (an initial scan): rows of "
        "their tables that it does not hold, and that changed before it, were deleted and become tombstones",
    )
    parser.add_argument("--summary-json", help="write the run summary as JSON to this file")
    add_pipeline_id_argument(parser)
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)

    def prepare():
        from lakefeed.crdb.job import reading

        return reading(
            args.sink_root, args.after_resolved, args.through_resolved, timedelta(hours=args.late_file_lookback_hours)
        )

    def work(spark, read):
        from lakefeed.crdb.job import format_summary, run
        from lakefeed.tombstones import retention

        summary = run(
            spark,
            args.sink_root,
            args.target_root,
            *read,
            parquet_keys=args.parquet_keys,
            quarantine_table=args.quarantine_table,
            tombstone_retention=(
                retention(args.tombstone_retention_hours) if args.tombstone_retention_hours is not None else None
            ),
            snapshot_topics=args.snapshot_topics,
        )
        log.info("summary\n%s", format_summary(summary))
        return summary

    return run_spark_job("cockroach_changefeed_to_delta", args.summary_json, prepare, work, args.pipeline_id)


if __name__ == "__main__":
    sys.exit(main())
