"""Ctrl-C during `vlash train`: the progress is kept, never written over --out.

The optimizer's update (the step, the schedule, the moving average, the step's curves) runs with SIGINT held off
(`sigint_deferred`), so whenever Ctrl-C lands the weights are those after a whole number of steps. The trainer then
writes them, with the train log up to that step, to OUT.interrupted (`interrupted_path`): a training-run directory
like OUT itself, written atomically (vlash.atomic), which a later interrupted run replaces. It loads, serves and
evaluates as any policy, and `vlash train --init-from OUT.interrupted` trains on from its weights (the optimizer's
moments and the schedule start anew). `TrainingInterrupted` (a KeyboardInterrupt) says where it went.
No torch here: `vlash train` checks OUT.interrupted before anything heavy loads.
"""

from __future__ import annotations

import os
import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

INTERRUPTED_SUFFIX = ".interrupted"


def interrupted_path(out: str | os.PathLike[str]) -> Path:
    """OUT.interrupted, next to OUT."""
    path = Path(os.path.abspath(out))
    return path.with_name(path.name + INTERRUPTED_SUFFIX)


class TrainingInterrupted(KeyboardInterrupt):
    """Ctrl-C during the training steps. `step`: the steps done (of `final_step`); `kept`: the training-run directory
    that holds them (None when no step was done); `checkpoint`: the step of the last checkpoint this run wrote to
    `out` (TrainConfig.checkpoint_every; 0: none, `out` is as it was)."""

    def __init__(self, out: str, step: int, final_step: int, kept: Path | None, checkpoint: int = 0) -> None:
        self.out, self.step, self.final_step, self.kept, self.checkpoint = out, step, final_step, kept, checkpoint
        super().__init__(self.line())

    def line(self) -> str:
        """One line for the user: where the progress went and how to use it."""
        was = f"holds the checkpoint of step {self.checkpoint}" if self.checkpoint else "was not replaced"
        head = f"interrupted at step {self.step}/{self.final_step}: {self.out} {was}"
        if self.kept is None:
            return f"{head}; no step was done, nothing to keep"
        return (
            f"{head}; the policy as of step {self.step} is in {self.kept} (serve or evaluate it as it is, or train "
            f"on from it: vlash train --init-from {self.kept} ...)"
        )


@contextmanager
def sigint_deferred() -> Iterator[None]:
    """Hold SIGINT off until the block ends, then raise KeyboardInterrupt if it came: the block runs whole or not at
    all. Only on the main thread while Python's own handler is installed (signals reach no other thread)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    if signal.getsignal(signal.SIGINT) is not signal.default_int_handler:
        yield
        return
    caught: list[int] = []
    signal.signal(signal.SIGINT, lambda signum, frame: caught.append(signum))
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    if caught:
        raise KeyboardInterrupt
