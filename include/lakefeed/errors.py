"""Every refusal lakefeed raises, in one place.

A :class:`Refusal` is an error that a retry cannot fix: bad input, a range
that cannot be read, configuration or a checkpoint that does not fit. Jobs
exit with code 2 on one (nothing written), and Airflow tasks fail on one
without retrying. Anything else (a network timeout, a killed executor) is
transient: exit code 1, retried.
"""


class Refusal(Exception):
    """Base class: this run cannot proceed as asked; the message says why and what to do."""


class FeedError(Refusal):
    """The input feed cannot be ingested as it is."""


class FeedCorruptError(FeedError):
    """A file of the feed is not what the change feed format promises."""


class UnreadableLine(FeedCorruptError):
    """A line (or parquet row) of a CockroachDB sink file that is not a message the job can apply, where the
    rest of its file can be read: refused like any bad input, or set aside in a quarantine table
    (:func:`lakefeed.crdb.messages.quarantined_line`)."""


class WindowNotReadyError(FeedError):
    """A requested window is not consumable yet (``lastConsumable`` < T + 1h)."""


class FeedConfigError(FeedError):
    """Arguments or configuration that cannot describe a valid run."""


class ChangeDataError(FeedError):
    """A version range whose change data cannot be read as asked; the message says what to do."""


class DataLossError(FeedError):
    """Data the pipeline still needs can no longer be read (change feed segments or chunk files removed by
    retention, versions cleaned from a Delta log); the message names the hours or versions and the explicit
    acknowledgement that moves on past them."""


class ConfigError(Refusal, ValueError):
    """Pipeline configuration with an unknown key or a value of the wrong type."""


class CheckpointError(Refusal, ValueError):
    """A stored checkpoint that cannot be trusted; the message names where it lives."""


class CheckpointMismatchError(CheckpointError):
    """The checkpoint belongs to another feed or table than the one configured, or a target
    was dropped, recreated or restored behind it; the message names it and how to reset."""


class CheckpointConflictError(CheckpointError):
    """The checkpoint changed under a writer more times than it retries."""


class DocumentError(Refusal, ValueError):
    """A document one task hands another (a run's plan, a job's summary) that this code cannot read: a key
    missing or of the wrong type, or a version newer than it knows; the message names the document and key."""


class StorageUnavailableError(Exception):
    """Reading a file failed in transit (connection reset, timeout, throttling) after bounded retries: not
    bad input, so not a :class:`Refusal`; the job exits 1 and Airflow retries it."""


def refusal_from_worker(exc: Exception) -> FeedCorruptError | None:
    """The :class:`FeedCorruptError` a Spark Python worker raised (naming the file at fault), out of the
    stack dump Spark wraps it in; None when the failure was something else."""
    import re

    m = re.search(r"lakefeed\.errors\.(?:FeedCorruptError|UnreadableLine): (.+?)(?:\n|$)", str(exc))
    return FeedCorruptError(m.group(1)) if m else None
