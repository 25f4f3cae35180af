"""Training progress with a free-text field (loss, steps/s, success rate): vlash.progress's rich bar on a
terminal, plain lines in a log; nothing when disabled."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager

from vlash.progress import progress

Advance = Callable[[int, str], None]  # advance(steps done since the last call, info text)


@contextmanager
def progress_bar(description: str, total: int, enabled: bool = True) -> Iterator[Advance]:
    """Yield `advance(n, info)`; reports on stderr when `enabled` (stdout stays clean for --json)."""
    with progress(description, total, enabled=enabled) as update:
        done = 0

        def advance(n: int, info: str = "") -> None:
            nonlocal done
            done += n
            update(done, info)

        yield advance
