"""The policy link: what an executor needs from a policy (PolicyLink), and whether the link counts as lost (LinkWatch,
measured on the executor's clock).

A reply is owed from the moment a request goes out while none was owed (or its sending fails), and for as long
as a request is still waiting for messages; every message from the server (actions, errors, even a stale reply:
the server is alive) restarts the count or, when nothing more is owed, ends it. The link counts as lost when a
reply has been owed for more than `timeout_s` without any message. Silence while nothing is owed is not a loss
(nothing was asked): the server's death is noticed at most `timeout_s` after the first request it leaves
unanswered. In the async modes a request is in flight most of the time; in sync mode the next request goes out
when the running chunk has run s steps.

When the server dies: the client gives up on a request after its timeout (PolicyClient timeout_s, `vlash run
--timeout`), the executor after request_timeout_s, and both keep asking (non-blocking, after retry_after_s).
Once the link is lost, `on_link_loss` decides (`after_loss` says it in the warning): "finish-chunk" (the default)
keeps executing the running chunk until its last index has run (up to a whole chunk, H ticks, when the server dies
just after a switch) before the watchdog holds; right for a healthy link with a slow reply. "hold" stops executing
it in the tick the link counts as lost, so the watchdog holds from then on; when replies return, a first (sync)
request starts afresh. Ticks while the link is lost are never counted as waiting by design
(RunSummary.unexpected_holds counts their holds).
"""

from __future__ import annotations

import time
from typing import Protocol

from robot_io.protocol import Actions, Error, Infer, Metadata


class PolicyLink(Protocol):
    """What an executor needs from a policy; robot_io.client.PolicyClient satisfies it (so do test fakes)."""

    def connect(self) -> Metadata: ...

    def submit(self, infer: Infer) -> None: ...

    def poll(self, timeout_s: float) -> Actions | Error | None: ...


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


def after_loss(policy: str, ticks_left: int) -> str:
    """What the robot does once the link is lost, under on_link_loss `policy` with `ticks_left` of the running chunk."""
    if policy == "hold":
        return "holding from this tick"
    if ticks_left <= 0:
        return "no chunk left to run: holding"
    return f"running the current chunk out (up to {ticks_left} more ticks), then holding"
