"""Microsoft's Azurite blob emulator for tests: started on 127.0.0.1 with a temp folder, stopped after.

It accepts the ``$blobchangefeed`` container name. azure-storage-blob 12.31
sends an API version Azurite 3.x rejects unless started with
``--skipApiVersionCheck``. A custom account with a random key (``AZURITE_ACCOUNTS``)
lets tests plant a secret and look for it afterwards.
``--disableTelemetry``: by default Azurite sends usage data to Application Insights, a request
past loopback that the suite's egress guard refuses (and fails the test for).
"""

from __future__ import annotations

import base64
import os
import socket
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
AZURITE = ROOT / "node_modules" / ".bin" / "azurite-blob"


@dataclass
class Azurite:
    account: str
    key: str
    port: int
    process: subprocess.Popen

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}/{self.account}"

    @property
    def connection_string(self) -> str:
        return (
            f"DefaultEndpointsProtocol=http;AccountName={self.account};AccountKey={self.key};"
            f"BlobEndpoint={self.endpoint};"
        )

    def container(self, name: str):
        from azure.storage.blob import BlobServiceClient

        service = BlobServiceClient.from_connection_string(self.connection_string)
        client = service.get_container_client(name)
        if not client.exists():
            client.create_container()
        return client

    def upload_folder(self, folder: Path, container: str) -> int:
        """Make the container hold exactly the files under ``folder`` (relative names); returns the count.

        The emulator is shared by the test session: blobs another test left are removed first."""
        client = self.container(container)
        for blob in client.list_blobs():
            client.delete_blob(blob.name)
        count = 0
        for path in sorted(folder.rglob("*")):
            if path.is_file():
                with path.open("rb") as handle:
                    client.upload_blob(str(path.relative_to(folder)), handle, overwrite=True)
                count += 1
        return count


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def start_azurite(location: Path, account: str = "lakefeedacct") -> Azurite:
    if not AZURITE.exists():
        raise RuntimeError(f"{AZURITE} is missing: run `make setup` (npm install of package.json)")
    key = base64.b64encode(os.urandom(32)).decode()
    port = _free_port()
    process = subprocess.Popen(
        [
            str(AZURITE),
            "--blobHost",
            "127.0.0.1",
            "--blobPort",
            str(port),
            "--location",
            str(location),
            "--skipApiVersionCheck",
            "--silent",
            "--loose",
            "--disableTelemetry",
        ],
        env={**os.environ, "AZURITE_ACCOUNTS": f"{account}:{key}"},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.STDOUT,
    )
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        with socket.socket() as sock:
            if sock.connect_ex(("127.0.0.1", port)) == 0:
                return Azurite(account=account, key=key, port=port, process=process)
        if process.poll() is not None:
            raise RuntimeError(f"azurite exited with code {process.returncode}")
        time.sleep(0.2)
    process.terminate()
    raise RuntimeError("azurite did not start listening within 30 s")


def stop_azurite(azurite: Azurite) -> None:
    azurite.process.terminate()
    try:
        azurite.process.wait(timeout=10)
    except subprocess.TimeoutExpired:
        azurite.process.kill()
