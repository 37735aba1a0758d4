"""The training run of the driver JVM's class-data archive (``make setup``: scripts/setup.sh; what it was made for:
:func:`lakefeed.spark.class_path_fingerprint`).

Runs the three pipelines' jobs, first loads and then MERGEs of a later range, on small generated feeds in one
spark-submit application, so that the JVM started with ``-XX:ArchiveClassesAtExit`` archives the classes a
real run loads (Spark's session, Catalyst, codegen, Arrow and the Python runner, Delta's reads, writes,
MERGE and history). Every job must succeed: a job that fails here would have archived an error path.

    spark-submit --conf spark.driver.extraJavaOptions=-XX:ArchiveClassesAtExit=spark.jsa \\
        include/lakefeed_testing/jvm_training.py WORK_DIR
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

JOBS = Path(__file__).resolve().parents[2] / "spark_jobs"


def _job(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, JOBS / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _run(name: str, argv: list[str]) -> None:
    code = _job(name).main(argv)
    if code != 0:
        raise SystemExit(f"training run of {name} {' '.join(argv)} exited {code}")


def train(work: Path) -> None:
    from lakefeed_testing.blob_generator import FeedSpec, format_time, generate_feed
    from lakefeed_testing.crdb_generator import SinkSpec, generate_sink
    from lakefeed_testing.demo_data import make_cdf_source

    feed = generate_feed(work / "feed", FeedSpec(hours=3, events_per_hour=1_000, shards=2, gap_hours=()))
    windows = feed.ready_windows()
    blob_tables = ["--events-table", str(work / "blob_events"), "--state-table", str(work / "blob_state")]
    for start, end in ((windows[0], windows[-2]), (windows[-2], windows[-1])):  # a first load, then a MERGE
        window = ["--window-start", format_time(start), "--window-end", format_time(end)]
        _run("blob_changefeed_job", ["--feed-root", str(work / "feed"), *window, *blob_tables])

    sink = generate_sink(work / "sink", SinkSpec())
    crdb = ["--sink-root", str(work / "sink"), "--target-root", str(work / "crdb")]
    middle, last = sink.resolved[len(sink.resolved) // 2], sink.resolved[-1]
    _run("cockroach_changefeed_job", [*crdb, "--through-resolved", middle])
    _run("cockroach_changefeed_job", [*crdb, "--after-resolved", middle, "--through-resolved", last])

    from lakefeed.spark import get_session, stop_session

    spark = get_session("lakefeed-jvm-training")
    try:
        latest = make_cdf_source(spark, str(work / "cdf_source"))
    finally:
        stop_session(spark)
    cdf = ["--source-table", str(work / "cdf_source"), "--target-table", str(work / "cdf_target"), "--keys", "id"]
    _run("delta_cdf_job", [*cdf, "--starting-version", "0", "--ending-version", "2"])
    _run("delta_cdf_job", [*cdf, "--starting-version", "3", "--ending-version", str(latest)])


if __name__ == "__main__":
    train(Path(sys.argv[1]))
