"""What a job reads and writes, as lineage: the datasets by their OpenLineage identity and what one job applied.

Pure (no Airflow, no OpenLineage client): the plan declares each job's datasets (:class:`JobLineage`, one
per spark-submit, from ``Feed.job_lineage``) before the job runs; each feed's ``lineage_outcome`` (in its
summary module) reads what the job's summary reports once it finished (:class:`JobOutcome`): the range
applied, its counts, the Delta version of each commit it made and the rows and bytes read and written. ``lakefeed_airflow.lineage`` turns both into OpenLineage events.

Datasets are named as the OpenLineage naming spec (https://openlineage.io/docs/spec/naming) names them,
one per Delta table root or feed folder, whatever spelling the configuration used:

- a local path or ``file:`` URL: namespace ``file``, name the absolute path;
- Azure storage (``az://``, ``abfs[s]://``, ``wasb[s]://``): namespace
  ``abfss://<container>@<account>.dfs.core.windows.net`` (the account from the URL, else the one the
  connection names; ``abfss://<container>`` when neither does), name the path in the container (``/`` at
  its root). A ``wasb[s]://`` URL is named as its ``abfss://`` form too, on purpose: the spec's ``wasbs``
  namespace would make one table two datasets, as the jobs open every form through the same account;
- any other URL: namespace ``<scheme>://<authority>``, name the path (``/`` at its root).

A query string (a SAS token) is never part of a name.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field, replace
from typing import Any
from urllib.parse import unquote, urlsplit

from lakefeed.documents import counted_keys


@dataclass(frozen=True)
class DatasetRef:
    """A dataset's OpenLineage identity."""

    namespace: str
    name: str


def dataset_ref(location: str, account: str | None = None) -> DatasetRef:
    """The identity of the table or folder at ``location`` (see the module docstring); ``account``: the
    storage account of Azure URLs that name none (``az://container/path``)."""
    from lakefeed.azure import azure_location, is_azure_url

    if is_azure_url(location):
        where = azure_location(location)
        name = where.account or account
        host = f"@{name}.dfs.core.windows.net" if name else ""
        return DatasetRef(f"abfss://{where.container}{host}", where.prefix or "/")  # "/": the container's root
    parts = urlsplit(location)
    if parts.scheme in ("", "file") or os.path.isabs(location):
        path = unquote(parts.path) if parts.scheme == "file" else location
        return DatasetRef("file", os.path.abspath(path).rstrip("/") or "/")
    authority = parts.hostname or ""  # never a user or password the URL may carry
    if parts.port:
        authority += f":{parts.port}"
    return DatasetRef(f"{parts.scheme}://{authority}", unquote(parts.path).strip("/") or "/")


@dataclass(frozen=True)
class JobLineage:
    """What one job of a plan reads and writes, declared before it runs. ``outputs``: the tables it may
    write that the plan knows of; a CockroachDB job also writes one table per topic under ``target_root``,
    which its summary names."""

    feed: str  # blob, cdf or cockroach
    pipeline: str  # the pipeline's id: its checkpoint Variable
    inputs: list[str]
    outputs: list[str]
    target_root: str | None = None
    account: str | None = None  # the storage account of its connection, for Azure URLs that name none

    @property
    def locations(self) -> list[str]:
        return [*self.inputs, *self.outputs, *([self.target_root] if self.target_root else [])]

    def with_account(self, account: str | None) -> JobLineage:
        return replace(self, account=account)

    def to_dict(self) -> dict[str, Any]:
        return {
            "feed": self.feed,
            "pipeline": self.pipeline,
            "inputs": list(self.inputs),
            "outputs": list(self.outputs),
            "targetRoot": self.target_root,
            "account": self.account,
        }

    @classmethod
    def from_dict(cls, document: dict[str, Any]) -> JobLineage:
        return cls(
            feed=str(document["feed"]),
            pipeline=str(document["pipeline"]),
            inputs=[str(i) for i in document.get("inputs") or []],
            outputs=[str(o) for o in document.get("outputs") or []],
            target_root=document.get("targetRoot"),
            account=document.get("account"),
        )


def needs_account(locations: list[str]) -> bool:
    """Whether an Azure URL among ``locations`` names no storage account (``az://container/path``)."""
    from lakefeed.azure import azure_location, is_azure_url

    return any(is_azure_url(location) and not azure_location(location).account for location in locations)


def _container_path(location: str) -> tuple[str, str]:
    from lakefeed.azure import azure_location

    where = azure_location(location)
    return where.container, where.prefix


def account_lookup(lineages: list[JobLineage]) -> dict[tuple[str, str], str]:
    """The storage account of each Azure location the jobs named, by ``(container, path)``: their connection's."""
    from lakefeed.azure import is_azure_url

    return {
        _container_path(location): lineage.account
        for lineage in lineages
        if lineage.account
        for location in lineage.locations
        if is_azure_url(location)
    }


def ref_in(accounts: dict[tuple[str, str], str], location: str) -> DatasetRef:
    """The identity of ``location``; an account-less Azure URL takes the account of the location the jobs named
    that holds it (the longest such), else of its container when the jobs named it with one account only."""
    from lakefeed.azure import is_azure_url

    if not is_azure_url(location):
        return dataset_ref(location)
    container, path = _container_path(location)
    holders = [
        (len(prefix), account)
        for (named, prefix), account in accounts.items()
        if named == container and (not prefix or path == prefix or path.startswith(prefix + "/"))
    ]
    in_container = {account for (named, _), account in accounts.items() if named == container}
    account = max(holders)[1] if holders else (next(iter(in_container)) if len(in_container) == 1 else None)
    return dataset_ref(location, account)


@dataclass(frozen=True)
class Figures:
    """What a job read from or wrote to one dataset: the Delta version its commit made (or read up to),
    rows and bytes (None: not reported)."""

    location: str
    version: int | None = None
    rows: int | None = None
    size: int | None = None
    files: int | None = None
    replaced: bool = False  # a full refresh replaced the table


@dataclass(frozen=True)
class JobOutcome:
    """What a finished job applied (its summary, as lineage reports it)."""

    applied: dict[str, Any]  # the range: {"unit", and "from"/"through", "windows", "after", "mode"...}
    counts: dict[str, int]  # the job's counts (its summary's counted fields)
    inputs: list[Figures] = field(default_factory=list)
    outputs: list[Figures] = field(default_factory=list)


def integer(value: Any) -> int | None:
    """``value`` when it is an int (not a bool), else None: a summary's figure as lineage reports it."""
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def total(*values: Any) -> int | None:
    """The sum of the ints among ``values`` (None when there are none)."""
    ints = [v for v in map(integer, values) if v is not None]
    return sum(ints) if ints else None


def committed_versions(summary: dict[str, Any], account: str | None = None) -> dict[DatasetRef, int]:
    """The newest version of each table the job committed to (its summary's ``commits``)."""
    versions: dict[DatasetRef, int] = {}
    for commit in summary.get("commits") or []:
        if isinstance(commit, dict) and integer(commit.get("version")) is not None and commit.get("table"):
            ref = dataset_ref(str(commit["table"]), account)
            versions[ref] = max(versions.get(ref, -1), int(commit["version"]))
    return versions


def counts_of(summary: dict[str, Any], summary_type: type) -> dict[str, int]:
    """A job's counts: its summary document's :func:`~lakefeed.documents.counted` fields."""
    return {key: summary[key] for key in counted_keys(summary_type) if integer(summary.get(key)) is not None}


class Written:
    """Figures of the tables one job wrote, each with the version of its newest commit to it."""

    def __init__(self, summary: dict[str, Any], account: str | None):
        self.versions = committed_versions(summary, account)
        self.account = account

    def __call__(
        self, location: str, rows: int | None = None, size: int | None = None, replaced: bool = False
    ) -> Figures:
        return Figures(location, self.versions.get(dataset_ref(location, self.account)), rows, size, replaced=replaced)
