"""The one Spark session factory every job and test uses.

Delta Lake's jars come from Maven Central through Spark's package resolution
(``spark.jars.packages``; Ivy caches them under ``~/.ivy2.5.2``), or, for
air-gapped clusters, from a folder of jars named by ``LAKEFEED_JARS_DIR``.
When the JVM was started by ``spark-submit`` these settings must already be
in its configuration (``--packages`` or ``spark-defaults.conf``; ``make setup``
writes the latter), because jars cannot be added to a running driver.
"""

from __future__ import annotations

import glob
import os
import re
import tempfile
import zipfile
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

LIBRARY_DIR = Path(__file__).resolve().parent
DELTA_EXTENSIONS = {
    "spark.sql.extensions": "io.delta.sql.DeltaSparkSessionExtension",
    "spark.sql.catalog.spark_catalog": "org.apache.spark.sql.delta.catalog.DeltaCatalog",
}
# What the jobs' results depend on: always set, whatever spark-submit was given.
SESSION_REQUIRED = {
    "spark.sql.session.timeZone": "UTC",  # windows, HLC walls and commit timestamps are read as UTC
    "spark.databricks.delta.schema.autoMerge.enabled": "false",  # schema changes are the jobs' own, checked ones
}
# Tuning for small clusters: defaults, which a pipeline's spark_conf (or spark-defaults.conf) overrides.
SESSION_DEFAULTS = {
    "spark.sql.shuffle.partitions": "8",
    "spark.sql.adaptive.enabled": "true",
    "spark.ui.showConsoleProgress": "false",
    # Decoded records flow to the JVM in Arrow batches; keep them moderate.
    "spark.sql.execution.arrow.maxRecordsPerBatch": "8192",
    # MERGE would otherwise shuffle its inserts by the partition columns first, so one
    # task writes a whole date partition of the events table on a single core.
    "spark.databricks.delta.merge.repartitionBeforeWrite.enabled": "false",
    # Log replay of a table snapshot in 8 tasks, not Delta's default 50: with a few
    # cores, 50 tiny tasks per snapshot cost seconds per run. Raise it for tables
    # whose logs hold millions of files.
    "spark.databricks.delta.snapshotPartitions": "8",
    # The jobs cache a run's batch for two or three passes: stored as plain columns, not compressed. Building
    # the compressed cache of the blob job's 1M events cost ~3 s of ~17 (an analysis of every column's
    # values) to save memory the batch fits in anyway.
    "spark.sql.inMemoryColumnarStorage.compressed": "false",
    # Warnings and errors only, from the context's start: at INFO every job logged ~300 lines of jar and
    # file copies into its task log. A pipeline's spark_conf can set INFO back.
    "spark.log.level": "WARN",
}

# JVM options `make setup` prepends to the driver's and the executors' own (spark.*.defaultJavaOptions, which
# leaves spark.*.extraJavaOptions to the user): the parallel collector. A job is a batch, so throughput is
# what counts and pauses do not; G1's concurrent work and write barriers cost the cold blob job ~5 s of ~53
# (and ~7 s of CPU) on 2 cores, and its heap grew larger.
JVM_OPTIONS = "-XX:+UseParallelGC"

# For spark-submit itself (its --conf, or spark-defaults.conf): once the job's Python exits, end the JVM
# with the job's exit code, whatever non-daemon threads a library left behind (hadoop-azure's ABFS keeps
# thread pools that would otherwise hold a finished job's spark-submit open until its timeout).
SUBMIT_SETTINGS = {"spark.submit.callSystemExitOnMainExit": "true"}


def delta_package() -> str:
    """Maven coordinate of the Delta jar matching the installed delta-spark and pyspark."""
    from importlib.metadata import version

    # Package metadata, not `import pyspark`: DAG files call this at parse time.
    spark_minor = ".".join(version("pyspark").split(".")[:2])
    return f"io.delta:delta-spark_{spark_minor}_2.13:{version('delta-spark')}"


def jar_settings() -> dict[str, str]:
    jars_dir = os.environ.get("LAKEFEED_JARS_DIR")
    if jars_dir:
        jars = sorted(glob.glob(os.path.join(jars_dir, "*.jar")))
        if not jars:
            raise RuntimeError(f"LAKEFEED_JARS_DIR={jars_dir} holds no .jar files")
        return {"spark.jars": ",".join(jars)}
    return {"spark.jars.packages": delta_package()}


def spark_defaults_file() -> Path:
    """The ``spark-defaults.conf`` a session this process starts reads: Spark's launcher takes it from
    ``SPARK_CONF_DIR``, else from the ``conf`` folder of ``SPARK_HOME`` (the pip-installed Spark's by default)."""
    conf_dir = os.environ.get("SPARK_CONF_DIR")
    if conf_dir:
        return Path(conf_dir) / "spark-defaults.conf"
    spark_home = os.environ.get("SPARK_HOME")
    return (Path(spark_home) if spark_home else _pyspark_home()) / "conf" / "spark-defaults.conf"


def default_jars(defaults: Path | None = None) -> list[Path]:
    """The jars ``spark.jars`` names in ``defaults`` (:func:`spark_defaults_file`; none when it is absent).

    >>> import tempfile
    >>> conf = Path(tempfile.mkdtemp()) / "spark-defaults.conf"
    >>> _ = conf.write_text("# setup\\nspark.jars  /j/a.jar,file:///j/b.jar\\nspark.jars.packages x:y:1\\n")
    >>> [str(jar) for jar in default_jars(conf)]
    ['/j/a.jar', '/j/b.jar']
    """
    path = defaults or spark_defaults_file()
    if not path.is_file():
        return []
    jars: list[Path] = []
    for line in path.read_text().splitlines():
        # A Java properties file: the key ends at the first whitespace, '=' or ':'; the last entry wins.
        found = re.match(r"\s*spark\.jars(?:\s*[=:]\s*|\s+)(.*)$", line)
        if found:
            jars = [Path(entry.strip().removeprefix("file://")) for entry in found.group(1).split(",") if entry.strip()]
    return jars


def delta_jar_in(jars: Sequence[Path]) -> bool:
    """Whether ``jars`` hold an existing Delta Lake jar for the installed Spark (:func:`delta_package`'s)."""
    group, artifact, release = delta_package().split(":")
    names = {f"{group}_{artifact}-{release}.jar", f"{artifact}-{release}.jar"}
    return any(jar.name in names and jar.is_file() for jar in jars)


def session_jar_settings(defaults: Path | None = None) -> dict[str, str]:
    """:func:`jar_settings` for a session this process starts, unless its ``spark-defaults.conf``
    (:func:`spark_defaults_file`, or ``defaults``) loads Delta's jar already, as ``make setup``'s does: asked of
    Ivy as well, each jar would be resolved again and registered twice (an error with a stack trace per jar
    at every start, and ~2 s of Ivy)."""
    settings = jar_settings()
    if "spark.jars.packages" in settings and delta_jar_in(default_jars(defaults)):
        return {}
    return settings


def get_session(app_name: str, master: str | None = None, extra: dict[str, str] | None = None) -> SparkSession:
    """A Delta-enabled session: reuses a running one (spark-submit, tests) or starts one."""
    from pyspark.sql import SparkSession

    from lakefeed.azure import REDACTION_REGEX, executor_env_settings

    settings = {
        **session_jar_settings(),
        **DELTA_EXTENSIONS,
        **SESSION_REQUIRED,
        **SESSION_DEFAULTS,
        "spark.redaction.regex": REDACTION_REGEX,
    }
    builder = SparkSession.builder.appName(app_name)
    # Under spark-submit (it hands the driver a gateway port) the master comes
    # from spark-submit's --master; only a plain `python job.py` picks one here.
    under_submit = bool(os.environ.get("PYSPARK_GATEWAY_PORT"))
    if master or not under_submit:
        master = master or os.environ.get("LAKEFEED_SPARK_MASTER", "local[*]")
        builder = builder.master(master)
    if under_submit or not (master or "").startswith("local"):  # master is set unless under spark-submit
        # Cluster executors do not inherit the driver's environment: forward the
        # storage credentials (redacted wherever Spark shows its configuration).
        settings.update(executor_env_settings())
    if under_submit:
        # SESSION_DEFAULTS are defaults: what spark-submit was given (--conf, a pipeline's spark_conf,
        # spark-defaults.conf, -Dspark.* options) wins over them.
        from pyspark import SparkConf, SparkContext

        SparkContext._ensure_initialized()  # the gateway to spark-submit's JVM: its conf, not an empty one
        submitted = {key for key, _ in SparkConf().getAll()}
        settings = {
            key: value for key, value in settings.items() if key not in SESSION_DEFAULTS or key not in submitted
        }
    for key, value in {**settings, **(extra or {})}.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    _check_delta(spark)
    apply_storage_credentials(spark)
    return spark


def apply_storage_credentials(spark: SparkSession, credentials: dict[str, str] | None = None) -> None:
    """Give Spark's Hadoop filesystems the storage credential the task put in this process's environment
    (:func:`lakefeed.azure.environment_credentials`): hadoop-azure's ``fs.azure.*`` settings, set on the
    running context's Hadoop configuration (which Delta hands to executors with each job), never on a
    command line. Spark redacts them wherever it shows configuration (``spark.redaction.regex``)."""
    from lakefeed.azure import environment_credentials, hadoop_settings

    hadoop = spark.sparkContext._jsc.hadoopConfiguration()
    for key, value in hadoop_settings(environment_credentials() if credentials is None else credentials).items():
        hadoop.set(key, value)


def jvm_location(location: str) -> str:
    """The path or URL Spark opens for a configured table location: a local path made absolute, an Azure
    location in any form as the ``abfs[s]://`` URL hadoop-azure reads (:func:`lakefeed.azure.hadoop_url`,
    on the account of the task's credential when the URL names none)."""
    from lakefeed.azure import environment_credentials, hadoop_url
    from lakefeed.delta import table_location

    return hadoop_url(table_location(location), environment_credentials())


def hadoop_azure_package() -> str:
    """Maven coordinate of hadoop-azure matching the Hadoop that pyspark ships (its ABFS filesystem opens
    ``abfs[s]://`` tables)."""
    jars = _pyspark_home() / "jars"
    found = sorted(jars.glob("hadoop-client-api-*.jar"))
    if not found:
        raise RuntimeError(f"no hadoop-client-api jar in {jars}: cannot tell which hadoop-azure matches")
    return f"org.apache.hadoop:hadoop-azure:{found[-1].name.removeprefix('hadoop-client-api-').removesuffix('.jar')}"


def runtime_packages() -> str:
    """Every Maven package the jobs need beside Spark itself: Delta Lake and hadoop-azure (comma-separated,
    as ``--packages`` takes them)."""
    return f"{delta_package()},{hadoop_azure_package()}"


_PRINT_JARS = (
    "from pyspark.sql import SparkSession\n"
    "print('SPARK_JARS=' + SparkSession.builder.getOrCreate().sparkContext.getConf().get('spark.jars'))\n"
)


def resolve_packages(packages: str, ivy_dir: Path | None = None, timeout: float = 900) -> list[Path]:
    """The jar files Spark's own resolver (Ivy, from Maven Central) picks for ``packages``: the classpath
    ``--packages`` would give, as files an air-gapped deployment can ship in ``LAKEFEED_JARS_DIR``. Ivy
    caches them under ``ivy_dir`` (default: Spark's, ``~/.ivy2.5.2``)."""
    import subprocess
    import sys

    spark_home = _pyspark_home()
    with tempfile.TemporaryDirectory(prefix="lakefeed-jars-") as scratch:
        script = Path(scratch) / "print_jars.py"
        script.write_text(_PRINT_JARS)
        command = [str(spark_home / "bin" / "spark-submit"), "--packages", packages]
        if ivy_dir is not None:
            command += ["--conf", f"spark.jars.ivy={ivy_dir}"]
        result = subprocess.run(
            [*command, str(script)],
            check=False,
            capture_output=True,
            text=True,
            timeout=timeout,
            # An empty configuration folder: no spark-defaults.conf whose spark.jars would be added to these (or
            # name the very jars being resolved again).
            env={**os.environ, "SPARK_CONF_DIR": scratch, "PYSPARK_PYTHON": sys.executable},
        )
    printed = [line for line in result.stdout.splitlines() if line.startswith("SPARK_JARS=")]
    if result.returncode != 0 or not printed:
        raise RuntimeError(f"could not resolve {packages} with spark-submit:\n{result.stderr[-3000:]}")
    return [Path(uri.removeprefix("file:").removeprefix("//")) for uri in printed[0].split("=", 1)[1].split(",")]


def beyond_spark(jars: list[Path], shipped: set[tuple[str | None, str]] | None = None) -> list[Path]:
    """The jars of ``jars`` (as Ivy names them, ``<groupId>_<artifactId>-<version>.jar``) whose artifact Spark
    does not ship itself (``shipped``: :func:`spark_artifacts`, by default of the installed Spark). Delta's
    package pulls in Hadoop's client, Parquet, log4j, Jackson, ... in older versions than Spark's: never loaded
    (Spark's own class loader answers first), yet each extra jar costs every JVM start (~2 s of 2 cores for
    Delta's 22). A Spark jar without Maven metadata matches by its artifact name alone.

    >>> names = ["io.delta_delta-spark_4.2_2.13-4.4.0.jar", "org.apache.hadoop_hadoop-client-api-3.4.2.jar",
    ...          "com.github.luben_zstd-jni-1.5.7-3.jar", "jline_jline-2.14.6.jar"]
    >>> shipped = {("org.apache.hadoop", "hadoop-client-api"), (None, "zstd-jni"), ("org.jline", "jline")}
    >>> [jar.name for jar in beyond_spark([Path(n) for n in names], shipped)]
    ['io.delta_delta-spark_4.2_2.13-4.4.0.jar', 'jline_jline-2.14.6.jar']
    """
    if shipped is None:
        shipped = spark_artifacts(_pyspark_home() / "jars")
    kept = []
    for jar in jars:
        group, _, rest = jar.name.partition("_")
        artifact = _artifact(rest)
        if (group, artifact) not in shipped and (None, artifact) not in shipped:
            kept.append(jar)
    return kept


def spark_artifacts(folder: Path) -> set[tuple[str | None, str]]:
    """``(groupId, artifactId)`` of each jar in ``folder``, from its own ``META-INF/maven/.../pom.properties``
    (a shaded jar also holds those of what it bundles, under other packages: not counted); ``(None,
    artifactId)`` for a jar without them, its artifact read from its file name."""
    found: set[tuple[str | None, str]] = set()
    for jar in sorted(folder.glob("*.jar")):
        artifact = _artifact(jar.name)
        with zipfile.ZipFile(jar) as archive:
            groups = [
                name.split("/")[2]
                for name in archive.namelist()
                if name.startswith("META-INF/maven/") and name.endswith(f"/{artifact}/pom.properties")
            ]
        if groups:
            found.update((group, artifact) for group in groups)
        else:
            found.add((None, artifact))
    return found


def _artifact(file_name: str) -> str:
    """``zstd-jni`` of ``zstd-jni-1.5.7-3.jar``: the name up to the first ``-`` before a digit."""
    found = re.match(r"(.+?)-\d", file_name)
    return found.group(1) if found else file_name.removesuffix(".jar")


def driver_class_path(spark_home: Path, jars: Sequence[Path]) -> str:
    """``spark.driver.extraClassPath`` naming Spark's own jars, then ``jars``. Spark's launcher puts it ahead of
    the conf folder, which it otherwise puts first: the JVM maps a class-data archive only when every
    class-path entry up to the last one it loaded a class from is a jar or an empty folder, and the conf folder
    holds spark-defaults.conf.

    >>> driver_class_path(Path("/spark"), [Path("/jars/delta.jar")]).split(os.pathsep)
    ['/spark/jars/*', '/jars/delta.jar']
    """
    return os.pathsep.join([str(spark_home / "jars" / "*"), *map(str, jars)])


def class_path_fingerprint(class_path: str, java_version: str) -> str:
    """What a class-data archive was made for, as the JVM checks it before mapping the archive: the JVM's
    version and each jar of ``class_path`` (a ``folder/*`` entry: its jars) with its size and modification
    time. An archive made for another fingerprint is refused by the JVM (with a warning at every start)."""
    lines = [java_version.strip()]
    for entry in filter(None, class_path.split(os.pathsep)):
        jars = sorted(Path(entry[:-1]).glob("*.jar")) if entry.endswith("*") else [Path(entry)]
        for jar in jars:
            stat = jar.stat()
            lines.append(f"{jar} {stat.st_size} {stat.st_mtime_ns}")
    return "\n".join(lines) + "\n"


def _pyspark_home() -> Path:
    """The pip-installed Spark's folder, found without importing pyspark (DAG files and submit tasks only need
    its jars and scripts)."""
    from importlib.util import find_spec

    spec = find_spec("pyspark")
    return Path(next(iter(spec.submodule_search_locations or []))) if spec else Path("pyspark")


def stop_session(spark: SparkSession) -> None:
    """Stop the session, then close the JVM's Hadoop filesystems (hadoop-azure's ABFS releases its
    per-filesystem thread pools on close). Not every pool goes with them: what ends spark-submit's JVM
    whatever threads are left is :data:`SUBMIT_SETTINGS`, given to spark-submit itself."""
    jvm = spark.sparkContext._jvm
    spark.stop()
    if jvm is not None:
        jvm.org.apache.hadoop.fs.FileSystem.closeAll()


def _check_delta(spark: SparkSession) -> None:
    from py4j.java_gateway import JavaClass

    jvm = spark.sparkContext._jvm
    assert jvm is not None  # set when the session's context started
    # py4j answers an unknown class name with a JavaPackage, not an error.
    if not isinstance(jvm.io.delta.tables.DeltaTable, JavaClass):
        raise RuntimeError(
            "Delta Lake classes are not on the Spark classpath: run spark-submit with "
            f"--packages {delta_package()} (or `make setup`, which writes spark-defaults.conf)"
        )


def ship_library(spark: SparkSession) -> None:
    """Make ``lakefeed`` importable on executors of a real cluster (a zip via addPyFile).

    Skipped when the library already comes from a zip (``--py-files``) or Spark
    runs in local mode, where workers share the driver's Python environment.
    """
    master = spark.sparkContext.master
    assert master is not None  # a running context always has one
    if ".zip" in str(LIBRARY_DIR) or master.startswith("local"):
        return
    archive = build_library_zip(Path(tempfile.mkdtemp(prefix="lakefeed-")) / "lakefeed.zip")
    spark.sparkContext.addPyFile(str(archive))


def build_library_zip(archive: Path) -> Path:
    """Zip the ``lakefeed`` package (for ``--py-files``)."""
    archive.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(archive, "w", zipfile.ZIP_DEFLATED) as bundle:
        for source in sorted(LIBRARY_DIR.rglob("*.py")):
            bundle.write(source, Path("lakefeed") / source.relative_to(LIBRARY_DIR))
    return archive
