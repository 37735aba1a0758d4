"""Shared fixtures: one local Spark session with real Delta for the whole run, fresh folders per test."""

from __future__ import annotations

import logging
import os
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
VENV_BIN = Path(sys.executable).parent
# spark-submit and Python workers must come from this interpreter's environment.
os.environ["PATH"] = f"{VENV_BIN}{os.pathsep}{os.environ.get('PATH', '')}"
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")


# py4j logs "Closing down clientserver connection" at interpreter exit, after pytest closed its streams.
logging.getLogger("py4j").setLevel(logging.WARNING)


@pytest.fixture(scope="session")
def spark():
    from lakefeed.spark import get_session

    session = get_session(
        "lakefeed-tests",
        master="local[2]",
        extra={"spark.ui.enabled": "false", "spark.sql.shuffle.partitions": "2",
               "spark.driver.memory": "2g"},
    )
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()


@pytest.fixture(scope="session")
def azurite(tmp_path_factory):
    """A real Azurite blob emulator on 127.0.0.1 (npm package pinned in package.json)."""
    from tests.azurite import start_azurite, stop_azurite

    emulator = start_azurite(tmp_path_factory.mktemp("azurite"))
    yield emulator
    stop_azurite(emulator)
