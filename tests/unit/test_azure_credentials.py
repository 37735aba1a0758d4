from lakefeed.azure import (
    ACCOUNT_KEY,
    ACCOUNT_NAME,
    CONNECTION_STRING,
    SAS_TOKEN,
    container_and_prefix,
    credential_env,
    executor_env_settings,
)

import pytest


def test_connection_string_wins():
    env = credential_env(login="acct", password="k", host=None, extra={"connection_string": "AccountName=x;"})
    assert env == {CONNECTION_STRING: "AccountName=x;"}


def test_account_key_on_azure_and_on_a_custom_endpoint():
    assert credential_env(login="acct", password="k3y", host=None, extra={}) == {ACCOUNT_NAME: "acct", ACCOUNT_KEY: "k3y"}
    env = credential_env(login="acct", password="k3y", host="http://127.0.0.1:10000/acct", extra={})
    assert env == {CONNECTION_STRING: "DefaultEndpointsProtocol=http;AccountName=acct;AccountKey=k3y;"
                                      "BlobEndpoint=http://127.0.0.1:10000/acct;"}


def test_sas_token_and_service_principal():
    assert credential_env(login="acct", password=None, host=None, extra={"sas_token": "sv=x"}) == {
        ACCOUNT_NAME: "acct", SAS_TOKEN: "sv=x"}
    env = credential_env(login="app-id", password="s3cret", host="https://acct.blob.core.windows.net",
                         extra={"tenant_id": "t"})
    assert env["AZURE_STORAGE_TENANT_ID"] == "t" and env["AZURE_STORAGE_CLIENT_SECRET"] == "s3cret"


def test_executor_env_only_forwards_credentials_present():
    assert executor_env_settings({ACCOUNT_NAME: "a", "HOME": "/root"}) == {f"spark.executorEnv.{ACCOUNT_NAME}": "a"}


def test_container_and_prefix():
    assert container_and_prefix("az://$blobchangefeed") == ("$blobchangefeed", "")
    assert container_and_prefix("abfss://$blobchangefeed@acct.dfs.core.windows.net/x/y") == ("$blobchangefeed", "x/y")
    with pytest.raises(ValueError):
        container_and_prefix("/local/feed")


def test_spark_redaction_covers_every_secret_we_forward():
    import re

    from lakefeed.azure import CLIENT_SECRET, REDACTION_REGEX

    pattern = re.compile(REDACTION_REGEX)  # Spark applies it to conf keys and values alike
    for name in (CONNECTION_STRING, ACCOUNT_KEY, SAS_TOKEN, CLIENT_SECRET):
        assert pattern.search(f"spark.executorEnv.{name}"), name
    assert pattern.search("DefaultEndpointsProtocol=https;AccountName=a;AccountKey=abc==;")
