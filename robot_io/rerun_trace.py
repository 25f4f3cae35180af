"""A run you can watch and replay: a TraceSink (robot_io.run_trace) that logs every tick and chunk to rerun, live
to a viewer (`vlash run --display`) and/or to a file (`--record run.rrd`, `rerun run.rrd` opens it). The `[viz]`
extra (rerun-sdk); LeRobot's convention (`--display_data`).

What is logged, on the timelines `step` (control steps) and `time` (seconds since the first tick):
    camera/NAME            each camera frame (JPEG-compressed; every `image_every`-th tick)
    state/NAME, command/NAME   measured state and the command sent, one scalar series per joint
    held                   1 on a tick the watchdog held the last command, else 0
    chunk/id, chunk/index  the chunk running and its index (-1: none)
    chunks                 a text line per chunk once its record is final: mode, when it was requested and took
                           over, its latency (logged at its switch step, so chunk boundaries are marked)
    latency_ms             each chunk's request -> final latency, at the step its final message arrived
    summary                the run's summary, at the end

The control loop only hands each tick over (a copy of its arrays and frames): one worker thread per trace encodes
the JPEGs and logs, so a 640 x 480 frame's ~5 ms of encoding never lands in a tick. When the worker falls behind by
MAX_FRAMES_QUEUED ticks' frames, the next ticks' frames are dropped (counted in `dropped_frames`, logged at the end);
the series never are.

Under a `root` (the mode, in `vlash demo`) every path above is ROOT/path.

    with RerunRecording("vlash run", display=True, path=Path("run.rrd")) as recording:
        run_robot(..., traces=[RerunTrace(recording, names=(robot.state_names, robot.action_names))])
"""

from __future__ import annotations

import importlib.util
import json
import logging
import os
import queue
import sys
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from robot_io.executors import ChunkRecord
from robot_io.protocol.errors import RobotIOError

log = logging.getLogger(__name__)
JPEG_QUALITY = 85
NO_RERUN = "--display / --record need rerun: pip install 'vlash[viz]'"
MAX_FRAMES_QUEUED = 8  # ticks whose camera frames wait for the worker; more are dropped, not queued


class RerunError(RobotIOError):
    """rerun is missing, or its viewer or file cannot be opened."""


def check_rerun() -> None:
    """RerunError (one line, naming the extra) when rerun is not installed: for commands that record only at the
    end and must say so before their work."""
    if importlib.util.find_spec("rerun") is None:
        raise RerunError(NO_RERUN)


class RerunRecording:
    """One rerun recording, shown live in a viewer (`display`) and/or written to `path` (.rrd). Several traces may
    log to it under their own roots (`vlash demo`: one per mode). Close it (or use it as a context manager) so every
    trace's worker has logged everything and the file is complete."""

    def __init__(self, application: str, display: bool = False, path: Path | None = None) -> None:
        if not display and path is None:
            raise ValueError("RerunRecording needs display=True or a path to write")
        try:
            import rerun as rr  # extra: viz
        except ModuleNotFoundError:
            raise RerunError(NO_RERUN) from None
        self.rr, self.path = rr, path
        self.stream = rr.RecordingStream(application)
        self.traces: list[RerunTrace] = []
        sinks = []
        if path is not None:
            path.parent.mkdir(parents=True, exist_ok=True)
            sinks.append(rr.FileSink(str(path)))
        if display:
            screen = os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY")
            if sys.platform.startswith("linux") and not screen:
                raise RerunError("--display: no screen here (DISPLAY is not set); record with --record FILE.rrd "
                                 "and open it with `rerun FILE.rrd` where there is one")  # fmt: skip
            try:
                rr.spawn(recording=self.stream, connect=False)  # the viewer binary ships with rerun-sdk
            except Exception as exc:  # noqa: BLE001 - no display, no viewer binary: one line, before the run
                raise RerunError(f"--display: cannot start the rerun viewer ({exc}); use --record FILE.rrd") from None
            sinks.append(rr.GrpcSink())
        self.stream.set_sinks(*sinks)

    def close(self) -> None:
        for trace in self.traces:
            trace.close()
        self.stream.flush()
        self.stream.disconnect()

    def __enter__(self) -> RerunRecording:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class RerunTrace:
    """Logs one run's ticks, chunks and summary to a RerunRecording under `root`, from its own worker thread
    (module doc)."""

    wants_ticks = True
    wants_images = True  # the runner adds the observation's camera frames to each tick row
    error = None  # rerun writes in the background and logs its own write errors

    def __init__(
        self,
        recording: RerunRecording,
        root: str = "",
        names: tuple[Sequence[str], Sequence[str]] = ((), ()),
        image_every: int = 1,
        keep_every_frame: bool = False,
    ) -> None:
        """`root`: entity path prefix ("" for a run alone, the mode in `vlash demo`); `names`: (state entry names,
        action names) for the series (default joint0, joint1, ...; settable once the robot is known);
        `image_every`: log every n-th camera frame; `keep_every_frame`: wait for the worker instead of dropping
        frames (a loop in simulated time, `vlash eval --record`, has no deadline to keep)."""
        if not (isinstance(image_every, int) and image_every >= 1):
            raise ValueError(f"image_every must be an int >= 1, got {image_every!r}")
        self._rr, self._stream = recording.rr, recording.stream
        self.path, self.image_every, self.names = recording.path, image_every, names
        self.keep_every_frame = keep_every_frame
        self._root = root.strip("/") + "/" if root.strip("/") else ""
        self.dropped_frames = 0  # ticks whose frames were not logged: the worker was MAX_FRAMES_QUEUED behind
        self._frames_queued = threading.BoundedSemaphore(MAX_FRAMES_QUEUED)
        self._work: queue.SimpleQueue[Callable[[], None] | None] = queue.SimpleQueue()
        self._worker = threading.Thread(target=self._drain, name=f"rerun-{root or 'run'}", daemon=True)
        self._worker.start()
        recording.traces.append(self)

    # -- the TraceSink calls, on the control loop's thread: copy and hand over -----------------------------------

    def tick(self, row: dict[str, Any]) -> None:
        images = row.get("images")
        frames = None
        if images and int(row["step"]) % self.image_every == 0:
            if self._frames_queued.acquire(blocking=self.keep_every_frame):
                frames = {name: np.array(image, copy=True) for name, image in images.items()}
            else:
                self.dropped_frames += 1
        state = None if row["state"] is None else np.array(row["state"], np.float64)
        command = None if row["command"] is None else np.array(row["command"], np.float64)
        scalars = (int(row["step"]), float(row["t"]), bool(row["held"]), int(row["chunk"]), int(row["index"]))
        self._work.put(lambda: self._log_tick(scalars, state, command, frames))

    def chunk(self, record: ChunkRecord) -> None:
        self._work.put(lambda: self._log_chunk(record))

    def summary(self, summary: dict[str, Any]) -> None:
        text = "```json\n" + json.dumps(summary, indent=2, default=str) + "\n```"
        self._work.put(
            lambda: self._stream.log(
                self._root + "summary", self._rr.TextDocument(text, media_type="text/markdown"), static=True
            )
        )

    def close(self) -> None:
        """Log what is queued and stop the worker (RerunRecording.close calls it)."""
        if self._worker.is_alive():
            self._work.put(None)
            self._worker.join()
            if self.dropped_frames:
                log.warning("rerun: %d ticks' camera frames dropped (encoding fell behind)", self.dropped_frames)

    # -- the worker thread ----------------------------------------------------------------------------------------

    def _drain(self) -> None:
        while (job := self._work.get()) is not None:
            try:
                job()
            except Exception:  # noqa: BLE001 - a recording problem never stops the robot
                log.exception("rerun: logging failed; the run goes on")

    def _log_tick(
        self, scalars: tuple, state: np.ndarray | None, command: np.ndarray | None, frames: dict | None
    ) -> None:
        rr, stream, root = self._rr, self._stream, self._root
        step, t, held, chunk, index = scalars
        stream.set_time("step", sequence=step)
        stream.set_time("time", duration=t)
        if state is not None:
            self._series("state", state, self.names[0])
        if command is not None:
            self._series("command", command, self.names[1])
        stream.log(root + "held", rr.Scalars([float(held)]))
        stream.log(root + "chunk/id", rr.Scalars([float(chunk)]))
        stream.log(root + "chunk/index", rr.Scalars([float(index)]))
        if frames is not None:
            try:
                for name, image in frames.items():
                    stream.log(f"{root}camera/{name}", rr.Image(image).compress(jpeg_quality=JPEG_QUALITY))
            finally:
                self._frames_queued.release()

    def _log_chunk(self, record: ChunkRecord) -> None:
        rr, stream, root = self._rr, self._stream, self._root
        at = record.switch_step if record.switch_step is not None else record.request_step
        stream.disable_timeline("time")  # the last tick's time is not this step's: on the step timeline only
        stream.set_time("step", sequence=int(at))
        text = (
            f"chunk {record.chunk_id} ({record.mode}): requested at step {record.request_step}, "
            f"{record.status}" + ("" if record.switch_step is None else f", took over at step {record.switch_step}")
            + ("" if record.latency_ms is None else f", latency {record.latency_ms:.1f} ms")
        )  # fmt: skip
        level = "INFO" if record.status in ("done", "running") else "WARN"
        stream.log(root + "chunks", rr.TextLog(text, level=level))
        if record.latency_ms is not None and record.reply_step is not None:
            stream.set_time("step", sequence=int(record.reply_step))
            stream.log(root + "latency_ms", rr.Scalars([float(record.latency_ms)]))

    def _series(self, kind: str, values: np.ndarray, names: Sequence[str]) -> None:
        for i, value in enumerate(values.ravel()):
            name = names[i] if i < len(names) else f"joint{i}"
            self._stream.log(f"{self._root}{kind}/{name}", self._rr.Scalars([value]))


def read_recording(path: Path, timeline: str = "step") -> dict[str, dict[str, list]]:
    """A recording read back with rerun's own reader: entity path (no leading '/') -> {timeline: [values],
    "Component:field": [values]} in logged order (an image's "EncodedImage:blob" as its bytes); rows without the
    timeline (static: the summary) get None there. For tests and plots (tools/plot_recording.py), not for the
    control loop."""
    try:
        from rerun.chunk import RrdReader  # extra: viz
    except ModuleNotFoundError:
        raise RerunError("reading a recording needs rerun: pip install 'vlash[viz]'") from None
    entities: dict[str, dict[str, list]] = {}
    for chunk in RrdReader(str(path)).stream().to_chunks():
        entity = str(chunk.entity_path).lstrip("/")
        if entity.startswith("__"):  # rerun's own (recording properties)
            continue
        batch = chunk.to_record_batch()
        columns = entities.setdefault(entity, {})
        rows = batch.num_rows
        steps = batch.column(timeline).to_pylist() if timeline in batch.schema.names else [None] * rows
        columns.setdefault(timeline, []).extend(steps)
        for name in batch.schema.names:
            if ":" in name:  # a component's field ("Scalars:scalars"); the rest are times and row ids
                values = batch.column(name).to_pylist()
                if name.endswith(":blob"):  # an encoded image: its bytes
                    values = [bytes(v[0]) for v in values]
                columns.setdefault(name, []).extend(values)
    return entities
