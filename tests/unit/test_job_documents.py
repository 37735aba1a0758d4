"""The job's summary and refusal documents: written whole, read back, removed; at a URL they go through a
store that takes the connection's credentials and refuses to open the URL without them (never an Azure
client's fallback to the machine's identity)."""

from __future__ import annotations

import pytest

from lakefeed.azure import CREDENTIAL_ENV
from lakefeed.errors import FeedConfigError
from lakefeed.jobs import read_document, refusal_location, remove_document, write_document


def test_a_local_document_round_trips_and_is_removed(tmp_path):
    location = str(tmp_path / "dag" / "run" / "3.json")
    assert read_document(location) is None
    write_document(location, {"windows": ["2026-01-01T00:10:00Z"], "eventsInserted": 7})
    assert read_document(location) == {"windows": ["2026-01-01T00:10:00Z"], "eventsInserted": 7}
    assert [p.name for p in (tmp_path / "dag" / "run").iterdir()] == ["3.json"]  # no partial left
    remove_document(location)
    remove_document(location)  # gone already: fine
    assert read_document(location) is None
    assert refusal_location(location).endswith("/3.refused.json")


def test_a_document_at_an_azure_url_without_credentials_is_refused_naming_it(monkeypatch):
    for name in CREDENTIAL_ENV:
        monkeypatch.delenv(name, raising=False)
    location = "abfss://lake@acct.dfs.core.windows.net/_lakefeed/summaries/dag/run/0.json"
    with pytest.raises(
        FeedConfigError,
        match="no credentials to read abfss://lake@acct.dfs.core.windows.net/"
        "_lakefeed/summaries/dag/run: set wasb_conn_id",
    ):
        read_document(location)
    with pytest.raises(FeedConfigError, match="no credentials"):
        write_document(location, {"x": 1})
