"""Azure Blob credentials for Spark executors, kept out of argv, confs, logs and XCom.

Executors open chunk files through adlfs, which reads its credentials from the
environment (the names below). The orchestrator puts them in the environment
of the spark-submit process (never on its command line, which ``ps`` shows);
local-mode workers inherit it, and :func:`lakefeed.spark.get_session` forwards
it to cluster executors as ``spark.executorEnv.*`` with those names redacted
from the Spark UI and logs.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from urllib.parse import urlparse

ACCOUNT_NAME = "AZURE_STORAGE_ACCOUNT_NAME"
CONNECTION_STRING = "AZURE_STORAGE_CONNECTION_STRING"
ACCOUNT_KEY = "AZURE_STORAGE_ACCOUNT_KEY"
SAS_TOKEN = "AZURE_STORAGE_SAS_TOKEN"
CLIENT_ID, CLIENT_SECRET, TENANT_ID = "AZURE_STORAGE_CLIENT_ID", "AZURE_STORAGE_CLIENT_SECRET", "AZURE_STORAGE_TENANT_ID"
CREDENTIAL_ENV = (ACCOUNT_NAME, CONNECTION_STRING, ACCOUNT_KEY, SAS_TOKEN, CLIENT_ID, CLIENT_SECRET, TENANT_ID)
# Spark redacts conf keys and values matching this in its UI, REST API, event log and logs; the DAGs also
# refuse spark_conf settings matching it (a Variable is stored, and --conf arguments show in `ps`). Names:
# fs.azure.account.key.<account>.dfs.core.windows.net, fs.azure.sas.<container>.<account>…,
# fs.azure.sas.fixed.token, fs.azure.account.oauth2.client.secret, fs.s3a.secret.key, spark.executorEnv.
# AZURE_STORAGE_* (CONNECTION_STRING, ACCOUNT_KEY, SAS_TOKEN, CLIENT_SECRET); values: connection strings
# (AccountKey=…) and SAS query strings (sig=…).
SECRET_PATTERNS = (
    "secret", "password", "passwd", "token", "credential",
    r"access[._]?key", r"account[._]?key", r"private[._]?key", r"connection[._]?string",
    r"(^|[._])sas([._]|$)", r"sas[._]?token", r"(^|[?&;])sig=",
)
REDACTION_REGEX = "(?i)" + "|".join(SECRET_PATTERNS)


def credential_env(*, login: str | None, password: str | None, host: str | None, extra: dict) -> dict[str, str]:
    """adlfs environment variables equivalent to an Airflow ``wasb`` connection's fields."""
    def field(name: str) -> str | None:
        return extra.get(name) or extra.get(f"extra__wasb__{name}") or None

    if field("connection_string"):
        return {CONNECTION_STRING: field("connection_string")}
    account = login or _account_from_host(host)
    if field("tenant_id"):
        return {ACCOUNT_NAME: account, TENANT_ID: field("tenant_id"), CLIENT_ID: login or "",
                CLIENT_SECRET: password or ""}
    key = field("shared_access_key") or password or field("account_key")
    sas = None if key else field("sas_token")
    if not key and not sas:
        return {ACCOUNT_NAME: account}  # DefaultAzureCredential / managed identity on the executors
    if host and ".blob.core.windows.net" not in host:
        # A custom endpoint (Azurite, sovereign clouds): only a connection string carries it to adlfs.
        endpoint = host.rstrip("/")
        secret = f"AccountKey={key}" if key else f"SharedAccessSignature={sas.lstrip('?')}"
        return {CONNECTION_STRING: f"DefaultEndpointsProtocol={urlparse(endpoint).scheme or 'https'};"
                                   f"AccountName={account};{secret};BlobEndpoint={endpoint};"}
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
    options = {"account_name": credentials.get(ACCOUNT_NAME), "account_key": credentials.get(ACCOUNT_KEY),
               "sas_token": credentials.get(SAS_TOKEN), "tenant_id": credentials.get(TENANT_ID),
               "client_id": credentials.get(CLIENT_ID), "client_secret": credentials.get(CLIENT_SECRET)}
    return {name: value for name, value in options.items() if value}


def delta_storage_options(credentials: dict[str, str]) -> dict[str, str]:
    """delta-rs ``storage_options`` (object_store's Azure keys) for the same credentials. A connection
    string's ``BlobEndpoint`` (Azurite, sovereign clouds) becomes ``endpoint`` (``allow_http`` for http)."""
    if credentials.get(CONNECTION_STRING):
        parts = parse_connection_string(credentials[CONNECTION_STRING])
        account, key = parts.get("AccountName"), parts.get("AccountKey")
        sas, endpoint = parts.get("SharedAccessSignature"), parts.get("BlobEndpoint")
        client = {}
    else:
        account, key, sas, endpoint = (credentials.get(ACCOUNT_NAME), credentials.get(ACCOUNT_KEY),
                                       credentials.get(SAS_TOKEN), None)
        client = {"tenant_id": credentials.get(TENANT_ID), "client_id": credentials.get(CLIENT_ID),
                  "client_secret": credentials.get(CLIENT_SECRET)}
    options = {"account_name": account, "account_key": key, "sas_token": sas.lstrip("?") if sas else None,
               **client, "endpoint": endpoint.rstrip("/") if endpoint else None,
               "allow_http": "true" if endpoint and endpoint.startswith("http://") else None}
    return {name: value for name, value in options.items() if value}


def _account_from_host(host: str | None) -> str:
    if not host:
        return ""
    parsed = urlparse(host if "://" in host else f"https://{host}")
    if parsed.hostname and parsed.hostname.endswith(".blob.core.windows.net"):
        return parsed.hostname.split(".")[0]
    return parsed.path.strip("/").split("/")[0]  # http://127.0.0.1:10000/<account>


def environment_credentials(environ: dict[str, str] | None = None) -> dict[str, str]:
    """The credentials a task put in this process's environment (:func:`credential_env`'s names)."""
    environ = os.environ if environ is None else environ
    return {name: environ[name] for name in CREDENTIAL_ENV if environ.get(name)}


def executor_env_settings(environ: dict[str, str] | None = None) -> dict[str, str]:
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
        netloc = f"{location.container}@{location.account}.dfs.core.windows.net" if location.account \
            else location.container
        return parsed._replace(scheme="abfss", netloc=netloc).geturl()
    return url


def fsspec_url(url: str) -> str:
    """The URL adlfs opens for ``url``: the ``wasb[s]://`` form (Hadoop's) becomes ``abfs://`` with the same
    container, account and path; other URLs are returned as they are."""
    parsed = urlparse(url)
    if parsed.scheme in ("wasb", "wasbs"):
        return parsed._replace(scheme="abfs").geturl()
    return url
