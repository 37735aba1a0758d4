"""Looking for a secret everywhere a run could leave it: the process list and the Spark REST API while it
runs, and afterwards files and database rows. A secret counts in every form it could be written in: as is,
URL-encoded (``%2B``, ``%2F``, ``%3D``), form-encoded, and base64."""

from __future__ import annotations

import base64
import json
import subprocess
import threading
import urllib.request
from pathlib import Path
from urllib.parse import quote, quote_plus


def secret_forms(secret: str) -> dict[str, str]:
    return {
        "raw": secret,
        "url-encoded": quote(secret, safe=""),
        "form-encoded": quote_plus(secret),
        "base64": base64.b64encode(secret.encode()).decode(),
    }


def found_forms(text: str | bytes, secret: str) -> list[str]:
    """Which forms of ``secret`` ``text`` holds."""
    data = text.encode() if isinstance(text, str) else text
    return [name for name, form in secret_forms(secret).items() if form.encode() in data]


class LiveWatch:
    """Polls ``ps`` and the Spark REST API (``/api/v1/applications/<id>/environment`` on ``ui_port``) every
    ``interval`` seconds in a thread, keeping what it saw; use as a context manager around a run."""

    def __init__(self, ui_port: int | None = None, interval: float = 0.3):
        self.ui_port, self.interval = ui_port, interval
        self.process_lists: list[str] = []
        self.environments: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._poll, daemon=True)

    def __enter__(self) -> LiveWatch:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join(timeout=10)

    def _poll(self) -> None:
        while not self._stop.is_set():
            listing = subprocess.run(["ps", "-eww", "-o", "args"], capture_output=True, text=True).stdout
            if "spark" in listing.lower():
                self.process_lists.append(listing)
            if self.ui_port:
                self._read_environment()
            self._stop.wait(self.interval)

    def _read_environment(self) -> None:
        base = f"http://127.0.0.1:{self.ui_port}/api/v1/applications"
        try:
            with urllib.request.urlopen(base, timeout=2) as response:
                applications = json.load(response)
            for application in applications:
                with urllib.request.urlopen(f"{base}/{application['id']}/environment", timeout=2) as response:
                    self.environments.append(response.read().decode())
        except (OSError, ValueError):
            pass  # no Spark application up at this moment

    def leaks(self, secret: str) -> list[str]:
        found = [f"process list: {form}" for listing in self.process_lists for form in found_forms(listing, secret)]
        found += [
            f"Spark REST API environment: {form}" for text in self.environments for form in found_forms(text, secret)
        ]
        return sorted(set(found))


def file_leaks(folders: list[Path], secret: str) -> list[str]:
    return [
        f"{path}: {form}"
        for folder in folders
        if folder.exists()
        for path in sorted(folder.rglob("*"))
        if path.is_file()
        for form in found_forms(path.read_bytes(), secret)
    ]
