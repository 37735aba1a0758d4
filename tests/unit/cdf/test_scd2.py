"""Which versions an SCD type 2 target still needs (pure: its table properties and the range), its SCD type
against the run's, and the pipeline setting."""

from __future__ import annotations

import json

import pytest

from lakefeed.cdf.config import CdfConfig
from lakefeed.cdf.pipeline import HOOKS
from lakefeed.cdf.run_plan import CHANGES, CdfJob, CdfPlan
from lakefeed.cdf.scd2 import History, check_scd_type, first_version_to_read, history_properties
from lakefeed.errors import ChangeDataError, ConfigError

T = "/lake/history"


@pytest.mark.parametrize(
    "history, start, end, wanted",
    [
        (History(None, None), 4, 9, 4),  # no target yet: the range as it is
        (History(3, None), 3, 9, 3),  # created, its first range not recorded yet: from its first version
        (History(0, 10), 0, 10, None),  # a replay
        (History(0, 10), 4, 7, None),
        (History(0, 10), 11, 15, 11),  # the next range
        (History(0, 10), 6, 15, 11),  # overlapping: only the versions after the history
        (History(5, 5, snapshot=True), 0, 3, None),  # versions a snapshot holds
        (History(5, 5, snapshot=True), 0, 9, 6),
        (History(5, 8, snapshot=True), 2, 12, 9),
    ],
)
def test_first_version_to_read(history, start, end, wanted):
    assert first_version_to_read(T, start, end, history) == wanted


@pytest.mark.parametrize(
    "history, start, end, refusal",
    [
        (History(5, 10), 0, 4, r"versions 0\.\.4 are older than the history .* starts at source version 5"),
        (History(5, 10), 3, 12, r"versions 3\.\.12 are older"),
        (History(0, 10), 12, 15, r"would leave source versions 11\.\.11 out of the history .* apply 11\.\.15"),
        (History(3, None), 4, 9, r"would leave source versions 3\.\.3 out"),  # the first range may not be applied
        (History(5, 5, snapshot=True), 7, 9, r"would leave source versions 6\.\.6 out"),
    ],
)
def test_out_of_order_and_gaps_are_refused_naming_the_versions(history, start, end, refusal):
    with pytest.raises(ChangeDataError, match=refusal):
        first_version_to_read(T, start, end, history)


def test_history_of_table_properties_and_the_scd_type_check():
    assert History.of(history_properties(4)) == History(4, None)
    assert History.of(history_properties(7, through=7, snapshot=True)) == History(7, 7, snapshot=True)
    check_scd_type(T, 2, None)  # no target yet
    check_scd_type(T, 2, history_properties(4))
    check_scd_type(T, 1, {"delta.enableChangeDataFeed": "true"})
    with pytest.raises(ChangeDataError, match="is an SCD type 1 target and this run writes SCD type 2"):
        check_scd_type(T, 2, {"delta.enableChangeDataFeed": "true"})
    with pytest.raises(ChangeDataError, match="is an SCD type 2 target and this run writes SCD type 1"):
        check_scd_type(T, 1, history_properties(4))


def _config(**pipeline) -> CdfConfig:
    item = {"name": "p", "source_table": "/s", "target_table": "/t", "keys": ["id"], **pipeline}
    return CdfConfig.from_json(json.dumps({"pipelines": [item]}), "lakefeed_cdf_config")


def test_the_pipelines_scd_type_reaches_the_job_only_when_it_is_2():
    def arguments(config: CdfConfig) -> list[str]:
        plan = CdfPlan(kind="scheduled", jobs=[CdfJob("p", CHANGES, start=0, end=3)], pipelines={}, config=config)
        return HOOKS.arguments(plan)[0]

    assert "--scd-type" not in arguments(_config())
    args = arguments(_config(scd_type=2))
    assert args[args.index("--scd-type") + 1] == "2"
    for bad in (3, 0, True):
        with pytest.raises(ConfigError, match="scd_type must be"):
            _config(scd_type=bad)


def test_tombstone_retention_reaches_only_the_first_job_of_a_scheduled_pipeline():
    from lakefeed.cdf.run_plan import PipelinePlan

    config = _config(tombstone_retention_hours=36.5)

    def arguments(kind: str) -> list[list[str]]:
        jobs = [CdfJob("p", CHANGES, start=0, end=3), CdfJob("p", CHANGES, start=4, end=7)]
        seen = PipelinePlan(kind=kind, origin=None, latest=7, source_table_id=None, applied_before=None)
        return HOOKS.arguments(CdfPlan(kind=kind, jobs=jobs, pipelines={"p": seen}, config=config))

    first, second = arguments("scheduled")
    assert first[first.index("--tombstone-retention-hours") + 1] == "36.5"
    assert "--tombstone-retention-hours" not in second
    assert all("--tombstone-retention-hours" not in args for args in arguments("backfill"))
    for bad, refusal in (
        ({"tombstone_retention_hours": 0}, "positive number of hours"),
        ({"tombstone_retention_hours": 2, "scd_type": 2}, "keeps no tombstones"),
    ):
        with pytest.raises(ConfigError, match=refusal):
            _config(**bad)
