"""The suite's Spark processes load Delta Lake and hadoop-azure from jars resolved once per machine.

Left to themselves, the suite's ~200 spark-submits (each DAG run's jobs, the job-level tests) would each
ask Ivy to resolve ``spark.jars.packages`` again at start-up: ~1.5 s of a 2-core machine per JVM, for the
same answer every time. So the session resolves the packages once, into a folder of links to Ivy's cached
jars, and runs everything the way an air-gapped deployment does: ``LAKEFEED_JARS_DIR`` names that folder
(the operator then hands spark-submit ``--jars`` instead of ``--packages``), and ``SPARK_CONF_DIR`` names a
copy of the Spark configuration ``make setup`` wrote with ``spark.jars`` in place of ``spark.jars.packages``
(for the plain spark-submits of the job-level tests). The jars are the ones Spark itself resolved: the
same classpath as with ``--packages``. The folder is reused while every link in it still resolves.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
from importlib.metadata import version
from pathlib import Path

from lakefeed.spark import beyond_spark, resolve_packages

# Each spark-submit of the suite (a DAG run's jobs, the job-level tests; they inherit the environment)
# lives for seconds on a few rows: the client JIT alone and the serial collector halve the CPU its warm-up
# costs, which on a 2-core CI machine is most of the suite's time (tests/conftest.py sets them). The session
# fixture's JVM lives for a whole worker and keeps the full JIT; deployments keep the JVM's defaults.
SHORT_LIVED_JVM = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"
# Every session of the suite (the fixture's, and each spark-submit's, through the suite's
# spark-defaults.conf) replays a Delta log in one task, not the deployments' 8
# (lakefeed.spark.SESSION_DEFAULTS): the suite's tables hold a few files, and each snapshot's 8 tiny tasks
# cost more than the replay. Measured on 2 cores: a warm session's 10 commits of the CDF simulator 15.5 s
# against 21.9 s, its 12 time-travel reads 7.5 s against 14.2 s; a cold blob job replaying 3 windows 25-29
# CPU-seconds against 34-36. Performance only: a Delta snapshot is the same whatever its tasks.
SUITE_SPARK_SETTINGS = {"spark.databricks.delta.snapshotPartitions": "1"}


def spark_home_conf() -> Path:
    """The configuration folder of the pip-installed Spark (where ``make setup`` writes its defaults)."""
    import pyspark

    return Path(pyspark.__file__).parent / "conf"


def spark_defaults_path() -> Path:
    """The ``spark-defaults.conf`` the suite's spark-submits read."""
    return Path(os.environ.get("SPARK_CONF_DIR") or spark_home_conf()) / "spark-defaults.conf"


def resolve_jars(packages: str, cache_root: Path) -> Path:
    """A folder of links to the jars Spark resolves for ``packages`` (Maven coordinates, comma-separated)."""
    # Only the jars Spark lacks are kept (lakefeed.spark.beyond_spark): which, depends on Spark's version too.
    key = hashlib.sha256(f"{packages} beyond pyspark {version('pyspark')}".encode()).hexdigest()[:16]
    folder = cache_root / f"spark-jars-{key}"
    links = list(folder.glob("*.jar")) if folder.is_dir() else []
    if links and all(link.exists() for link in links):
        return folder
    jars = beyond_spark(resolve_packages(packages))
    cache_root.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f"{folder.name}-", dir=cache_root))
    for jar in jars:
        (staging / jar.name).symlink_to(jar)
    shutil.rmtree(folder, ignore_errors=True)
    staging.rename(folder)
    return folder


def use_resolved_jars(
    packages: str, cache_root: Path, conf_dir: Path, settings: dict[str, str] | None = None
) -> dict[str, str]:
    """The environment that makes this process's Spark children load ``packages`` from resolved jars, with
    ``settings`` in place of the defaults' own values for those keys."""
    folder = resolve_jars(packages, cache_root)
    jars = ",".join(str(jar) for jar in sorted(folder.glob("*.jar")))
    conf_dir.mkdir(parents=True, exist_ok=True)
    for source in spark_home_conf().iterdir():
        if source.is_file() and source.name != "spark-defaults.conf":
            shutil.copy(source, conf_dir / source.name)
    defaults = spark_home_conf() / "spark-defaults.conf"
    lines = defaults.read_text().splitlines() if defaults.exists() else []
    # The suite picks its JVMs' collector itself (SPARK_SUBMIT_OPTS, tests/conftest.py), and a JVM given two
    # refuses to start: setup's JVM options (lakefeed.spark.JVM_OPTIONS) stay out of the suite's copy.
    left_out = {
        "spark.jars.packages",
        "spark.jars",
        "spark.driver.defaultJavaOptions",
        "spark.executor.defaultJavaOptions",
        *(settings or {}),
    }
    kept = [line for line in lines if (line.split() or [""])[0] not in left_out]
    added = [f"{key} {value}" for key, value in (settings or {}).items()]
    (conf_dir / "spark-defaults.conf").write_text("\n".join([*kept, *added, f"spark.jars {jars}"]) + "\n")
    return {"LAKEFEED_JARS_DIR": str(folder), "SPARK_CONF_DIR": str(conf_dir)}
