"""CockroachDB hybrid-logical-clock timestamps, compared exactly.

A changefeed writes ``updated`` and ``resolved`` as ``"<wall ns>.<logical, 10 digits>"``
(``"1714751617108996000.0000000000"``); file names start with the same instant as 33 digits
``YYYYMMDDHHMMSS`` + 9 nanosecond digits + 10 logical digits, in UTC. Timestamps compare as the pair
``(wall, logical)`` of integers: never as floats (they lose nanoseconds) nor as plain strings (a wall
time with fewer digits would sort wrongly).

>>> Hlc.parse("1714751617108996000.0000000000") < Hlc.parse("1714751617108996000.0000000001")
True
>>> Hlc.from_file_timestamp("202405031553371089960000000000000")
Hlc(wall=1714751617108996000, logical=0)
"""

from __future__ import annotations

import calendar
import re
from dataclasses import dataclass
from datetime import UTC, datetime

_TEXT = re.compile(r"^(\d{1,20})\.(\d{10})\??$")  # some old versions append "?" to synthetic timestamps
_FILE = re.compile(r"^(\d{4})(\d{2})(\d{2})(\d{2})(\d{2})(\d{2})(\d{9})(\d{10})$")
NANOS = 1_000_000_000


@dataclass(frozen=True, order=True)
class Hlc:
    """A CockroachDB HLC timestamp; ordering is ``(wall, logical)``."""

    wall: int
    logical: int = 0

    @classmethod
    def parse(cls, text: str) -> Hlc:
        """``"<wall>.<10-digit logical>"`` (a decimal, as ``updated`` and ``resolved`` carry it)."""
        m = _TEXT.match(text.strip()) if isinstance(text, str) else None
        if m is None:
            raise ValueError(f"not a CockroachDB HLC timestamp (<wall ns>.<10-digit logical>): {text!r}")
        return cls(int(m.group(1)), int(m.group(2)))

    @classmethod
    def from_file_timestamp(cls, digits: str) -> Hlc:
        """The 33-digit timestamp that starts a sink file's name."""
        m = _FILE.match(digits)
        if m is None:
            raise ValueError(f"not a 33-digit changefeed file timestamp: {digits!r}")
        year, month, day, hour, minute, second = (int(g) for g in m.groups()[:6])
        try:
            seconds = calendar.timegm(datetime(year, month, day, hour, minute, second).timetuple())
        except ValueError:
            raise ValueError(f"not a valid changefeed file timestamp: {digits!r}") from None
        return cls(seconds * NANOS + int(m.group(7)), int(m.group(8)))

    def __str__(self) -> str:
        return f"{self.wall}.{self.logical:010d}"

    def file_timestamp(self) -> str:
        """The 33 digits a sink file named at this timestamp starts with."""
        seconds, nanos = divmod(self.wall, NANOS)
        return f"{datetime.fromtimestamp(seconds, tz=UTC):%Y%m%d%H%M%S}{nanos:09d}{self.logical:010d}"

    def datetime(self) -> datetime:
        return datetime.fromtimestamp(self.wall // NANOS, tz=UTC).replace(microsecond=(self.wall % NANOS) // 1000)
