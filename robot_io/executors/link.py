"""LinkWatch: whether the policy link counts as lost, measured on the executor's clock.

A reply is owed from the moment a request goes out while none was owed (or its sending fails), and for as long
as a request is still waiting for messages; every message from the server (actions, errors, even a stale reply:
the server is alive) restarts the count or, when nothing more is owed, ends it. The link counts as lost when a
reply has been owed for more than `timeout_s` without any message. Silence while nothing is owed is not a loss
(nothing was asked): the server's death is noticed at most `timeout_s` after the first request it leaves
unanswered. In the async modes a request is in flight most of the time; in sync mode the next request goes out
when the running chunk has run s steps.
"""

from __future__ import annotations

import time


class LinkWatch:
    """Tracks owed replies; `update(now)` says when the link has just been lost. Counts losses and lost ticks."""

    def __init__(self, timeout_s: float) -> None:
        self.timeout_ns = round(timeout_s * 1e9)
        self.owed_since: int | None = None  # clock time since which a reply is owed and no message came
        self.lost = False
        self.losses = 0  # times the link went from healthy to lost
        self.silent_since: int | None = None  # while lost: clock time since which a reply was owed without a message
        self.outage_s = 0.0  # the latest loss: seconds without any message, from the request to the reply that ended it

    def requested(self, now_ns: int) -> None:
        """A request went out (or failed to): a reply is owed from now unless one already was."""
        if self.owed_since is None:
            self.owed_since = now_ns

    def heard(self, now_ns: int, still_owed: bool) -> None:
        """A message arrived; `still_owed`: a request is still waiting for more. It ends a loss (at the next update)."""
        if self.lost and self.silent_since is not None:
            self.outage_s = (now_ns - self.silent_since) / 1e9
        self.owed_since = now_ns if still_owed else None

    def update(self, now_ns: int) -> bool:
        """Recompute `lost`; True exactly when the link has just gone from healthy to lost."""
        lost = self.owed_since is not None and now_ns - self.owed_since > self.timeout_ns
        became_lost = lost and not self.lost
        self.losses += became_lost
        if became_lost:
            self.silent_since = self.owed_since
        self.lost = lost
        return became_lost

    def silent_s(self, now_ns: int) -> float:
        """Seconds a reply has been owed without any message (0 when none is owed)."""
        return 0.0 if self.owed_since is None else (now_ns - self.owed_since) / 1e9


def time_of_day() -> str:
    """Now as HH:MM:SS.s for a printed line (the wall clock, for people; intervals use the executor's clock)."""
    now = time.time()
    return time.strftime("%H:%M:%S", time.localtime(now)) + f".{int(now % 1 * 10)}"
