"""Storage addressed by URL: a local folder (the embedded default) or a cloud URL.

Everything the pipelines read goes through :class:`Store`, built from a root
URL. Executors rebuild the same store from the (secret-free) root URL, so a
task can open a chunk file by its relative path on any worker.
"""

from __future__ import annotations

import os
import posixpath
from dataclasses import dataclass, field
from typing import Any, BinaryIO

import fsspec
from fsspec.core import url_to_fs
from fsspec.implementations.local import LocalFileSystem

from lakefeed.jsonio import parse_json
from lakefeed.errors import FeedCorruptError, FeedError


@dataclass(frozen=True)
class Entry:
    name: str
    size: int
    is_dir: bool


class StoreBase:
    """What the pipelines need of storage; subclasses supply the primitives."""

    root: str

    def url(self, relative: str) -> str:
        """Human- and executor-usable address of ``relative``: names files in errors."""
        return f"{self.root}/{relative}" if relative else self.root

    @property
    def identity(self) -> str:
        """Which storage this is, secret-free: a checkpoint records it and refuses another.
        ``file:///abs/path`` for a local folder, ``azure://<account>/<container>/<prefix>`` for Azure."""
        raise NotImplementedError

    def read_bytes(self, relative: str) -> bytes:
        raise NotImplementedError

    def read_json(self, relative: str) -> Any:
        """Parse a JSON file; missing or malformed content raises an error naming the file."""
        try:
            raw = self.read_bytes(relative)
        except FileNotFoundError:
            raise FeedError(f"{self.url(relative)} does not exist") from None
        return parse_json(raw, self.url(relative), FeedCorruptError)


@dataclass
class Store(StoreBase):
    """A folder of files under ``root`` (``/data/feed``, ``file:///…``, ``az://container``).

    Azure URLs go through adlfs, which takes its credentials from the
    environment (see :mod:`lakefeed.azure`); nothing secret is in ``root``.
    """

    root: str
    options: dict[str, Any] = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        self.root = self.root.rstrip("/") or "/"
        self._fs, self._root_path = url_to_fs(self.root, **self.options)

    @property
    def fs(self) -> fsspec.AbstractFileSystem:
        return self._fs

    def path(self, relative: str) -> str:
        """Filesystem path of ``relative`` (``a/b``) under the root."""
        return posixpath.join(self._root_path, relative) if relative else self._root_path

    @property
    def is_local(self) -> bool:
        """Whether the files are on this machine's filesystem (Spark's own readers can open them)."""
        return isinstance(self._fs, LocalFileSystem)

    @property
    def identity(self) -> str:
        if self.is_local:
            return "file://" + os.path.abspath(self._root_path)
        account = getattr(self._fs, "account_name", None)
        if account:
            return f"azure://{account}/{self._root_path.strip('/')}"
        protocol = self._fs.protocol if isinstance(self._fs.protocol, str) else self._fs.protocol[0]
        return f"{protocol}://{self._root_path.strip('/')}"

    def exists(self, relative: str) -> bool:
        return self._fs.exists(self.path(relative))

    def open(self, relative: str) -> BinaryIO:
        if isinstance(self._fs, LocalFileSystem):
            return open(self.path(relative), "rb", buffering=1 << 20)  # fsspec's local wrapper costs ~20%
        return self._fs.open(self.path(relative), "rb")

    def read_bytes(self, relative: str) -> bytes:
        with self.open(relative) as handle:
            return handle.read()

    def list(self, relative: str) -> list[Entry]:
        """Direct children of a folder, sorted by name; empty when it does not exist."""
        try:
            listing = self._fs.ls(self.path(relative), detail=True)
        except FileNotFoundError:
            return []
        entries = []
        for info in listing:
            name = posixpath.basename(info["name"].rstrip("/"))
            if not name:
                continue
            entries.append(
                Entry(name=name, size=int(info.get("size") or 0), is_dir=info.get("type") == "directory")
            )
        return sorted(entries, key=lambda entry: entry.name)
