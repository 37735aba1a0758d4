"""The suite's egress guard (tests/egress_guard.py) must catch a request that leaves loopback from each
kind of client the suite runs, and let loopback through: checked with a guard of its own, in child
processes, so that the refusals these tests provoke land in their own log, not the session's."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.egress_guard import EgressGuard, entries

# TEST-NET-1 (RFC 5737): never routed, so nothing leaves even were the guard broken; a name in Azure's
# storage domain, as a client that fell back to the cloud would ask for.
UNROUTED, CLOUD_HOST = "192.0.2.1", "lakefeedguard.blob.core.windows.net"


@pytest.fixture
def guard(tmp_path):
    with EgressGuard(tmp_path / "refused.jsonl") as running:
        yield running


@pytest.fixture
def listener():
    """A loopback port that accepts: what every test service (Azurite, the api-server) looks like."""
    with socket.create_server(("127.0.0.1", 0)) as server:
        yield server.getsockname()[1]


def run(guard: EgressGuard, *command: str, timeout: int = 120) -> str:
    env = {**os.environ, **guard.environment()}
    result = subprocess.run(command, env=env, capture_output=True, text=True, timeout=timeout)
    assert result.returncode == 0, result.stderr
    return result.stdout


def destinations(guard: EgressGuard) -> set[tuple[str, str]]:
    return {(e["destination"], e["via"]) for e in entries(guard.log)}


def test_python_sockets_to_other_addresses_are_refused_and_recorded(guard, listener):
    out = run(
        guard,
        sys.executable,
        "-c",
        textwrap.dedent(f"""
        import socket, urllib.request
        for host in ("{UNROUTED}", "{CLOUD_HOST}"):
            try:
                socket.create_connection((host, 443), timeout=5)
                print(host, "connected")
            except OSError as error:
                print(host, error)
        socket.create_connection(("127.0.0.1", {listener}), timeout=5).close()
        socket.create_connection(("localhost", {listener}), timeout=5).close()
        print("loopback connected")
        """),
    )
    assert f"{UNROUTED} [Errno 111] refused by the test suite's egress guard" in out
    assert "loopback connected" in out
    assert (f"{UNROUTED}:443", "python socket") in destinations(guard)


def test_delta_rs_reaching_for_azure_goes_to_the_guard(guard):
    """delta-rs (object_store, reqwest) honours HTTPS_PROXY: a table named on a real account is asked of
    the guard, which refuses it."""
    out = run(
        guard,
        sys.executable,
        "-c",
        textwrap.dedent(f"""
        from deltalake import DeltaTable
        try:
            DeltaTable("abfss://c@{CLOUD_HOST.split(".")[0]}.dfs.core.windows.net/t",
                       storage_options={{"account_name": "{CLOUD_HOST.split(".")[0]}", "account_key": "a2V5",
                                         "max_retries": "0"}})
        except Exception as error:
            print("refused:", type(error).__name__)
        """),
    )
    assert "refused:" in out
    assert (f"{CLOUD_HOST}:443", "http proxy (CONNECT)") in destinations(guard)


def test_the_jvm_reaches_loopback_and_maven_central_only(guard, listener, tmp_path):
    probe = tmp_path / "Probe.java"
    probe.write_text(
        textwrap.dedent(f"""
        import java.net.*;
        public class Probe {{
          public static void main(String[] args) throws Exception {{
            for (String host : new String[] {{"{UNROUTED}", "{CLOUD_HOST}"}}) {{
              try (Socket socket = new Socket()) {{
                socket.connect(new InetSocketAddress(host, 443), 5000);
                System.out.println(host + " connected");
              }} catch (Exception error) {{ System.out.println(host + " " + error); }}
            }}
            try {{
              HttpURLConnection http = (HttpURLConnection) new URL("https://{CLOUD_HOST}/c").openConnection();
              http.setConnectTimeout(5000);
              System.out.println("https " + http.getResponseCode());
            }} catch (Exception error) {{ System.out.println("https " + error); }}
            try (Socket socket = new Socket()) {{
              socket.connect(new InetSocketAddress("127.0.0.1", {listener}), 5000);
              System.out.println("loopback connected");
            }}
          }}
        }}""")
    )
    out = run(guard, "java", str(probe))
    assert "loopback connected" in out
    assert f"{UNROUTED} java.net.SocketException: SOCKS: Connection not allowed by ruleset" in out
    assert "https java.io.IOException: Unable to tunnel through proxy" in out
    found = destinations(guard)
    assert (f"{UNROUTED}:443", "socks5 proxy") in found
    assert (f"{CLOUD_HOST}:443", "socks5 proxy") in found
    assert (f"{CLOUD_HOST}:443", "http proxy (CONNECT)") in found
    # Ivy's --packages resolution is let through, direct.
    assert "repo1.maven.org" in guard.environment()["JAVA_TOOL_OPTIONS"]


def test_the_suite_runs_under_the_guard(tmp_path, monkeypatch):
    """This very process and everything it starts: the conftest put them under the session's guard."""
    monkeypatch.setattr(sys.modules["_lakefeed_egress"], "_LOG", str(tmp_path / "mine.jsonl"))  # not the session's
    assert Path(os.environ["LAKEFEED_EGRESS_LOG"]).parent.name.startswith("lakefeed-egress-")
    assert os.environ["LAKEFEED_EGRESS_OWNER"] == str(os.getpid())  # this process runs its own guard
    assert "egress" in os.environ["PYTHONPATH"] and "socksProxyHost" in os.environ["JAVA_TOOL_OPTIONS"]
    with pytest.raises(ConnectionRefusedError, match="egress guard"):
        socket.socket().connect((UNROUTED, 9))
    assert [e["destination"] for e in entries(tmp_path / "mine.jsonl")] == [f"{UNROUTED}:9"]
