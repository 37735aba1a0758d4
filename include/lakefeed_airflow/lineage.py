"""OpenLineage events of every lakefeed run, through Airflow's OpenLineage provider.

The provider's listener sends an event when each task starts, completes or fails, once a transport is
configured (``[openlineage] transport``; none: nothing is sent and nothing is loaded). Lakefeed gives it:

- for each spark-submit task (:class:`~lakefeed_airflow.operators.LakefeedSparkSubmitOperator`'s
  ``get_openlineage_facets_on_*``): the inputs (the feed, the CDF source table or the CockroachDB sink)
  and outputs (the Delta targets) the plan declared for that job (:class:`lakefeed.lineage.JobLineage`);
  on completion, from the job's summary, the Delta version each commit made, rows and bytes read and
  written (``inputStatistics``/``outputStatistics``), a full refresh as an ``OVERWRITE`` lifecycle change,
  and the run facet ``lakefeed_job``: the range applied and the job's counts;
- for each commit step that announced a change (:func:`emit_run_lineage`): one more event naming the
  targets whose changes the run announced (their newest version and the rows inserted, updated and deleted) with the run facet
  ``lakefeed_run``: the run's kind and its report's figures (checkpoint before and after, totals).

Datasets are named as :func:`lakefeed.lineage.dataset_ref` names them. The facets' schemas are in
``docs/openlineage/``. Nothing here may fail a task: the provider logs and drops errors of these methods.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import attrs
from openlineage.client.facet_v2 import RunFacet

from lakefeed.feeds import FeedSpec, specs
from lakefeed.lineage import (
    DatasetRef,
    Figures,
    JobLineage,
    JobOutcome,
    account_lookup,
    dataset_ref,
    needs_account,
    ref_in,
)

log = logging.getLogger(__name__)

SCHEMA_BASE = "urn:lakefeed:openlineage:"  # the facets' JSON schemas: docs/openlineage/<Facet>.json
JOB_FACET = "lakefeed_job"
RUN_FACET = "lakefeed_run"


def _spec(lineage: JobLineage) -> FeedSpec:
    """The spec of the feed a job belongs to (its ``lineage_outcome``: what a finished job applied)."""
    return next(spec for spec in specs() if spec.key == lineage.feed)


@attrs.define
class LakefeedJobRunFacet(RunFacet):
    """One job of a lakefeed run: which pipeline, the range it applied and its counts."""

    feed: str
    pipeline: str
    applied: dict[str, Any] = attrs.field(factory=dict)
    counts: dict[str, int] = attrs.field(factory=dict)

    @staticmethod
    def _get_schema() -> str:
        return SCHEMA_BASE + "LakefeedJobRunFacet:1"


@attrs.define
class LakefeedRunFacet(RunFacet):
    """A lakefeed run as its commit step reports it: the kind of run and the report's figures."""

    kind: str
    figures: dict[str, Any] = attrs.field(factory=dict)

    @staticmethod
    def _get_schema() -> str:
        return SCHEMA_BASE + "LakefeedRunFacet:1"


def _storage_facets(version: int | None) -> dict[str, Any]:
    from openlineage.client.facet_v2 import dataset_version_dataset, storage_dataset

    facets: dict[str, Any] = {
        "storage": storage_dataset.StorageDatasetFacet(storageLayer="delta", fileFormat="parquet")
    }
    if version is not None:
        facets["version"] = dataset_version_dataset.DatasetVersionDatasetFacet(datasetVersion=str(version))
    return facets


def _input(ref: DatasetRef, figures: Figures | None = None, delta: bool = False) -> Any:
    from openlineage.client.event_v2 import InputDataset
    from openlineage.client.facet_v2 import input_statistics_input_dataset

    facets = _storage_facets(figures.version if figures else None) if delta else {}
    input_facets: dict[str, Any] = {}
    if figures is not None and (figures.rows, figures.size, figures.files) != (None, None, None):
        input_facets["inputStatistics"] = input_statistics_input_dataset.InputStatisticsInputDatasetFacet(
            rowCount=figures.rows, size=figures.size, fileCount=figures.files
        )
    return InputDataset(namespace=ref.namespace, name=ref.name, facets=facets, inputFacets=input_facets)


def _output(ref: DatasetRef, figures: Figures | None = None) -> Any:
    from openlineage.client.event_v2 import OutputDataset
    from openlineage.client.facet_v2 import lifecycle_state_change_dataset, output_statistics_output_dataset

    facets = _storage_facets(figures.version if figures else None)
    if figures is not None and figures.replaced:
        facets["lifecycleStateChange"] = lifecycle_state_change_dataset.LifecycleStateChangeDatasetFacet(
            lifecycleStateChange=lifecycle_state_change_dataset.LifecycleStateChange.OVERWRITE
        )
    output_facets: dict[str, Any] = {}
    if figures is not None and (figures.rows, figures.size) != (None, None):
        output_facets["outputStatistics"] = output_statistics_output_dataset.OutputStatisticsOutputDatasetFacet(
            rowCount=figures.rows, size=figures.size
        )
    return OutputDataset(namespace=ref.namespace, name=ref.name, facets=facets, outputFacets=output_facets)


def declared_lineage(lineage: JobLineage) -> Any:
    """The ``OperatorLineage`` of a job before it ran (or when it failed): the datasets its plan declared."""
    from airflow.providers.openlineage.extractors import OperatorLineage

    account, delta_input = lineage.account, _spec(lineage).delta_inputs
    return OperatorLineage(
        inputs=[_input(dataset_ref(i, account), delta=delta_input) for i in lineage.inputs],
        outputs=[_output(dataset_ref(o, account)) for o in lineage.outputs],
    )


def completed_lineage(lineage: JobLineage, summary: dict[str, Any]) -> Any:
    """The ``OperatorLineage`` of a finished job: its datasets with what its summary reports, and the
    ``lakefeed_job`` run facet."""
    from airflow.providers.openlineage.extractors import OperatorLineage

    spec = _spec(lineage)
    account, delta_input = lineage.account, spec.delta_inputs
    outcome: JobOutcome = spec.lineage_outcome(lineage, summary)
    outputs: dict[DatasetRef, Any] = {}
    for figures in outcome.outputs:
        outputs.setdefault(dataset_ref(figures.location, account), figures)
    for location in lineage.outputs:  # a declared table the job left alone is still one of its outputs
        outputs.setdefault(dataset_ref(location, account), None)
    return OperatorLineage(
        inputs=[_input(dataset_ref(f.location, account), f, delta=delta_input) for f in outcome.inputs],
        outputs=[_output(ref, figures) for ref, figures in outputs.items()],
        run_facets={
            JOB_FACET: LakefeedJobRunFacet(
                feed=lineage.feed, pipeline=lineage.pipeline, applied=outcome.applied, counts=outcome.counts
            )
        },
    )


def _figures(report: dict[str, Any]) -> dict[str, Any]:
    """A run report's scalar fields, and those of each pipeline of a CDF run's."""
    scalars = (str, int, float, bool, type(None))
    figures: dict[str, Any] = {k: v for k, v in report.items() if isinstance(v, scalars) and k != "kind"}
    pipelines = report.get("pipelines")
    if isinstance(pipelines, dict):
        figures["pipelines"] = {
            name: {k: v for k, v in part.items() if isinstance(v, scalars)}
            for name, part in pipelines.items()
            if isinstance(part, dict)
        }
    return figures


def run_lineage(report: dict[str, Any], accounts: dict[tuple[str, str], str]) -> tuple[list[Any], dict[str, Any]]:
    """The outputs (the targets whose changes the run announced) and run facets of a commit step's report;
    ``accounts``: :func:`lakefeed.lineage.account_lookup` of the run's jobs."""
    outputs = []
    for change in report.get("targetsChanged") or []:
        extra = change.get("extra") or {}
        rows = sum(int(extra.get(k) or 0) for k in ("rowsInserted", "rowsUpdated", "rowsDeleted"))
        version = extra.get("targetVersion")
        figures = Figures(change["table"], version if isinstance(version, int) else None, rows)
        outputs.append(_output(ref_in(accounts, str(change["table"])), figures))
    facet = LakefeedRunFacet(kind=str(report.get("kind")), figures=_figures(report))
    return outputs, {RUN_FACET: facet}


def emit_run_lineage(task_instance: Any, report: dict[str, Any], declared: list[dict[str, Any] | None]) -> None:
    """Send the commit step's lineage (:func:`run_lineage`) as an event of its task, when OpenLineage is on;
    ``declared``: the jobs' lineage documents (:func:`planned_lineage`), for the accounts of ``az://`` URLs."""
    try:  # after the checkpoint moved: lineage never fails the step (a bad transport setting neither)
        from airflow.providers.openlineage.api import emit_dataset_lineage, is_openlineage_active

        if not is_openlineage_active():
            return
        lineages = [JobLineage.from_dict(document) for document in declared if document]
        outputs, facets = run_lineage(report, account_lookup(lineages))
        if outputs:  # an event names at least one dataset: a run that changed no target sends none
            emit_dataset_lineage(outputs=outputs, additional_run_facets=facets, task_instance=task_instance)
    except Exception:
        log.exception("no OpenLineage event for this commit step")


def storage_account(wasb_conn_id: str | None) -> str | None:
    """The storage account a ``wasb`` connection's credential is for, when it says (None without one)."""
    if not wasb_conn_id:
        return None
    from lakefeed.azure import credential_account
    from lakefeed_airflow.wasb_feed import connection_credentials

    return credential_account(connection_credentials(wasb_conn_id))


def planned_lineage(
    lineages: Callable[[], list[JobLineage]], connections: list[str | None]
) -> list[dict[str, Any] | None]:
    """Each job's declared lineage (``lineages()``) as its task gets it: with its connection's storage account
    when one of its Azure URLs names none (read once per connection). Never raises: a job whose lineage
    cannot be declared gets None (its task then sends the provider's events without datasets)."""
    try:
        accounts: dict[str | None, str | None] = {}
        documents: list[dict[str, Any] | None] = []
        for lineage, connection in zip(lineages(), connections, strict=True):
            if needs_account(lineage.locations):
                if connection not in accounts:
                    accounts[connection] = storage_account(connection)
                lineage = lineage.with_account(accounts[connection])
            documents.append(lineage.to_dict())
        return documents
    except Exception:
        log.exception("the jobs of this run declare no lineage")
        return [None] * len(connections)
