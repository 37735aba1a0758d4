"""Storage addressed by URL: a local folder (the embedded default) or a cloud URL.

Everything the pipelines read goes through :class:`Store`, built from a root
URL. Executors rebuild the same store from the (secret-free) root URL, so a
task can open a chunk file by its relative path on any worker.
"""

from __future__ import annotations

import contextlib
import io
import logging
import os
import posixpath
import random
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, BinaryIO, TypeVar, cast

import fsspec
from fsspec.core import url_to_fs
from fsspec.implementations.local import LocalFileSystem

from lakefeed.errors import FeedCorruptError, FeedError, StorageUnavailableError
from lakefeed.jsonio import parse_json

if TYPE_CHECKING:
    from _typeshed import WriteableBuffer

log = logging.getLogger(__name__)
# Attempts at a remote read before it counts as unavailable (LAKEFEED_READ_ATTEMPTS overrides).
RETRY_ATTEMPTS = int(os.environ.get("LAKEFEED_READ_ATTEMPTS", "5"))
# The credential of the storage account connection the current task, sensor check or trigger check works
# with (:func:`credentials_scope`): stores of Azure URLs opened meanwhile without one of their own
# take it. A context variable, so concurrent trigger checks in one triggerer never see each other's.
_CONNECTION_CREDENTIALS: ContextVar[dict[str, str] | None] = ContextVar("lakefeed_connection_credentials", default=None)


@contextmanager
def credentials_scope(credentials: dict[str, str] | None) -> Iterator[None]:
    """Open the stores of Azure URLs in the body with ``credentials`` (None: as outside it)."""
    token = _CONNECTION_CREDENTIALS.set(credentials or _CONNECTION_CREDENTIALS.get())
    try:
        yield
    finally:
        _CONNECTION_CREDENTIALS.reset(token)


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

    def exists(self, relative: str) -> bool:
        raise NotImplementedError

    def list(self, relative: str) -> list[Entry]:
        """The entries of a folder, by name (a missing folder has none)."""
        raise NotImplementedError

    def read_json(self, relative: str) -> Any:
        """Parse a JSON file; missing or malformed content raises an error naming the file."""
        try:
            raw = self.read_bytes(relative)
        except FileNotFoundError:
            raise FeedError(f"{self.url(relative)} does not exist") from None
        return parse_json(raw, self.url(relative), FeedCorruptError)


def _fits(credentials: dict[str, str], account: str | None) -> bool:
    """Whether ``credentials`` may serve a URL naming ``account`` (None: the URL names none)."""
    from lakefeed.azure import credential_account

    found = credential_account(credentials)
    return account is None or found is None or found.lower() == account.lower()


@dataclass
class Store(StoreBase):
    """A folder of files under ``root`` (``/data/feed``, ``file:///…``, ``az://container/path``, any Azure form).

    Azure URLs go through adlfs with ``credentials`` (named as :func:`lakefeed.azure.credential_env`
    names them, from the configured ``wasb`` connection); without them, those of the
    enclosing :func:`credentials_scope`, else those the task put in the environment (a Spark job's), else the
    store is refused. Nothing secret is in ``root``, and ``credentials`` never show in ``repr``.
    """

    root: str
    credentials: dict[str, str] = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        from lakefeed.azure import (
            adlfs_options,
            azure_location,
            credential_account,
            environment_credentials,
            fsspec_url,
            is_azure_url,
        )

        self.root = self.root.rstrip("/") or "/"
        options: dict[str, str | bool] = {}
        if is_azure_url(self.root):
            from lakefeed.errors import FeedConfigError

            # The connection's credential, or the one the task put in this process's environment from it
            # (a Spark driver or executor); never adlfs's own fallback to whatever identity the machine has.
            # A credential of another account than the one the URL names is not used for it.
            account = azure_location(self.root).account
            if self.credentials and not _fits(self.credentials, account):
                raise FeedConfigError(
                    f"{self.root} is in the storage account {account}, but the credential given "
                    f"for it is for the account {credential_account(self.credentials)}"
                )
            self.credentials = self.credentials or next(
                (
                    found
                    for found in (_CONNECTION_CREDENTIALS.get(), environment_credentials())
                    if found and _fits(found, account)
                ),
                {},
            )
            if not self.credentials:
                raise FeedConfigError(
                    f"no credentials to read {self.root}: set wasb_conn_id in the pipeline's "
                    f"configuration to the Airflow connection of its storage account"
                )
            # No listings cache: fsspec shares one filesystem instance per process and credential, and a
            # folder listed before a writer added to it (a target's _delta_log read by the plan step, then by
            # the commit step after the job) must be listed anew.
            options = {**adlfs_options(self.credentials), "use_listings_cache": False}
        self._fs: fsspec.AbstractFileSystem
        self._root_path: str
        self._fs, self._root_path = url_to_fs(fsspec_url(self.root), **options)

    @property
    def delta_storage_options(self) -> dict[str, str] | None:
        """delta-rs ``storage_options`` for a Delta table at this root (None: delta-rs's defaults)."""
        from lakefeed.azure import delta_storage_options, is_azure_url

        return delta_storage_options(self.credentials) if is_azure_url(self.root) else None

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
        found: bool = self._fs.exists(self.path(relative))
        return found

    def open(self, relative: str) -> BinaryIO:
        """A file for reading. A remote file's reads are retried in transit (:class:`RetryingReader`), so a
        reset connection is never mistaken for a corrupt file."""
        if isinstance(self._fs, LocalFileSystem):
            return open(self.path(relative), "rb", buffering=1 << 20)  # fsspec's local wrapper costs ~20%
        path = self.path(relative)
        # Not an io.BufferedIOBase, but it reads, seeks and closes as the callers' binary files do.
        reader = RetryingReader(lambda: self._fs.open(path, "rb"), self.url(relative), attempts=RETRY_ATTEMPTS)
        return cast(BinaryIO, reader)

    def read_bytes(self, relative: str) -> bytes:
        with self.open(relative) as handle:
            return handle.read()

    def write_bytes(self, relative: str, data: bytes) -> None:
        """Write a file whole: on this machine to a temporary name, then renamed over ``relative``; elsewhere
        in one upload, which an object store shows whole or not at all."""
        path = self.path(relative)
        if not isinstance(self._fs, LocalFileSystem):
            self._fs.pipe_file(path, data)
            return
        os.makedirs(os.path.dirname(path), exist_ok=True)
        scratch = f"{path}.{os.getpid()}.tmp"
        with open(scratch, "wb") as handle:
            handle.write(data)
        os.replace(scratch, path)

    def remove(self, relative: str) -> None:
        """Delete a file; nothing when it is not there."""
        with contextlib.suppress(FileNotFoundError):
            self._fs.rm_file(self.path(relative))

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
            entries.append(Entry(name=name, size=int(info.get("size") or 0), is_dir=info.get("type") == "directory"))
        return sorted(entries, key=lambda entry: entry.name)


# Not worth retrying: the file or the permission is missing, whatever the network does.
_PERMANENT = (FileNotFoundError, PermissionError, IsADirectoryError, NotADirectoryError)
_Result = TypeVar("_Result")


class RetryingReader(io.RawIOBase):
    """A remote file whose opens and reads are retried when they fail in transit: the file is reopened
    and read again from the same offset, after 0.5, 1, 2, 4 … seconds (jittered, at most ``max_delay``),
    up to ``attempts`` times; then :class:`~lakefeed.errors.StorageUnavailableError` naming the file.
    Parsers above it therefore see either the file's bytes or that error, never a half-read stream that
    looks like corruption. A missing file or a refused permission is raised at once."""

    def __init__(
        self,
        opener: Callable[[], BinaryIO],
        url: str,
        attempts: int = RETRY_ATTEMPTS,
        first_delay: float = 0.5,
        max_delay: float = 8.0,
    ) -> None:
        super().__init__()
        self._opener, self.url = opener, url
        self._attempts, self._first_delay, self._max_delay = attempts, first_delay, max_delay
        self._position = 0
        self._handle: BinaryIO | None = None
        self._call(lambda handle: None)  # open now: a missing file fails here, as with a local open

    def _call(self, action: Callable[[BinaryIO], _Result]) -> _Result:
        failure: Exception | None = None
        for attempt in range(1, self._attempts + 1):
            try:
                if self._handle is None:
                    self._handle = self._opener()
                    if self._position:
                        self._handle.seek(self._position)
                return action(self._handle)
            except _PERMANENT:
                raise
            except Exception as exc:  # adlfs, aiohttp and azure-core raise many types for a failed transfer
                failure = exc
                self._discard()
                if attempt < self._attempts:
                    delay = min(self._max_delay, self._first_delay * 2 ** (attempt - 1)) * random.uniform(0.5, 1.0)
                    log.warning(
                        "%s: read failed in transit (%s: %s); retrying in %.1fs (attempt %d of %d)",
                        self.url,
                        type(exc).__name__,
                        exc,
                        delay,
                        attempt,
                        self._attempts,
                    )
                    time.sleep(delay)
        raise StorageUnavailableError(
            f"{self.url}: reading failed {self._attempts} times in transit; last error "
            f"{type(failure).__name__}: {failure}"
        ) from None

    def _discard(self) -> None:
        handle, self._handle = self._handle, None
        if handle is not None:
            with contextlib.suppress(Exception):  # a broken connection may fail to close too
                handle.close()

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def read(self, size: int = -1) -> bytes:
        data = self._call(lambda handle: handle.read(size))
        self._position += len(data)
        return data

    def readinto(self, buffer: WriteableBuffer) -> int:
        view = memoryview(buffer)
        data = self.read(len(view))
        view[: len(data)] = data
        return len(data)

    def readall(self) -> bytes:
        return self.read(-1)

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        self._position = self._call(lambda handle: handle.seek(offset, whence))
        return self._position

    def tell(self) -> int:
        return self._position

    def close(self) -> None:
        self._discard()
        super().close()
