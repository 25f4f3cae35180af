"""A rich progress bar with a free-text field (loss, steps/s, success rate), or nothing when disabled."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)

Advance = Callable[[int, str], None]  # advance(steps done since the last call, info text)


@contextmanager
def progress_bar(description: str, total: int, enabled: bool = True) -> Iterator[Advance]:
    """Yield `advance(n, info)`; draws a bar on stderr when `enabled`."""
    if not enabled:
        yield lambda n, info="": None
        return
    columns = (
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("{task.fields[info]}"),
        TimeElapsedColumn(),
        TimeRemainingColumn(),
    )
    with Progress(*columns, console=Console(stderr=True)) as bar:  # stdout stays clean for --json
        task = bar.add_task(description, total=total, info="")

        def advance(n: int, info: str = "") -> None:
            bar.update(task, advance=n, info=info)

        yield advance
