"""What a run remembers per tick and per chunk, in bounded memory: a ring of recent ticks, and files written as
the run goes for everything.

TickWindow keeps the last N ticks in preallocated arrays (RunConfig.trace_ticks; what RunResult returns for plots
such as `vlash demo`'s). A TraceSink receives every tick (`tick(row)`, when its `wants_ticks`), every chunk record
once it is final (`chunk(record)`) and the summary at the end (`summary(dict)`); the runner keeps nothing for it.

    JsonLinesTrace(path)   one JSON object per line: {"kind": "tick", ...} per tick, {"kind": "chunk", ...} per
                           chunk record (in the order they became final), then {"kind": "summary", ...}
    JsonReport(path)       one JSON document {"chunks": [...], "summary": {...}}, the chunk array streamed
"""

from __future__ import annotations

import json
import logging
import math
from pathlib import Path
from typing import IO, Any, Protocol

import numpy as np

from robot_io.executors import ChunkRecord

log = logging.getLogger(__name__)
TICK_FIELDS = ("t", "step", "state", "command", "held", "chunk", "index", "tick_ms", "reset")


class TraceSink(Protocol):
    wants_ticks: bool  # False: the runner does not build the per-tick rows for it
    # (optional) wants_images: True adds the observation's camera frames ("images": name -> array) and its prompt
    # ("prompt", "" when none) to its tick rows; a tick without an observation (a stalled camera) has neither

    def tick(self, row: dict[str, Any]) -> None: ...

    def chunk(self, record: ChunkRecord) -> None: ...

    def summary(self, summary: dict[str, Any]) -> None: ...


class TickWindow:
    """The last `capacity` ticks (0: none, only counted) in preallocated arrays, overwritten in a ring."""

    def __init__(self, capacity: int, state_dim: int, action_dim: int) -> None:
        if not (isinstance(capacity, int) and capacity >= 0):
            raise ValueError(f"TickWindow.capacity must be an int >= 0, got {capacity!r}")
        n = capacity
        self.capacity, self.total = capacity, 0  # total: ticks appended, including those overwritten
        self.t = np.zeros(n, np.float64)  # tick start since the first tick [s]
        self.step = np.zeros(n, np.int64)
        self.state = np.zeros((n, state_dim), np.float32)
        self.command = np.zeros((n, action_dim), np.float32)  # NaN: nothing sent
        self.held = np.zeros(n, bool)
        self.chunk = np.zeros(n, np.int64)
        self.index = np.zeros(n, np.int64)
        self.tick_ms = np.zeros(n, np.float64)
        self.reset = np.zeros(n, bool)  # a new episode began at this tick (not the first)

    def append(self, **row: Any) -> None:
        """One tick's TICK_FIELDS; `command` None: nothing was sent (stored as NaN)."""
        if self.capacity:
            i = self.total % self.capacity
            for name in TICK_FIELDS:
                value = row[name]
                getattr(self, name)[i] = np.nan if value is None else value
        self.total += 1

    def arrays(self) -> dict[str, np.ndarray]:
        """Each field's ticks held, oldest first (copies)."""
        n = min(self.total, self.capacity)
        order = np.arange(self.total - n, self.total) % max(self.capacity, 1)
        return {name: getattr(self, name)[order] for name in TICK_FIELDS}


def _plain(value: Any) -> Any:
    """JSON-ready: arrays as lists rounded to 6 decimals, NaN/inf as None (JSON has neither)."""
    if isinstance(value, np.ndarray):
        return [_plain(v) for v in value.astype(np.float64).round(6).tolist()]
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float):
        return round(value, 6) if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    return value


class _File:
    """A text file written from the control loop: a failing write (disk full) is logged once and stops the file,
    never the robot; `error` says why the file is incomplete."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._file: IO[str] | None = self.path.open("w", encoding="utf-8")
        self.error: OSError | None = None

    def _write(self, text: str) -> None:
        if self.error is not None:
            return
        try:
            self._file.write(text)
        except OSError as exc:
            self.error = exc
            log.warning("%s: writing stopped (%s); the run goes on", self.path, exc)

    def close(self) -> None:
        if self._file is not None:
            try:
                self._file.close()
            except OSError as exc:  # the buffered tail could not be written
                self.error = self.error or exc
            self._file = None

    def __enter__(self):
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class JsonLinesTrace(_File):
    """Every tick, every chunk record and the summary, one JSON object per line (module doc)."""

    wants_ticks = True

    def tick(self, row: dict[str, Any]) -> None:
        self._line({"kind": "tick", **row})

    def chunk(self, record: ChunkRecord) -> None:
        self._line({"kind": "chunk", **record.trace_row()})

    def summary(self, summary: dict[str, Any]) -> None:
        self._line({"kind": "summary", **summary})

    def _line(self, obj: dict[str, Any]) -> None:
        self._write(json.dumps(_plain(obj), allow_nan=False) + "\n")


class JsonReport(_File):
    """{"chunks": [every chunk record], "summary": {...}}, the records written as they become final (module doc).
    Closed without a summary (the run failed), the document still parses, with "summary": null."""

    wants_ticks = False

    def __init__(self, path: str | Path) -> None:
        super().__init__(path)
        self._chunks, self._summary = 0, None
        self._write('{"chunks": [')

    def tick(self, row: dict[str, Any]) -> None:
        pass

    def chunk(self, record: ChunkRecord) -> None:
        self._write(("," if self._chunks else "") + "\n  " + json.dumps(_plain(record.trace_row()), allow_nan=False))
        self._chunks += 1

    def summary(self, summary: dict[str, Any]) -> None:
        self._summary = summary

    def close(self) -> None:
        if self._file is not None:
            self._write('\n],\n"summary": ' + json.dumps(_plain(self._summary), allow_nan=False) + "}\n")
        super().close()
