"""Azure storage locations and credentials, for every client, kept out of argv, confs, logs and XCom.

A credential comes from an Airflow ``wasb`` connection (:func:`credential_env` names its parts as adlfs's
environment variables do) and reaches each client in its own terms: adlfs (:func:`adlfs_options`),
delta-rs (:func:`delta_storage_options`) and hadoop-azure's ABFS in Spark (:func:`hadoop_settings`, with
:func:`hadoop_url` for the URL it opens). The orchestrator puts it in the environment of the spark-submit
process (never on its command line, which ``ps`` shows); local-mode workers inherit it,
:func:`lakefeed.spark.get_session` forwards it to cluster executors as ``spark.executorEnv.*`` and sets the
Hadoop settings, all redacted from the Spark UI and logs. Locations are parsed in every form
(:func:`azure_location`): ``az://``, ``abfs[s]://``, ``wasb[s]://``, at a container's root or any depth.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlparse

ACCOUNT_NAME = "AZURE_STORAGE_ACCOUNT_NAME"
CONNECTION_STRING = "AZURE_STORAGE_CONNECTION_STRING"
ACCOUNT_KEY = "AZURE_STORAGE_ACCOUNT_KEY"
SAS_TOKEN = "AZURE_STORAGE_SAS_TOKEN"
CLIENT_ID, CLIENT_SECRET, TENANT_ID = (
    "AZURE_STORAGE_CLIENT_ID",
    "AZURE_STORAGE_CLIENT_SECRET",
    "AZURE_STORAGE_TENANT_ID",
)
CREDENTIAL_ENV = (ACCOUNT_NAME, CONNECTION_STRING, ACCOUNT_KEY, SAS_TOKEN, CLIENT_ID, CLIENT_SECRET, TENANT_ID)
# Spark redacts conf keys and values matching this in its UI, REST API, event log and logs; the DAGs also
# refuse spark_conf settings matching it (a Variable is stored, and --conf arguments show in `ps`). Names:
# fs.azure.account.key.<account>.dfs.core.windows.net, fs.azure.sas.<container>.<account>…,
# fs.azure.sas.fixed.token, fs.azure.account.oauth2.client.secret, fs.s3a.secret.key, spark.executorEnv.
# AZURE_STORAGE_* (CONNECTION_STRING, ACCOUNT_KEY, SAS_TOKEN, CLIENT_SECRET); values: connection strings
# (AccountKey=…) and SAS query strings (sig=…).
SECRET_PATTERNS = (
    "secret",
    "password",
    "passwd",
    "token",
    "credential",
    r"access[._]?key",
    r"account[._]?key",
    r"private[._]?key",
    r"connection[._]?string",
    r"(^|[._])sas([._]|$)",
    r"sas[._]?token",
    r"(^|[?&;])sig=",
)
REDACTION_REGEX = "(?i)" + "|".join(SECRET_PATTERNS)


def credential_env(
    *, login: str | None, password: str | None, host: str | None, extra: dict[str, Any]
) -> dict[str, str]:
    """adlfs environment variables equivalent to an Airflow ``wasb`` connection's fields."""

    def field(name: str) -> str | None:
        return extra.get(name) or extra.get(f"extra__wasb__{name}") or None

    connection_string = field("connection_string")
    if connection_string:
        return {CONNECTION_STRING: connection_string}
    account = login or _account_from_host(host)
    tenant_id = field("tenant_id")
    if tenant_id:  # a service principal: login is its client id, the account is the host's
        return {
            ACCOUNT_NAME: _account_from_host(host) or login or "",
            TENANT_ID: tenant_id,
            CLIENT_ID: login or "",
            CLIENT_SECRET: password or "",
        }
    key = field("shared_access_key") or password or field("account_key")
    sas = "" if key else (field("sas_token") or "")
    if not key and not sas:
        return {ACCOUNT_NAME: account}  # DefaultAzureCredential / managed identity on the executors
    if host and ".blob.core.windows.net" not in host:
        # A custom endpoint (Azurite, sovereign clouds): only a connection string carries it to adlfs.
        endpoint = host.rstrip("/")
        secret = f"AccountKey={key}" if key else f"SharedAccessSignature={sas.lstrip('?')}"
        return {
            CONNECTION_STRING: f"DefaultEndpointsProtocol={urlparse(endpoint).scheme or 'https'};"
            f"AccountName={account};{secret};BlobEndpoint={endpoint};"
        }
    return {ACCOUNT_NAME: account, ACCOUNT_KEY: key} if key else {ACCOUNT_NAME: account, SAS_TOKEN: sas}


def parse_connection_string(text: str) -> dict[str, str]:
    """``Key=Value;…`` pairs of an Azure Storage connection string (values may hold ``=``)."""
    pairs = (part.partition("=") for part in text.split(";") if part.strip())
    return {key.strip(): value.strip() for key, _, value in pairs}


def credential_account(credentials: dict[str, str]) -> str | None:
    """The storage account a credential is for, when it says."""
    if credentials.get(CONNECTION_STRING):
        return parse_connection_string(credentials[CONNECTION_STRING]).get("AccountName") or None
    return credentials.get(ACCOUNT_NAME) or None


def adlfs_options(credentials: dict[str, str]) -> dict[str, str]:
    """``AzureBlobFileSystem`` keyword arguments for credentials named as :func:`credential_env` names them."""
    if credentials.get(CONNECTION_STRING):
        return {"connection_string": credentials[CONNECTION_STRING]}
    options = {
        "account_name": credentials.get(ACCOUNT_NAME),
        "account_key": credentials.get(ACCOUNT_KEY),
        "sas_token": credentials.get(SAS_TOKEN),
        "tenant_id": credentials.get(TENANT_ID),
        "client_id": credentials.get(CLIENT_ID),
        "client_secret": credentials.get(CLIENT_SECRET),
    }
    return {name: value for name, value in options.items() if value}


@dataclass(frozen=True)
class CredentialFields:
    """A credential's parts, whichever form it came in (a connection string or separate names)."""

    account: str | None = None
    key: str | None = None
    sas: str | None = None
    endpoint: str | None = None  # a connection string's BlobEndpoint (Azurite, sovereign clouds)
    tenant_id: str | None = None
    client_id: str | None = None
    client_secret: str | None = None


def credential_fields(credentials: dict[str, str]) -> CredentialFields:
    if credentials.get(CONNECTION_STRING):
        parts = parse_connection_string(credentials[CONNECTION_STRING])
        sas, endpoint = parts.get("SharedAccessSignature"), parts.get("BlobEndpoint")
        return CredentialFields(
            account=parts.get("AccountName") or None,
            key=parts.get("AccountKey") or None,
            sas=sas.lstrip("?") if sas else None,
            endpoint=endpoint.rstrip("/") if endpoint else None,
        )
    sas = credentials.get(SAS_TOKEN)
    return CredentialFields(
        account=credentials.get(ACCOUNT_NAME) or None,
        key=credentials.get(ACCOUNT_KEY) or None,
        sas=sas.lstrip("?") if sas else None,
        tenant_id=credentials.get(TENANT_ID) or None,
        client_id=credentials.get(CLIENT_ID) or None,
        client_secret=credentials.get(CLIENT_SECRET) or None,
    )


def delta_storage_options(credentials: dict[str, str]) -> dict[str, str]:
    """delta-rs ``storage_options`` (object_store's Azure keys) for the same credentials. A connection
    string's ``BlobEndpoint`` (Azurite, sovereign clouds) becomes ``endpoint`` (``allow_http`` for http)."""
    fields = credential_fields(credentials)
    endpoint = fields.endpoint
    options = {
        "account_name": fields.account,
        "account_key": fields.key,
        "sas_token": fields.sas,
        "tenant_id": fields.tenant_id,
        "client_id": fields.client_id,
        "client_secret": fields.client_secret,
        "endpoint": endpoint,
        "allow_http": "true" if endpoint and endpoint.startswith("http://") else None,
    }
    return {name: value for name, value in options.items() if value}


# Hadoop's Azure filesystem (hadoop-azure's ABFS; its WASB driver is gone from Hadoop 3.5) opens
# abfs[s]://<container>@<account>.dfs.<suffix>/<path>. Its settings are keyed by that host.
DEFAULT_SUFFIX = "core.windows.net"
CLIENT_CREDENTIALS_PROVIDER = "org.apache.hadoop.fs.azurebfs.oauth2.ClientCredsTokenProvider"


def _endpoint_parts(endpoint: str | None) -> tuple[str | None, str | None]:
    """``(suffix, emulator "ip:port")`` of a connection string's BlobEndpoint: a DNS endpoint
    (``https://acct.blob.core.chinacloudapi.cn``) gives its suffix; an address-style one
    (``http://127.0.0.1:10000/acct``, an emulator) gives ``host:port``."""
    if not endpoint:
        return None, None
    parsed = urlparse(endpoint)
    host = parsed.hostname or ""
    if ".blob." in host:
        return host.split(".blob.", 1)[1], None
    port = parsed.port or (443 if parsed.scheme == "https" else 80)
    return None, f"{host}:{port}"


def hadoop_settings(credentials: dict[str, str]) -> dict[str, str]:
    """hadoop-azure (ABFS) settings for a credential: what Spark's driver and executors open the account's
    ``abfs[s]://`` URLs with. Keyed by the account's DFS and blob hosts; an emulator's address-style endpoint
    (Azurite) sets ABFS's ``fs.azure.abfs.endpoint``. No secret, no settings: a credential naming only the
    account (managed identity) leaves authentication to the cluster's own configuration."""
    fields = credential_fields(credentials)
    if not fields.account:
        return {}
    suffix, emulator = _endpoint_parts(fields.endpoint)
    settings: dict[str, str] = {}
    if emulator:
        settings.update(
            {
                "fs.azure.abfs.endpoint": emulator,
                "fs.azure.fns.account.service.type": "BLOB",
                "fs.azure.account.hns.enabled": "false",
            }
        )
        if fields.endpoint and fields.endpoint.startswith("http://"):
            # Plain http: ABFS's Apache HTTP client insists on a TLS socket factory; the JDK's client does not.
            settings.update(
                {"fs.azure.always.use.https": "false", "fs.azure.networking.library": "JDK_HTTP_URL_CONNECTION"}
            )
    suffix = suffix or DEFAULT_SUFFIX
    for host in (f"{fields.account}.dfs.{suffix}", f"{fields.account}.blob.{suffix}"):
        if fields.key:
            settings.update(
                {f"fs.azure.account.auth.type.{host}": "SharedKey", f"fs.azure.account.key.{host}": fields.key}
            )
        elif fields.sas:
            settings.update(
                {f"fs.azure.account.auth.type.{host}": "SAS", f"fs.azure.sas.fixed.token.{host}": fields.sas}
            )
        elif fields.client_secret and fields.tenant_id:
            settings.update(
                {
                    f"fs.azure.account.auth.type.{host}": "OAuth",
                    f"fs.azure.account.oauth.provider.type.{host}": CLIENT_CREDENTIALS_PROVIDER,
                    f"fs.azure.account.oauth2.client.endpoint.{host}": f"https://login.microsoftonline.com/{fields.tenant_id}/oauth2/token",
                    f"fs.azure.account.oauth2.client.id.{host}": fields.client_id or "",
                    f"fs.azure.account.oauth2.client.secret.{host}": fields.client_secret,
                }
            )
    if settings:
        # hadoop-azure 3.5 collects request metrics and sends them to the account when the JVM exits (a
        # shutdown hook, retried with backoff): a job would outlive its work while the storage is slow or
        # gone, and the test suite's JVMs kept running for minutes after Azurite stopped.
        settings["fs.azure.metrics.collection.enabled"] = "false"
    return settings


def hadoop_url(url: str, credentials: dict[str, str]) -> str:
    """The URL Spark opens for an Azure location written in any form: ``abfs[s]://`` as written,
    ``wasb[s]://c@acct.blob.<suffix>/p`` as ``abfs[s]://c@acct.dfs.<suffix>/p`` (Hadoop 3.5 has no WASB
    driver), ``az://c/p`` on the credential's account. Against an emulator endpoint the URL takes the
    plain ``abfs`` scheme and the DFS host :func:`hadoop_settings` points at it. Other URLs and paths are
    returned as they are."""
    if not is_azure_url(url):
        return url
    parsed = urlparse(url)
    location = azure_location(url)
    fields = credential_fields(credentials)
    account = location.account or fields.account
    if not account:
        raise ValueError(
            f"{url} names no storage account and no credential gives one: write it as "
            f"abfss://{location.container}@<account>.dfs.{DEFAULT_SUFFIX}/… or set the pipeline's "
            f"wasb_conn_id"
        )
    suffix, emulator = _endpoint_parts(fields.endpoint if fields.account == account else None)
    host = parsed.hostname or ""
    if not suffix and "." in host:
        suffix = host.split(".", 2)[2] if host.count(".") >= 2 else None
    if emulator:
        scheme, suffix = ("abfs" if fields.endpoint and fields.endpoint.startswith("http://") else "abfss"), None
    elif parsed.scheme in ("abfs", "abfss") and location.account:
        return url
    else:
        scheme = "abfs" if parsed.scheme in ("abfs", "wasb") else "abfss"
    path = f"/{location.prefix}" if location.prefix else "/"
    return f"{scheme}://{location.container}@{account}.dfs.{suffix or DEFAULT_SUFFIX}{path}"


def _account_from_host(host: str | None) -> str:
    if not host:
        return ""
    parsed = urlparse(host if "://" in host else f"https://{host}")
    if parsed.hostname and parsed.hostname.endswith(".blob.core.windows.net"):
        return parsed.hostname.split(".")[0]
    return parsed.path.strip("/").split("/")[0]  # http://127.0.0.1:10000/<account>


def environment_credentials(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The credentials a task put in this process's environment (:func:`credential_env`'s names)."""
    environ = os.environ if environ is None else environ
    return {name: environ[name] for name in CREDENTIAL_ENV if environ.get(name)}


def executor_env_settings(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """``spark.executorEnv.*`` for the credentials present in the driver's environment."""
    return {f"spark.executorEnv.{name}": value for name, value in environment_credentials(environ).items()}


AZURE_SCHEMES = ("az", "abfs", "abfss", "wasb", "wasbs")


@dataclass(frozen=True)
class AzureLocation:
    """Where an Azure URL points: a container, a folder in it (``""`` at the container's root, else any
    depth) and the storage account when the URL names one (``abfss://c@account.dfs.core.windows.net``)."""

    container: str
    prefix: str
    account: str | None


def is_azure_url(url: str) -> bool:
    return urlparse(url).scheme in AZURE_SCHEMES


def azure_location(url: str) -> AzureLocation:
    """Parse any of the forms an Azure location is written in: ``az://container/a/b``,
    ``abfs[s]://container@account.dfs.core.windows.net/a/b``, ``wasb[s]://container@account.blob.core.windows.net/a/b``,
    each with or without a path."""
    parsed = urlparse(url)
    if parsed.scheme not in AZURE_SCHEMES:
        raise ValueError(f"not an Azure storage URL ({', '.join(s + '://' for s in AZURE_SCHEMES)}): {url}")
    container, _, host = parsed.netloc.partition("@")
    if not container:
        raise ValueError(f"no container in the Azure URL {url}")
    account = host.split(".")[0] if host else None
    return AzureLocation(container, "/".join(part for part in parsed.path.split("/") if part), account or None)


def delta_rs_url(url: str) -> str:
    """The URL delta-rs opens for ``url``: the ``wasb[s]://`` form becomes ``abfss://`` on the account's DFS
    host (object_store takes no ``.blob.core.windows.net`` host); other URLs are returned as they are."""
    parsed = urlparse(url)
    if parsed.scheme in ("wasb", "wasbs"):
        location = azure_location(url)
        netloc = (
            f"{location.container}@{location.account}.dfs.core.windows.net" if location.account else location.container
        )
        return parsed._replace(scheme="abfss", netloc=netloc).geturl()
    return url


def fsspec_url(url: str) -> str:
    """The URL adlfs opens for ``url``: the ``wasb[s]://`` form (Hadoop's) becomes ``abfs://`` with the same
    container, account and path; other URLs are returned as they are."""
    parsed = urlparse(url)
    if parsed.scheme in ("wasb", "wasbs"):
        return parsed._replace(scheme="abfs").geturl()
    return url
