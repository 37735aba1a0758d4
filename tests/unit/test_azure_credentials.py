import pytest

from lakefeed.azure import (
    ACCOUNT_KEY,
    ACCOUNT_NAME,
    CONNECTION_STRING,
    CREDENTIAL_ENV,
    SAS_TOKEN,
    AzureLocation,
    adlfs_options,
    azure_location,
    credential_env,
    delta_storage_options,
    executor_env_settings,
    fsspec_url,
)


def test_connection_string_wins():
    env = credential_env(login="acct", password="k", host=None, extra={"connection_string": "AccountName=x;"})
    assert env == {CONNECTION_STRING: "AccountName=x;"}


def test_account_key_on_azure_and_on_a_custom_endpoint():
    assert credential_env(login="acct", password="k3y", host=None, extra={}) == {
        ACCOUNT_NAME: "acct",
        ACCOUNT_KEY: "k3y",
    }
    env = credential_env(login="acct", password="k3y", host="http://127.0.0.1:10000/acct", extra={})
    assert env == {
        CONNECTION_STRING: "DefaultEndpointsProtocol=http;AccountName=acct;AccountKey=k3y;"
        "BlobEndpoint=http://127.0.0.1:10000/acct;"
    }


def test_sas_token_and_service_principal():
    assert credential_env(login="acct", password=None, host=None, extra={"sas_token": "sv=x"}) == {
        ACCOUNT_NAME: "acct",
        SAS_TOKEN: "sv=x",
    }
    env = credential_env(
        login="app-id", password="s3cret", host="https://acct.blob.core.windows.net", extra={"tenant_id": "t"}
    )
    assert env["AZURE_STORAGE_TENANT_ID"] == "t" and env["AZURE_STORAGE_CLIENT_SECRET"] == "s3cret"
    assert env[ACCOUNT_NAME] == "acct" and env["AZURE_STORAGE_CLIENT_ID"] == "app-id"  # not the client id


def test_a_sas_token_on_a_custom_endpoint_travels_in_a_connection_string():
    env = credential_env(
        login="acct", password=None, host="http://127.0.0.1:10000/acct", extra={"sas_token": "?sv=x&sig=y"}
    )
    assert env == {
        CONNECTION_STRING: "DefaultEndpointsProtocol=http;AccountName=acct;SharedAccessSignature=sv=x&sig=y;"
        "BlobEndpoint=http://127.0.0.1:10000/acct;"
    }


# Each connection form, and what adlfs and delta-rs are given for it.
CLIENT_FORMS = [
    (
        {ACCOUNT_NAME: "acct", ACCOUNT_KEY: "k3y"},
        {"account_name": "acct", "account_key": "k3y"},
        {"account_name": "acct", "account_key": "k3y"},
    ),
    (
        {ACCOUNT_NAME: "acct", SAS_TOKEN: "?sv=x&sig=y"},
        {"account_name": "acct", "sas_token": "?sv=x&sig=y"},
        {"account_name": "acct", "sas_token": "sv=x&sig=y"},
    ),
    (
        {
            ACCOUNT_NAME: "acct",
            "AZURE_STORAGE_TENANT_ID": "t",
            "AZURE_STORAGE_CLIENT_ID": "c",
            "AZURE_STORAGE_CLIENT_SECRET": "s",
        },
        {"account_name": "acct", "tenant_id": "t", "client_id": "c", "client_secret": "s"},
        {"account_name": "acct", "tenant_id": "t", "client_id": "c", "client_secret": "s"},
    ),
    (
        {
            CONNECTION_STRING: "DefaultEndpointsProtocol=http;AccountName=acct;AccountKey=a2V5==;"
            "BlobEndpoint=http://127.0.0.1:10000/acct/;"
        },
        {
            "connection_string": "DefaultEndpointsProtocol=http;AccountName=acct;AccountKey=a2V5==;"
            "BlobEndpoint=http://127.0.0.1:10000/acct/;"
        },
        {
            "account_name": "acct",
            "account_key": "a2V5==",
            "endpoint": "http://127.0.0.1:10000/acct",
            "allow_http": "true",
        },
    ),
    (
        {CONNECTION_STRING: "AccountName=acct;SharedAccessSignature=sv=x&sig=y"},
        {"connection_string": "AccountName=acct;SharedAccessSignature=sv=x&sig=y"},
        {"account_name": "acct", "sas_token": "sv=x&sig=y"},
    ),
    ({ACCOUNT_NAME: "acct"}, {"account_name": "acct"}, {"account_name": "acct"}),  # managed identity
]


@pytest.mark.parametrize("credentials, adlfs, delta", CLIENT_FORMS)
def test_every_client_gets_the_connections_credential_in_its_own_terms(credentials, adlfs, delta):
    assert adlfs_options(credentials) == adlfs
    assert delta_storage_options(credentials) == delta


def test_a_store_gives_its_credentials_to_adlfs_and_delta_rs_and_never_shows_them(tmp_path):
    from lakefeed.storage import Store

    store = Store(
        "abfss://lake@acct.dfs.core.windows.net/orders", credentials={ACCOUNT_NAME: "acct", ACCOUNT_KEY: "k3y"}
    )
    assert store.fs.account_name == "acct" and store.path("_delta_log") == "lake/orders/_delta_log"
    assert store.delta_storage_options == {"account_name": "acct", "account_key": "k3y"}
    assert "k3y" not in repr(store)
    local = Store(str(tmp_path), credentials={ACCOUNT_NAME: "acct", ACCOUNT_KEY: "k3y"})
    assert local.is_local and local.delta_storage_options is None


def test_executor_env_only_forwards_credentials_present():
    assert executor_env_settings({ACCOUNT_NAME: "a", "HOME": "/root"}) == {f"spark.executorEnv.{ACCOUNT_NAME}": "a"}


def test_an_azure_location_reads_the_same_in_every_form_at_any_depth():
    forms = {
        "az://$blobchangefeed": AzureLocation("$blobchangefeed", "", None),
        "az://changefeeds/": AzureLocation("changefeeds", "", None),
        "az://changefeeds/shop/eu//west": AzureLocation("changefeeds", "shop/eu/west", None),
        "abfss://$blobchangefeed@acct.dfs.core.windows.net/x/y": AzureLocation("$blobchangefeed", "x/y", "acct"),
        "abfs://lake@acct.dfs.core.windows.net": AzureLocation("lake", "", "acct"),
        "wasbs://lake@acct.blob.core.windows.net/a": AzureLocation("lake", "a", "acct"),
        "wasb://lake@acct.blob.core.windows.net/": AzureLocation("lake", "", "acct"),
    }
    assert {url: azure_location(url) for url in forms} == forms
    for not_azure in ("/local/feed", "file:///x", "s3://bucket/x"):
        with pytest.raises(ValueError, match="not an Azure storage URL"):
            azure_location(not_azure)
    with pytest.raises(ValueError, match="no container"):
        azure_location("abfss://@acct.dfs.core.windows.net/x")


def test_adlfs_opens_the_hadoop_wasb_form_as_abfs():
    assert fsspec_url("wasbs://lake@acct.blob.core.windows.net/a/b") == "abfs://lake@acct.blob.core.windows.net/a/b"
    assert fsspec_url("az://lake/a") == "az://lake/a" and fsspec_url("/tmp/x") == "/tmp/x"


def test_spark_redaction_covers_every_secret_we_forward():
    import re

    from lakefeed.azure import CLIENT_SECRET, REDACTION_REGEX

    pattern = re.compile(REDACTION_REGEX)  # Spark applies it to conf keys and values alike
    for name in (CONNECTION_STRING, ACCOUNT_KEY, SAS_TOKEN, CLIENT_SECRET):
        assert pattern.search(f"spark.executorEnv.{name}"), name
    assert pattern.search("DefaultEndpointsProtocol=https;AccountName=a;AccountKey=abc==;")


@pytest.mark.parametrize(
    "name",
    [
        "spark.hadoop.fs.azure.account.key.acct.dfs.core.windows.net",  # before: not redacted
        "fs.azure.account.key.acct.blob.core.windows.net",
        "spark.hadoop.fs.azure.sas.container.acct.blob.core.windows.net",
        "spark.hadoop.fs.azure.sas.fixed.token",
        "spark.hadoop.fs.azure.account.oauth2.client.secret.acct.dfs.core.windows.net",
        "spark.hadoop.fs.s3a.secret.key",
        "spark.hadoop.fs.s3a.access.key",
        "spark.hadoop.fs.gs.auth.service.account.private.key",
        "spark.executorEnv.AZURE_STORAGE_CONNECTION_STRING",
        "spark.executorEnv.AZURE_STORAGE_ACCOUNT_KEY",
        "spark.executorEnv.AZURE_STORAGE_SAS_TOKEN",
        "spark.executorEnv.AZURE_STORAGE_CLIENT_SECRET",
    ],
)
def test_every_credential_setting_is_redacted(name):
    import re

    from lakefeed.azure import REDACTION_REGEX

    assert re.search(REDACTION_REGEX, name)


@pytest.mark.parametrize(
    "value",
    [
        "DefaultEndpointsProtocol=https;AccountName=a;AccountKey=abc==;",
        "sv=2022-11-02&ss=b&srt=co&sp=rl&se=2030-01-01&sig=abc%2Bdef%3D",
        "?sv=2022&sig=abc",
    ],
)
def test_credential_values_are_redacted(value):
    import re

    from lakefeed.azure import REDACTION_REGEX

    assert re.search(REDACTION_REGEX, value)


@pytest.mark.parametrize(
    "name",
    [
        "spark.sql.shuffle.partitions",
        "spark.sql.session.timeZone",
        "spark.executorEnv.AZURE_STORAGE_ACCOUNT_NAME",
        "spark.hadoop.fs.azure.account.auth.type.acct.dfs.core.windows.net",
        "spark.hadoop.fs.azure.account.oauth2.client.id.acct.dfs.core.windows.net",
        "spark.eventLog.dir",
        "spark.databricks.delta.schema.autoMerge.enabled",
        "spark.sql.ansi.enabled",
    ],
)
def test_ordinary_settings_are_not_redacted(name):
    import re

    from lakefeed.azure import REDACTION_REGEX

    assert not re.search(REDACTION_REGEX, name)


def test_credentials_in_spark_conf_are_refused_by_key_never_printed():
    from lakefeed.blob.config import BlobPipelineConfig
    from lakefeed.errors import ConfigError

    secret = "c2VjcmV0LWtleQ=="
    with pytest.raises(
        ConfigError,
        match=r"spark_conf\['spark.hadoop.fs.azure.account.key.a.dfs.core.windows.net'\] "
        r"looks like a credential",
    ) as refused:
        BlobPipelineConfig.from_mapping(
            {"spark_conf": {"spark.hadoop.fs.azure.account.key.a.dfs.core.windows.net": secret}}
        )
    assert secret not in str(refused.value)
    with pytest.raises(ConfigError) as refused:
        BlobPipelineConfig.from_mapping({"spark_conf": {"spark.x": {"nested": secret}}})
    assert secret not in str(refused.value)
    assert BlobPipelineConfig.from_mapping({"spark_conf": {"spark.sql.shuffle.partitions": 4}}).spark_conf


def test_stores_opened_within_a_connections_scope_take_its_credential(monkeypatch):
    import threading

    from lakefeed.errors import FeedConfigError
    from lakefeed.storage import Store, credentials_scope

    for name in CREDENTIAL_ENV:
        monkeypatch.delenv(name, raising=False)
    url = "az://lake/orders"
    with pytest.raises(FeedConfigError, match=f"no credentials to read {url}"):
        Store(url)
    seen = {}
    with credentials_scope({ACCOUNT_NAME: "acct", ACCOUNT_KEY: "k3y"}):
        with credentials_scope(None):  # a step with no connection of its own keeps the enclosing one
            assert Store(url).delta_storage_options == {"account_name": "acct", "account_key": "k3y"}
        # Another thread (a concurrent trigger check) does not see this scope.
        thread = threading.Thread(target=lambda: seen.setdefault("outside", _refused(url)))
        thread.start()
        thread.join()
    assert seen["outside"] and _refused(url)


def _refused(url: str) -> bool:
    from lakefeed.errors import FeedConfigError
    from lakefeed.storage import Store

    try:
        Store(url)
    except FeedConfigError:
        return True
    return False


def test_a_credential_of_another_account_is_never_used_for_a_url_naming_one(monkeypatch):
    from lakefeed.errors import FeedConfigError
    from lakefeed.storage import Store, credentials_scope

    for name in CREDENTIAL_ENV:
        monkeypatch.delenv(name, raising=False)
    lake = "abfss://tables@lakeacct.dfs.core.windows.net/orders"
    with pytest.raises(
        FeedConfigError,
        match="is in the storage account lakeacct, but the credential given for it is for the account feedacct",
    ):
        Store(lake, credentials={ACCOUNT_NAME: "feedacct", ACCOUNT_KEY: "k"})
    with credentials_scope({ACCOUNT_NAME: "feedacct", ACCOUNT_KEY: "k"}):
        with pytest.raises(FeedConfigError, match=f"no credentials to read {lake}"):
            Store(lake)  # the feed's connection is not the lake's
        assert Store("az://tables/orders").delta_storage_options["account_name"] == "feedacct"
    monkeypatch.setenv(CONNECTION_STRING, "AccountName=LakeAcct;AccountKey=a2V5")  # accounts ignore case
    assert Store(lake).delta_storage_options["account_key"] == "a2V5"


def test_delta_rs_opens_the_wasb_form_on_the_dfs_host():
    from lakefeed.azure import delta_rs_url

    assert delta_rs_url("wasbs://lake@acct.blob.core.windows.net/a/b") == "abfss://lake@acct.dfs.core.windows.net/a/b"
    assert delta_rs_url("az://lake/a") == "az://lake/a" and delta_rs_url("/tmp/t") == "/tmp/t"


AZURITE_STRING = (
    "DefaultEndpointsProtocol=http;AccountName=acct;AccountKey=a2V5;BlobEndpoint=http://127.0.0.1:10000/acct;"
)


@pytest.mark.parametrize(
    "url",
    [
        "az://lake/a/b",
        "abfs://lake/a/b",
        "abfss://lake@acct.dfs.core.windows.net/a/b",
        "wasbs://lake@acct.blob.core.windows.net/a/b/",
        "wasb://lake@acct.blob.core.windows.net/a/b",
    ],
)
def test_spark_opens_every_form_as_abfs_on_the_dfs_host(url):
    from lakefeed.azure import hadoop_url

    key = {ACCOUNT_NAME: "acct", ACCOUNT_KEY: "a2V5"}
    secure = "abfs" if url.startswith(("abfs:", "wasb:")) else "abfss"
    assert hadoop_url(url, key) == f"{secure}://lake@acct.dfs.core.windows.net/a/b"
    # An emulator's http endpoint: plain abfs, on the host its settings point at the emulator.
    assert hadoop_url(url, {CONNECTION_STRING: AZURITE_STRING}) == "abfs://lake@acct.dfs.core.windows.net/a/b"


def test_spark_urls_at_a_containers_root_in_other_clouds_and_for_other_accounts():
    from lakefeed.azure import hadoop_url

    assert hadoop_url("az://lake", {ACCOUNT_NAME: "acct"}) == "abfss://lake@acct.dfs.core.windows.net/"
    china = {CONNECTION_STRING: "AccountName=acct;AccountKey=k;BlobEndpoint=https://acct.blob.core.chinacloudapi.cn/"}
    assert hadoop_url("az://lake/t", china) == "abfss://lake@acct.dfs.core.chinacloudapi.cn/t"
    assert (
        hadoop_url("wasbs://lake@acct.blob.core.chinacloudapi.cn/t", {})
        == "abfss://lake@acct.dfs.core.chinacloudapi.cn/t"
    )
    # A URL naming another account keeps it, and no emulator endpoint of the credential's account applies.
    assert (
        hadoop_url("abfss://lake@other.dfs.core.windows.net/t", {CONNECTION_STRING: AZURITE_STRING})
        == "abfss://lake@other.dfs.core.windows.net/t"
    )
    assert hadoop_url("/data/t", {}) == "/data/t" and hadoop_url("file:///data/t", {}) == "file:///data/t"
    with pytest.raises(ValueError, match="az://lake/t names no storage account.*wasb_conn_id"):
        hadoop_url("az://lake/t", {})


def test_hadoop_settings_for_each_credential_form():
    from lakefeed.azure import CLIENT_ID, CLIENT_SECRET, TENANT_ID, hadoop_settings

    hosts = ("acct.dfs.core.windows.net", "acct.blob.core.windows.net")
    key = hadoop_settings({ACCOUNT_NAME: "acct", ACCOUNT_KEY: "a2V5"})
    assert key == {
        **{f"fs.azure.account.auth.type.{h}": "SharedKey" for h in hosts},
        **{f"fs.azure.account.key.{h}": "a2V5" for h in hosts},
        "fs.azure.metrics.collection.enabled": "false",  # no metrics sent at exit
    }
    sas = hadoop_settings({ACCOUNT_NAME: "acct", SAS_TOKEN: "?sv=1&sig=x"})
    assert {sas[f"fs.azure.sas.fixed.token.{h}"] for h in hosts} == {"sv=1&sig=x"}
    assert {sas[f"fs.azure.account.auth.type.{h}"] for h in hosts} == {"SAS"}
    principal = hadoop_settings({ACCOUNT_NAME: "acct", TENANT_ID: "t1", CLIENT_ID: "c1", CLIENT_SECRET: "s1"})
    host = hosts[0]
    assert principal[f"fs.azure.account.auth.type.{host}"] == "OAuth"
    assert (
        principal[f"fs.azure.account.oauth2.client.endpoint.{host}"]
        == "https://login.microsoftonline.com/t1/oauth2/token"
    )
    assert (
        principal[f"fs.azure.account.oauth2.client.id.{host}"],
        principal[f"fs.azure.account.oauth2.client.secret.{host}"],
    ) == ("c1", "s1")
    # Managed identity (the account only) and no credential: the cluster's own configuration decides.
    assert hadoop_settings({ACCOUNT_NAME: "acct"}) == {} and hadoop_settings({}) == {}
    emulator = hadoop_settings({CONNECTION_STRING: AZURITE_STRING})
    assert emulator["fs.azure.abfs.endpoint"] == "127.0.0.1:10000" and emulator["fs.azure.always.use.https"] == "false"
    assert emulator[f"fs.azure.account.key.{host}"] == "a2V5"


@pytest.mark.parametrize(
    "credentials",
    [
        {ACCOUNT_NAME: "acct", ACCOUNT_KEY: "c2VjcmV0a2V5"},
        {ACCOUNT_NAME: "acct", SAS_TOKEN: "sv=1&sig=c2VjcmV0"},
        {
            ACCOUNT_NAME: "acct",
            "AZURE_STORAGE_TENANT_ID": "t",
            "AZURE_STORAGE_CLIENT_ID": "c",
            "AZURE_STORAGE_CLIENT_SECRET": "c2VjcmV0",
        },
        {CONNECTION_STRING: AZURITE_STRING},
    ],
)
def test_every_hadoop_setting_holding_a_secret_is_redacted_by_spark(credentials):
    import re

    from lakefeed.azure import REDACTION_REGEX, credential_fields, hadoop_settings

    fields = credential_fields(credentials)
    secrets = {fields.key, fields.sas, fields.client_secret} - {None}
    settings = hadoop_settings(credentials)
    holding = [name for name, value in settings.items() if value in secrets]
    assert holding and all(re.search(REDACTION_REGEX, name) for name in holding), holding
    assert not any(re.search(REDACTION_REGEX, name) for name, value in settings.items() if value not in secrets)
