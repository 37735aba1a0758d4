"""The exit-code contract every spark-submit entry point shares (lakefeed.jobs), where it needs no Spark."""

from __future__ import annotations

import json
import logging

import pytest

from lakefeed.errors import FeedCorruptError
from lakefeed.jobs import REFUSED_SUFFIX, run_spark_job


@pytest.fixture
def job_logging():
    """The logging set-up a job makes (its root handler, levels) undone after the test."""
    root, azure = logging.getLogger(), logging.getLogger("azure")
    handlers, level, azure_level = root.handlers[:], root.level, azure.level
    yield
    root.handlers[:] = handlers
    root.setLevel(level)
    azure.setLevel(azure_level)


def test_a_refusal_before_spark_exits_2_and_the_azure_sdks_request_log_stays_out(tmp_path, capsys, job_logging):
    """A refusal in ``prepare`` exits 2 with its reason beside the summary; the Azure SDK's log of every HTTP
    request (INFO, ~30 lines each) is not in the job's output, its warnings are."""

    def prepare() -> None:
        logging.getLogger("azure.core.pipeline.policies.http_logging_policy").info("Request URL: 'http://x/c/f'")
        logging.getLogger("azure.storage.blob").warning("throttled, retrying")
        raise FeedCorruptError("f.avro: not an Avro file")

    summary = tmp_path / "1.json"
    assert run_spark_job("t", str(summary), prepare, lambda spark, prepared: None) == 2
    assert json.loads((tmp_path / f"1{REFUSED_SUFFIX}").read_text())["error"].endswith("f.avro: not an Avro file")
    logged = capsys.readouterr().err
    assert "throttled, retrying" in logged and "Request URL" not in logged
