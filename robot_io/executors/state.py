"""The executor's typed state: a request's Plan (what a mode decides) and the Counts (what the executor counted)."""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np


@dataclass(frozen=True, eq=False)
class Plan:
    """What a mode decides for one request (strategies.py `_plan`): the switch, and what the Infer carries besides the
    observation (the Infer fields of the same names; None or 0: not sent)."""

    mode: str  # the mode it is planned in: "sync" for a first request (nothing to overlap with), else the mode
    switch_step: int  # control step at which the new chunk is planned to take over
    first_index: int  # chunk index it runs at that step
    align: bool  # a late reply runs the index aligned with time (async); False: first_index on arrival (sync)
    delay: int = 0  # d, control steps, the plan assumes
    delay_steps: int = 0  # d * q: chunk indices the robot runs before the new chunk takes over
    future_state: np.ndarray | None = None  # vlash: the state at the switch
    prefix: np.ndarray | None = None  # prefix, faster: the committed actions, returned bit-exact
    guidance: np.ndarray | None = None  # rtc: the running chunk's leftover
    schedule: str | None = None  # the sampling schedule (None: the server's default)


@dataclass(frozen=True)
class Counts:
    """What an executor counted since it was made (ChunkExecutor.counts, a snapshot: `plus` returns a new one). The
    names are RunSummary's where a count is reported there."""

    requests: int = 0  # requests made (a request the link refused to send included)
    chunks: int = 0  # chunks that took over
    waiting_steps: int = 0  # ticks that returned None by design: the first chunk, sync (the link healthy)
    missed_deadlines: int = 0  # ticks whose running chunk had no final action for them (starved)
    stale_replies: int = 0  # replies for no open request (superseded, finished, reset) or that are no reply at all
    errors: int = 0  # server errors, and replies that did not fit their chunk
    dropped: int = 0  # requests the server dropped for a newer one (ERROR DROPPED)
    timeouts: int = 0  # pending requests abandoned after request_timeout_s
    too_late: int = 0  # chunks whose takeover index was past their last row when they could take over
    deferred: int = 0  # due requests put off a tick: the actions they need to plan were not final yet
    link_errors: int = 0  # times the link failed (submit or poll raised)
    link_lost_steps: int = 0  # ticks while the link counted as lost

    def plus(self, **increments: int) -> Counts:
        """These counts with `increments` added (keyword names are the fields: a misspelt one raises)."""
        return replace(self, **{name: getattr(self, name) + n for name, n in increments.items()})
