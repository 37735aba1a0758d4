"""What the OpenLineage provider gets from lakefeed's tasks: the apply operator's lineage before and after its
job (declared datasets; then versions, figures and the ``lakefeed_job`` facet), and a commit step's outputs and
``lakefeed_run`` facet, serialised as the client sends them."""

from __future__ import annotations

import json
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]

from openlineage.client.serde import Serde  # noqa: E402

from lakefeed.cdf import KEY as CDF  # noqa: E402
from lakefeed.lineage import JobLineage  # noqa: E402
from lakefeed_airflow.lineage import planned_lineage, run_lineage  # noqa: E402
from lakefeed_airflow.operators import LakefeedSparkSubmitOperator  # noqa: E402

DFS = "abfss://lake@acct.dfs.core.windows.net"
LINEAGE = JobLineage(CDF, "cp_orders", ["/src/orders"], [f"{DFS}/silver/orders"]).to_dict()
SUMMARY = {
    "source": "/src/orders",
    "target": f"{DFS}/silver/orders",
    "startingVersion": 0,
    "endingVersion": 4,
    "mode": "full-refresh",
    "rowsRead": 12,
    "inserted": 10,
    "updated": 0,
    "deleted": 0,
    "bytesWritten": 2048,
    "commits": [{"table": "wasbs://lake@acct.blob.core.windows.net/silver/orders", "version": 7, "token": "abc"}],
}


def as_json(value) -> dict:
    return json.loads(Serde.to_json(value))


def operator(**kwargs) -> LakefeedSparkSubmitOperator:
    return LakefeedSparkSubmitOperator(task_id="apply", application="job.py", **kwargs)


def test_a_task_without_declared_lineage_leaves_it_to_the_provider():
    assert operator().get_openlineage_facets_on_start() is None


def test_before_and_after_its_job_the_task_names_the_source_and_target():
    task = operator(lineage=LINEAGE)
    started = task.get_openlineage_facets_on_start()
    assert [(d.namespace, d.name) for d in started.inputs] == [("file", "/src/orders")]
    assert [(d.namespace, d.name) for d in started.outputs] == [(DFS, "silver/orders")]
    assert task.get_openlineage_facets_on_failure(None).outputs == started.outputs
    assert task.get_openlineage_facets_on_complete(None).run_facets == {}  # no summary: the job never finished

    task._summary = SUMMARY
    done = task.get_openlineage_facets_on_complete(None)
    [source] = [as_json(d) for d in done.inputs]
    [target] = [as_json(d) for d in done.outputs]
    assert source["facets"]["version"]["datasetVersion"] == "4"
    assert source["inputFacets"]["inputStatistics"]["rowCount"] == 12
    assert target["facets"]["version"]["datasetVersion"] == "7"  # the commit's, in whatever spelling it came
    assert target["facets"]["lifecycleStateChange"]["lifecycleStateChange"] == "OVERWRITE"
    assert target["facets"]["storage"] == {**target["facets"]["storage"], "storageLayer": "delta"}
    assert {k: target["outputFacets"]["outputStatistics"][k] for k in ("rowCount", "size")} == {
        "rowCount": 10,
        "size": 2048,
    }
    facet = as_json(done.run_facets["lakefeed_job"])
    assert facet["feed"] == "cdf" and facet["pipeline"] == "cp_orders"
    assert facet["applied"] == {"unit": "source version", "from": 0, "through": 4, "mode": "full-refresh", "scdType": 1}
    assert facet["counts"]["rowsRead"] == 12 and facet["counts"]["bytesWritten"] == 2048
    assert facet["_schemaURL"].startswith("urn:lakefeed:openlineage:LakefeedJobRunFacet")
    assert "abc" not in json.dumps(facet)  # commit tokens are not lineage


def test_a_summary_lineage_cannot_read_still_gives_the_declared_datasets():
    task = operator(lineage=JobLineage("blob", "cp", ["/feed"], ["/lake/e", "/lake/s"]).to_dict())
    task._summary = {"windows": ["not a time"]}
    done = task.get_openlineage_facets_on_complete(None)
    assert [d.name for d in done.outputs] == ["/lake/e", "/lake/s"] and done.run_facets == {}


def test_a_plan_without_account_less_azure_urls_reads_no_connection():
    jobs = [JobLineage(CDF, "cp", ["/src"], [f"{DFS}/t"])]
    assert planned_lineage(lambda: jobs, ["a_connection_that_does_not_exist"]) == [jobs[0].to_dict()]


def test_a_job_whose_lineage_cannot_be_declared_still_runs_without_it():
    jobs = [JobLineage(CDF, "cp", ["/src"], ["az://lake/t"])]  # needs the account of a connection that is not there
    assert planned_lineage(lambda: jobs, ["a_connection_that_does_not_exist"]) == [None]


def test_a_commit_steps_lineage_names_the_targets_it_announced_with_their_versions():
    report = {
        "kind": "scheduled",
        "sparkSeconds": 3.5,
        "inserted": 2,  # a run's totals stand in its report as keys of their own
        "pipelines": {"orders": {"appliedBefore": 4, "appliedVersion": 9, "versions": [[5, 9]]}},
        "targetsChanged": [
            {
                "table": "az://lake/silver/orders",
                "uri": "az://lake/silver/orders",
                "extra": {"rowsInserted": 2, "rowsUpdated": 3, "rowsDeleted": 1, "targetVersion": 11},
            }
        ],
    }
    outputs, facets = run_lineage(report, {("lake", "silver"): "acct"})
    [target] = [as_json(d) for d in outputs]
    assert (target["namespace"], target["name"]) == (DFS, "silver/orders")
    assert target["facets"]["version"]["datasetVersion"] == "11"
    assert target["outputFacets"]["outputStatistics"]["rowCount"] == 6
    run = as_json(facets["lakefeed_run"])
    assert run["kind"] == "scheduled" and run["figures"]["sparkSeconds"] == 3.5 and run["figures"]["inserted"] == 2
    assert run["figures"]["pipelines"] == {"orders": {"appliedBefore": 4, "appliedVersion": 9}}
