"""The demo's Spark-side helpers, run by scripts/demo.py as child processes so that Ivy's resolution
report and Spark's start-up chatter go to the demo's log files, not the screen.

    python scripts/demo_spark.py make-cdf-source <data dir>          # prints {"latestVersion": N}
    python scripts/demo_spark.py check <data dir> <expected.json>    # prints {"check": bool, ...}
"""

from __future__ import annotations

import json
import sys
from pathlib import Path


def session():
    from lakefeed.spark import get_session

    spark = get_session("lakefeed-demo", extra={"spark.ui.enabled": "false"})
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def make_cdf_source(data: Path) -> dict:
    """The demo's source table with change data feed on (lakefeed_testing.demo_data.make_cdf_source)."""
    from lakefeed_testing.demo_data import DemoLayout, make_cdf_source

    return {"latestVersion": make_cdf_source(session(), DemoLayout.local(data).cdf_source)}


def check(data: Path, expected: dict) -> dict:
    """Every target against the ground truth the demo generated (lakefeed_testing.demo_data.check_targets)."""
    from lakefeed_testing.demo_data import DemoLayout, check_targets

    return check_targets(session(), DemoLayout.local(data), expected)


def main(argv: list[str]) -> int:
    command, data = argv[0], Path(argv[1])
    if command == "make-cdf-source":
        result = make_cdf_source(data)
    elif command == "check":
        result = check(data, json.loads(Path(argv[2]).read_text()))
    else:
        raise SystemExit(f"unknown command {command!r}")
    print("RESULT " + json.dumps(result), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
