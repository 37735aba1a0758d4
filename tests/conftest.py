"""Shared fixtures: one local Spark session with real Delta for the whole run, fresh folders per test."""

from __future__ import annotations

import importlib.util
import logging
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from tests.egress_guard import (
    EGRESS_FOLDER,
    EGRESS_LOG,
    EGRESS_OWNER,
    SITECUSTOMIZE_DIR,
    EgressGuard,
    entries,
    refused_summary,
)
from tests.spark_jars import SHORT_LIVED_JVM, SUITE_SPARK_SETTINGS

ROOT = Path(__file__).resolve().parents[1]
VENV_BIN = Path(sys.executable).parent
# spark-submit and Python workers must come from this interpreter's environment.
os.environ["PATH"] = f"{VENV_BIN}{os.pathsep}{os.environ.get('PATH', '')}"
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
# No Azure client may fall back to a managed identity in tests: the endpoints the Azure SDKs (Python's
# azure-identity, delta-rs's object_store) would ask for a token point at a closed loopback port, so such
# a fallback fails at once, naming that address, instead of reaching for a cloud metadata service.
CLOSED_LOOPBACK = "http://127.0.0.1:9"
for _name in ("AZURE_MSI_ENDPOINT", "IDENTITY_ENDPOINT", "MSI_ENDPOINT", "AZURE_POD_IDENTITY_AUTHORITY_HOST"):
    os.environ[_name] = CLOSED_LOOPBACK
# And no request may leave the loopback range at all: every process the suite starts (Python, delta-rs,
# the JVM) is put under the egress guard (tests/egress_guard.py), which records and refuses it; a test
# during which one was refused fails, and so does the session. Each pytest process (xdist's controller
# and each worker) runs a guard of its own, so a refusal is charged to the test that caused it; their logs
# share one folder, which the controller reads at the end.
os.environ.setdefault(EGRESS_FOLDER, tempfile.mkdtemp(prefix="lakefeed-egress-"))
if os.environ.get(EGRESS_OWNER) != str(os.getpid()):
    _guard = EgressGuard(Path(os.environ[EGRESS_FOLDER]) / f"refused-{os.getpid()}.jsonl").__enter__()
    os.environ.update(_guard.environment())
    os.environ[EGRESS_OWNER] = str(os.getpid())
_spec = importlib.util.spec_from_file_location("_lakefeed_egress", SITECUSTOMIZE_DIR / "sitecustomize.py")
assert _spec is not None and _spec.loader is not None
sys.modules[_spec.name] = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(sys.modules[_spec.name])  # this process too
# Every spark-submit of the suite starts a short-lived JVM (tests/spark_jars.py says why).
os.environ.setdefault("SPARK_SUBMIT_OPTS", SHORT_LIVED_JVM)
# And none of them resolves Delta's and hadoop-azure's packages with Ivy again: the first pytest process
# (xdist's controller; its workers inherit the environment) resolves them once, as an air-gapped
# deployment would be given them (tests/spark_jars.py). The full-stack test keeps --packages.
if "LAKEFEED_JARS_DIR" not in os.environ:
    from lakefeed.spark import delta_package, hadoop_azure_package
    from tests.spark_jars import use_resolved_jars

    os.environ.update(
        use_resolved_jars(
            f"{delta_package()},{hadoop_azure_package()}",
            Path.home() / ".cache" / "lakefeed",
            Path(tempfile.mkdtemp(prefix="lakefeed-spark-conf-")),
            SUITE_SPARK_SETTINGS,
        )
    )

# The test files of many minutes (sequences of DAG runs), longest first. `--dist loadfile
# --no-loadscope-reorder` (the Makefile's) hands files to the workers in collection order, so the long
# ones start at once and the many short ones (unit tests last) fill in around them, instead of one long
# file starting when everything else is done (xdist's default order, by test count, does just that:
# it puts these one- to four-test files last).
LONGEST_FIRST = (  # seconds of each file in a CI rehearsal (2026-11-28, two workers, under load)
    "tests/stack/test_docker_stack.py",  # ~2400: builds the images, then the stack in Docker: start it first
    "tests/integration/test_blob_dag.py",  # ~710
    "tests/integration/test_cdf_dag.py",  # ~690
    "tests/ui/test_ui.py",  # ~620
    "tests/integration/test_cdf_dag_identity.py",  # ~520
    "tests/integration/test_cdf_job.py",  # ~440
    "tests/integration/test_blob_job.py",  # ~360
    "tests/integration/test_cdf_scd2.py",  # ~340
    "tests/integration/test_cdf_dag_scd2.py",  # ~300
    "tests/integration/test_crdb_sql_dag.py",  # ~220
    "tests/integration/test_crdb_job.py",  # ~210
    "tests/integration/test_blob_dag_retention.py",  # ~190
    "tests/integration/test_azure_dags.py",  # ~190
    "tests/integration/test_cdf_dag_tombstones.py",  # ~180
    "tests/integration/test_crdb_dag.py",  # ~170
    "tests/integration/test_azure_crdb_dag.py",  # ~160
    "tests/integration/test_cdf_dag_added_column.py",  # ~150
    "tests/integration/test_crdb_dag_identity.py",  # ~100
)


def _weight(item: pytest.Item) -> tuple[int, int]:
    path = Path(str(item.fspath)).relative_to(ROOT).as_posix()
    if path in LONGEST_FIRST:
        return (0, LONGEST_FIRST.index(path))
    return (1 if item.get_closest_marker("integration") else 2, 0)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    items.sort(key=_weight)  # stable: a file's tests keep their order


@pytest.fixture(autouse=True)
def no_request_leaves_loopback():
    """Fails the test during which this process's egress guard refused a request (a process of this test,
    or one a fixture started and this test used: the entry says where it went)."""
    log = Path(os.environ[EGRESS_LOG])
    offset = log.stat().st_size if log.exists() else 0
    yield
    refused = entries(log, offset)
    if refused:
        pytest.fail(
            f"requests left the loopback range during this test (refused by the egress guard): "
            f"{refused_summary(refused)}",
            pytrace=False,
        )


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    if hasattr(session.config, "workerinput"):
        return  # xdist's controller reports for the whole session
    refused = [
        entry for log in sorted(Path(os.environ[EGRESS_FOLDER]).glob("refused-*.jsonl")) for entry in entries(log)
    ]
    if refused:
        print(f"\negress guard: requests left the loopback range: {refused_summary(refused)}", flush=True)
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


# py4j logs "Closing down clientserver connection" at interpreter exit, after pytest closed its streams.
logging.getLogger("py4j").setLevel(logging.WARNING)


@pytest.fixture(scope="session")
def spark():
    from lakefeed.spark import get_session

    # This JVM runs every in-process test of a worker: the full JIT (a user's own SPARK_SUBMIT_OPTS stay).
    short_lived = (
        os.environ.pop("SPARK_SUBMIT_OPTS") if os.environ.get("SPARK_SUBMIT_OPTS") == SHORT_LIVED_JVM else None
    )
    try:
        session = get_session(
            "lakefeed-tests",
            master="local[2]",
            extra={
                "spark.ui.enabled": "false",
                "spark.sql.shuffle.partitions": "2",
                "spark.driver.memory": "2g",
                **SUITE_SPARK_SETTINGS,
                # Tables on Azurite are read back through hadoop-azure (delta-rs reads no deletion vectors),
                # which is among the resolved jars (LAKEFEED_JARS_DIR, above).
            },
        )
    finally:
        if short_lived is not None:
            os.environ["SPARK_SUBMIT_OPTS"] = short_lived
    session.sparkContext.setLogLevel("ERROR")
    yield session
    gateway = session.sparkContext._gateway
    session.stop()
    # The JVM would end when its stdin (a pipe from this process) closes, but a process started by fork
    # during the run inherits that pipe and can keep it open past this worker: end the JVM here.
    jvm = getattr(gateway, "proc", None)
    if gateway is not None:
        gateway.shutdown()  # py4j's threads stop asking the JVM to free objects
    if jvm is not None:
        jvm.terminate()
        try:
            jvm.wait(timeout=30)
        except subprocess.TimeoutExpired:
            jvm.kill()


@pytest.fixture(scope="session")
def azurite(tmp_path_factory):
    """A real Azurite blob emulator on 127.0.0.1 (npm package pinned in package.json)."""
    from tests.azurite import start_azurite, stop_azurite

    emulator = start_azurite(tmp_path_factory.mktemp("azurite"))
    yield emulator
    stop_azurite(emulator)
