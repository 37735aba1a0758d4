"""Errors that stop a run before anything is written to a target."""


class FeedError(Exception):
    """Base class: the input feed cannot be ingested as it is."""


class FeedCorruptError(FeedError):
    """A file of the feed is not what the change feed format promises."""


class WindowNotReadyError(FeedError):
    """A requested window is not consumable yet (``lastConsumable`` < T + 1h)."""


class FeedConfigError(FeedError):
    """Arguments or configuration that cannot describe a valid run."""
