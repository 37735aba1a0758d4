#!/usr/bin/env bash
# Idempotent set-up of a fresh machine: Java, the virtualenv with pinned
# dependencies, the project library (editable), and Spark's defaults so that a
# plain `spark-submit` finds Delta Lake and the virtualenv's Python.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
VENV="$ROOT/.venv"
PY=${PYTHON:-python3.11}
command -v "$PY" >/dev/null 2>&1 || PY=python3

need_apt=()
command -v java >/dev/null 2>&1 || need_apt+=(openjdk-17-jre-headless)
command -v npm >/dev/null 2>&1 || need_apt+=(nodejs npm)
ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || need_apt+=(postgresql)  # full-stack test
command -v chromium >/dev/null 2>&1 || need_apt+=(chromium)                     # UI browser test (Playwright)
if [ ${#need_apt[@]} -gt 0 ]; then
  echo "setup: installing ${need_apt[*]} (Spark needs Java 17+)"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq && apt-get install -y -qq "${need_apt[@]}" >/dev/null
fi

stamp="$VENV/.installed"
if [ ! -f "$stamp" ] || [ requirements.txt -nt "$stamp" ] || [ requirements-dev.txt -nt "$stamp" ] || [ constraints.txt -nt "$stamp" ] || [ pyproject.toml -nt "$stamp" ]; then
  echo "setup: creating $VENV and installing pinned requirements (first time: a few minutes)"
  [ -x "$VENV/bin/python" ] || "$PY" -m venv "$VENV"
  "$VENV/bin/pip" install -q --upgrade pip
  "$VENV/bin/pip" install -q -r requirements-dev.txt -c constraints.txt
  "$VENV/bin/pip" install -q -e . -c constraints.txt
  touch "$stamp"
fi

# Azurite (Microsoft's Azure Storage emulator) for the Azure integration tests, pinned in package-lock.json.
if [ ! -x node_modules/.bin/azurite-blob ] || [ package-lock.json -nt node_modules/.package-lock.json ]; then
  echo "setup: installing Azurite from package-lock.json"
  npm ci --no-audit --no-fund --loglevel=error
fi

# Delta Lake's jars, resolved once (Ivy, from Maven Central) and copied into the virtualenv; Spark's defaults
# below name them (spark.jars), so a plain spark-submit loads them without asking Ivy again at each start
# (~2 s of a 2-core machine per job) and runs offline. Resolved again when the pinned versions change.
# (A DAG task's spark-submit still names its packages, hadoop-azure's for Azure storage among them, unless
# LAKEFEED_JARS_DIR names a folder holding them all, as in the images.)
JARS_DIR="$VENV/spark-jars"
"$VENV/bin/python" - "$JARS_DIR" <<'PY'
import shutil, sys, tempfile
from importlib.metadata import version
from pathlib import Path
from lakefeed.spark import beyond_spark, delta_package, resolve_packages
folder, packages = Path(sys.argv[1]), delta_package()
wanted = f"{packages} beyond pyspark {version('pyspark')}\n"  # which jars are kept depends on Spark's own
stamp = folder / "PACKAGES"
if not (stamp.exists() and stamp.read_text() == wanted and any(folder.glob("*.jar"))):
    print(f"setup: resolving {packages} into {folder}")
    staging = Path(tempfile.mkdtemp(prefix="spark-jars-", dir=folder.parent))
    try:
        for jar in beyond_spark(resolve_packages(packages)):
            shutil.copy(jar, staging / jar.name)
        (staging / "PACKAGES").write_text(wanted)
        shutil.rmtree(folder, ignore_errors=True)
        staging.rename(folder)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
PY

# spark-defaults.conf of the pip-installed Spark: plain `spark-submit` (no --packages or --jars) then loads
# Delta from those jars and runs Python workers with the virtualenv's interpreter. Its driver JVM also maps a
# class-data archive (CDS) of the classes a run loads, made once by a training run of the three jobs on small
# feeds (lakefeed_testing.jvm_training): Spark's, Scala's and Delta's classes come parsed and verified instead
# of read from ~300 jars, which saves each job ~3-9 s of start-up and cold paths. Made again when Java or a
# jar changes; without it (or if the JVM refuses it) jobs run as before, only slower to start.
# The JVMs run the parallel collector (lakefeed.spark.JVM_OPTIONS, as spark.*.defaultJavaOptions).
SPARK_HOME=$("$VENV/bin/python" -c 'import os, pyspark; print(os.path.dirname(pyspark.__file__))')
mkdir -p "$SPARK_HOME/conf"
source scripts/env.sh
LAKEFEED_JARS_DIR="$JARS_DIR" "$VENV/bin/python" - "$SPARK_HOME" "$VENV/bin/python" "$VENV/spark-cds" <<'PY'
import os, shutil, subprocess, sys, tempfile
from pathlib import Path
from lakefeed.spark import (DELTA_EXTENSIONS, JVM_OPTIONS, SESSION_DEFAULTS, SESSION_REQUIRED, SUBMIT_SETTINGS,
                            class_path_fingerprint, driver_class_path, jar_settings)
spark_home, python, archives = Path(sys.argv[1]), sys.argv[2], Path(sys.argv[3])
defaults, archive, made_for = spark_home / "conf" / "spark-defaults.conf", archives / "spark.jsa", archives / "MADE_FOR"
class_path = driver_class_path(spark_home, sorted(Path(os.environ["LAKEFEED_JARS_DIR"]).glob("*.jar")))

def write_defaults(with_archive: bool) -> None:
    settings = {**jar_settings(), **DELTA_EXTENSIONS, **SESSION_REQUIRED, **SESSION_DEFAULTS, **SUBMIT_SETTINGS,
                "spark.pyspark.python": python, "spark.pyspark.driver.python": python,
                "spark.driver.memory": "4g", "spark.driver.extraClassPath": class_path,
                "spark.driver.defaultJavaOptions": JVM_OPTIONS, "spark.executor.defaultJavaOptions": JVM_OPTIONS}
    if with_archive:
        settings["spark.driver.extraJavaOptions"] = f"-XX:SharedArchiveFile={archive}"
    with open(defaults, "w") as handle:
        handle.write("# Written by scripts/setup.sh; re-run it to refresh.\n")
        for key, value in settings.items():
            handle.write(f"{key} {value}\n")

java = os.path.join(os.environ["JAVA_HOME"], "bin", "java") if os.environ.get("JAVA_HOME") else "java"
wanted = class_path_fingerprint(class_path, subprocess.run([java, "-version"], capture_output=True, text=True).stderr)
if archive.exists() and made_for.exists() and made_for.read_text() == wanted:
    write_defaults(True)
    sys.exit(0)
write_defaults(False)
print(f"setup: making the driver JVM's class-data archive {archive} (a training run of the jobs, ~2 minutes)")
archives.mkdir(parents=True, exist_ok=True)
staging = Path(tempfile.mkdtemp(prefix="training-", dir=archives))
log = archives / "training.log"
try:
    with log.open("w") as output:
        done = subprocess.run(
            ["spark-submit", "--conf", f"spark.driver.extraJavaOptions=-XX:ArchiveClassesAtExit={staging / 'spark.jsa'}",
             "include/lakefeed_testing/jvm_training.py", str(staging / "work")],
            stdout=output, stderr=subprocess.STDOUT)
    if done.returncode != 0 or not (staging / "spark.jsa").exists():
        print(f"setup: WARNING: the training run failed (exit {done.returncode}, see {log}); jobs start without "
              "a class-data archive", file=sys.stderr)
        sys.exit(0)
    made_for.unlink(missing_ok=True)
    (staging / "spark.jsa").replace(archive)
    made_for.write_text(wanted)
    write_defaults(True)
finally:
    shutil.rmtree(staging, ignore_errors=True)
PY

# Airflow metadata (SQLite under .airflow/) and the pipelines' pools (lakefeed_airflow.pools: created when
# missing, kept as they are when present).
if [ ! -f "$AIRFLOW_HOME/airflow.db" ]; then
  echo "setup: initialising Airflow metadata in $AIRFLOW_HOME"
  airflow db migrate >/dev/null
fi
"$VENV/bin/python" -m lakefeed_airflow.pools >/dev/null
echo "setup: ready ($("$VENV/bin/python" --version), Spark conf at $SPARK_HOME/conf/spark-defaults.conf)"
