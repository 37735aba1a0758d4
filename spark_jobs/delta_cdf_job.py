"""Apply a range of a Delta table's change data feed to a Delta target, exactly once.

    spark-submit spark_jobs/delta_cdf_job.py \\
        --source-table data/demo/cdf/source --target-table data/demo/cdf/target \\
        --keys id --starting-version 1 --ending-version 8

Reads the change feed for the inclusive range, drops update_preimage, keeps the
last change per key and MERGEs it (insert, update, delete as a tombstone),
guarded by the source version each target row records. Full refresh (when
change data is gone: VACUUM, log cleanup, CDF enabled late):

    spark-submit spark_jobs/delta_cdf_job.py --full-refresh [--version N] \\
        --source-table … --target-table … --keys id

Exit codes: 0 done; 2 refused (range not readable as change data, bad
arguments), nothing written; 1 anything else. --summary-json writes the summary
(on exit 2, the reason to FILE's stem + ".refused.json").
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

try:
    import lakefeed  # noqa: F401  (installed, or shipped with --py-files)
except ImportError:  # running from a checkout without `pip install -e .`
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "include"))

from lakefeed.jobs import add_pipeline_id_argument, run_spark_job


def _names(text: str) -> list[str]:
    names = [n.strip() for n in text.split(",") if n.strip()]
    if not names:
        raise argparse.ArgumentTypeError("expected COL[,COL...]")
    return names


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--source-table", required=True, help="source Delta table path or URL (CDF enabled)")
    parser.add_argument("--target-table", required=True, help="target Delta table path or URL")
    parser.add_argument("--keys", required=True, type=_names, help="key column(s), comma-separated")
    parser.add_argument("--columns", type=_names, help="only these source columns (keys are always kept)")
    parser.add_argument("--starting-version", type=int, help="first source version (inclusive)")
    parser.add_argument("--ending-version", type=int, help="last source version (inclusive)")
    parser.add_argument(
        "--scd-type",
        type=int,
        choices=(1, 2),
        default=1,
        help="1: the target holds each key's current row (default); 2: every version of it, with __START_AT and "
        "__END_AT (source commit versions)",
    )
    parser.add_argument(
        "--tombstone-retention-hours",
        type=float,
        help="then remove tombstones whose delete was committed this long before the range's last commit, and "
        "before the range (a later range ending before them is refused)",
    )
    parser.add_argument("--full-refresh", action="store_true", help="rebuild the target from a source snapshot")
    parser.add_argument("--version", type=int, help="with --full-refresh: snapshot version (default latest)")
    parser.add_argument("--summary-json", help="write the run summary as JSON to this file")
    add_pipeline_id_argument(parser)
    args = parser.parse_args(argv)
    if not args.full_refresh and (args.starting_version is None or args.ending_version is None):
        parser.error("--starting-version and --ending-version are required (or --full-refresh)")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)

    def work(spark, _):
        from lakefeed.cdf.job import full_refresh, run
        from lakefeed.tombstones import retention

        if args.full_refresh:
            return full_refresh(
                spark, args.source_table, args.target_table, args.keys, args.version, args.columns, args.scd_type
            )
        return run(
            spark,
            args.source_table,
            args.target_table,
            args.keys,
            args.starting_version,
            args.ending_version,
            args.columns,
            args.scd_type,
            retention(args.tombstone_retention_hours) if args.tombstone_retention_hours is not None else None,
        )

    return run_spark_job("delta_cdf_to_delta", args.summary_json, lambda: None, work, args.pipeline_id)


if __name__ == "__main__":
    sys.exit(main())
