"""Which occurrences of a repeated failure to log: the first at once, then at most one
line per interval counting those in between. A full disk or a process out of descriptors
fails every request; the operator needs to see it, not a line per request."""

from __future__ import annotations


class ThrottledLog:
    def __init__(self, interval: float) -> None:
        self.interval = interval  # seconds
        self._last_line: float | None = None
        self._unlogged = 0

    def occurred(self, now: float) -> int | None:
        """One more occurrence at monotonic `now`: None to say nothing, else how many
        occurrences the line logged now reports (1: this one alone)."""
        if self._last_line is not None and now - self._last_line < self.interval:
            self._unlogged += 1
            return None
        count, self._unlogged, self._last_line = self._unlogged + 1, 0, now
        return count

    def unlogged(self) -> int:
        """Occurrences since the last line, taken (for a closing summary)."""
        count, self._unlogged = self._unlogged, 0
        return count
