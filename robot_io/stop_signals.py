"""Stop signals: SIGINT (Ctrl-C) and SIGTERM (a supervisor) handled for the length of a block, and the handlers
that were there before put back after it, so a process that goes on (a test runner calling a command in-process,
a Python program around a run) keeps its own: pytest, left with a handler that only sets an event, would ignore
both.

    stop = StopRequest()
    with handle_stop_signals(stop):     # the first signal sets `stop`; a second raises KeyboardInterrupt
        run_robot(robot, client, config, stop=stop.event)
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


@contextmanager
def handle_stop_signals(handler: Callable[[int], None]) -> Iterator[None]:
    """`handler(signum)` on SIGINT and SIGTERM inside the block (main thread only, as Python's signal module
    requires), the previous handlers restored on the way out, however the block ends."""
    previous: dict[int, Any] = {}
    try:
        for sig in STOP_SIGNALS:
            previous[sig] = signal.signal(sig, lambda signum, frame: handler(signum))
        yield
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)


class StopRequest:
    """A stop asked for by a signal: the first one sets `event` (the run ends after its current tick), a second
    one raises KeyboardInterrupt (stop at once, without the clean end)."""

    def __init__(self) -> None:
        self.event = threading.Event()
        self.signum: int | None = None  # the first signal received

    def __call__(self, signum: int) -> None:
        if self.signum is not None:
            raise KeyboardInterrupt
        self.signum = signum
        self.event.set()

    @property
    def name(self) -> str:
        """The signal's name and what sends it, e.g. 'SIGINT (Ctrl-C)'; '' before any signal."""
        if self.signum is None:
            return ""
        name = signal.Signals(self.signum).name
        return f"{name} (Ctrl-C)" if self.signum == signal.SIGINT else name

    @property
    def exit_code(self) -> int:
        """The shell's code for a process ended by the signal: 128 + its number (130 for SIGINT); 0 before any."""
        return 0 if self.signum is None else 128 + self.signum
