"""`make setup`'s class-data archive (CDS) (scripts/setup.sh, lakefeed_testing.jvm_training): the driver JVM of a
plain spark-submit maps it. `-Xshare:on` turns the JVM's silent fallback (an archive it cannot map is
ignored, with a warning) into a failure, so these tests see whether it is really used."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from lakefeed.spark import _pyspark_home

pytestmark = pytest.mark.integration

DEFAULTS = _pyspark_home() / "conf" / "spark-defaults.conf"


def _defaults() -> dict[str, str]:
    lines = [line for line in DEFAULTS.read_text().splitlines() if line and not line.startswith("#")]
    return dict(line.split(" ", 1) for line in lines)


def _submit(tmp_path: Path, *conf: str) -> subprocess.CompletedProcess[str]:
    """A plain spark-submit of a script that starts no context, with Spark's defaults as setup wrote them (the
    suite's own conf folder and JVM options left out)."""
    script = tmp_path / "hello.py"
    script.write_text("print('driver ran')\n")
    env = {k: v for k, v in os.environ.items() if k not in ("SPARK_CONF_DIR", "SPARK_SUBMIT_OPTS", "LAKEFEED_JARS_DIR")}
    return subprocess.run(
        ["spark-submit", *(arg for setting in conf for arg in ("--conf", setting)), str(script)],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )


def test_a_plain_spark_submit_maps_the_class_data_archive_setup_made(tmp_path: Path) -> None:
    defaults = _defaults()
    option = defaults.get("spark.driver.extraJavaOptions", "")
    assert "-XX:SharedArchiveFile=" in option, f"make setup wrote no class-data archive into {DEFAULTS}"
    done = _submit(tmp_path, f"spark.driver.extraJavaOptions=-Xshare:on {option}")
    assert done.returncode == 0 and "driver ran" in done.stdout, done.stderr[-2000:]


def test_with_the_conf_folder_first_on_the_class_path_the_archive_would_be_refused(tmp_path: Path) -> None:
    """Why setup names Spark's jars in spark.driver.extraClassPath: without it the launcher puts the conf
    folder (not empty: it holds spark-defaults.conf) first, and the JVM refuses the archive."""
    option = _defaults()["spark.driver.extraJavaOptions"]
    done = _submit(tmp_path, f"spark.driver.extraJavaOptions=-Xshare:on {option}", "spark.driver.extraClassPath=")
    assert done.returncode != 0
    assert "shared class paths mismatch" in done.stderr, done.stderr[-2000:]


def test_the_archive_is_made_again_when_a_jar_or_the_jvm_changes(tmp_path: Path) -> None:
    from lakefeed.spark import class_path_fingerprint, driver_class_path

    spark_home, jar = tmp_path / "spark", tmp_path / "delta.jar"
    (spark_home / "jars").mkdir(parents=True)
    (spark_home / "jars" / "spark-core.jar").write_bytes(b"x")
    jar.write_bytes(b"y")
    class_path = driver_class_path(spark_home, [jar])
    made_for = class_path_fingerprint(class_path, "openjdk 17.0.15")
    assert str(spark_home / "jars" / "spark-core.jar") in made_for and str(jar) in made_for
    assert class_path_fingerprint(class_path, "openjdk 17.0.15") == made_for
    assert class_path_fingerprint(class_path, "openjdk 17.0.16") != made_for
    jar.write_bytes(b"yy")  # rebuilt: another size and time, which the JVM checks
    assert class_path_fingerprint(class_path, "openjdk 17.0.15") != made_for


def test_a_plain_spark_submit_runs_the_parallel_collector_beside_its_own_options(tmp_path: Path) -> None:
    """Setup's JVM options (lakefeed.spark.JVM_OPTIONS) are spark.driver.defaultJavaOptions: the launcher
    prepends them to whatever spark.driver.extraJavaOptions says, so a user's own options keep them."""
    from lakefeed.spark import JVM_OPTIONS

    defaults = _defaults()
    assert defaults.get("spark.driver.defaultJavaOptions") == JVM_OPTIONS
    assert defaults.get("spark.executor.defaultJavaOptions") == JVM_OPTIONS
    option = defaults["spark.driver.extraJavaOptions"]
    done = _submit(tmp_path, f"spark.driver.extraJavaOptions=-Xshare:on -Xlog:gc:stderr {option}")
    assert done.returncode == 0 and "driver ran" in done.stdout, done.stderr[-2000:]
    assert "Using Parallel" in done.stderr, done.stderr[-2000:]
