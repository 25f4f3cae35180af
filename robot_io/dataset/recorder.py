"""DatasetRecorder: a TraceSink (robot_io.run_trace) that records what the robot did as a LeRobot dataset
(`vlash run --record-dataset DIR`), for fine-tuning the policy on its own rollouts with lerobot-train.

A frame per control tick (robot_io.dataset.layout lists its features): the observation the tick read and the action
actually sent, with the tick's chunk, index, hold flag and mode. The task is the prompt the policy got (--prompt,
else the observation's: a simulated task's instruction). A tick that read no observation (a stalled camera) or sent
nothing has no frame (counted as skipped).

Episodes: a robot that runs episodes (the simulator) says where each begins (the tick's `reset`); every other robot
is one episode per run: record each episode with its own `vlash run`, appending to the same DIR.

The control loop only copies the tick's arrays and frames and hands them over; one worker thread writes them (the
standalone writer encodes the PNGs on threads of its own). When MAX_FRAMES_QUEUED ticks' frames wait for it, the
next ticks' frames are dropped, not queued (counted per episode; a dropped frame is a gap: `vlash.step` jumps where
`frame_index` does not). Closing (after the summary) saves the last episode, writes the metadata and commits
DIR.partial (robot_io.dataset.directory); a run that recorded no frame, or whose writing failed, leaves nothing. A
commit that fails (DIR changed under the run, a full disk) never discards the recording: it stays in DIR.partial,
and the outcome line says so.
meta/vlash/run-NNN.jsonl keeps the run: {"kind": "run"} (settings, writer), every chunk record, each episode's
counts, then the summary.
"""

from __future__ import annotations

import json
import logging
import os
import queue
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from robot_io.dataset.directory import JOURNAL, commit, discard, real_target
from robot_io.dataset.layout import ACTION, IMAGES, STATE, VLASH_DIR
from robot_io.executors import ChunkRecord

log = logging.getLogger(__name__)
MAX_FRAMES_QUEUED = 30  # ticks whose frames wait for the worker (1 s at 30 Hz); more are dropped, not queued


class DatasetRecorder:
    """Records one run into a LeRobot dataset at `target` with `writer` (robot_io.dataset.open_dataset builds both)."""

    wants_ticks = True
    wants_images = True  # the runner adds the observation's frames and prompt to each tick row

    def __init__(self, target: Path, writer: Any, task: str = "", run: dict[str, Any] | None = None,
                 appending: bool = False) -> None:  # fmt: skip
        """`writer`: a ParquetDatasetWriter or LeRobotWriter writing into DIR.partial; `task`: the prompt given to
        the policy ("" : each tick's observation's); `run`: settings for the run's line in meta/vlash."""
        self.path, self.writer, self.task, self.appending = target, writer, task, appending
        self.partial: Path = writer.root
        self.error: Exception | None = None  # why the dataset was not written
        self.committing = False  # the recording is whole and being moved to DIR: from here on it is never discarded
        self.episodes = self.frames = self.dropped_frames = self.skipped_frames = 0
        self._episode = dict(frames=0, dropped=0, skipped=0, first_step=None)
        self._run_log = (self.partial / "run.jsonl").open("w", encoding="utf-8")
        self._line({"kind": "run", "writer": writer.name, **(run or {})})
        self._frames_queued = threading.BoundedSemaphore(MAX_FRAMES_QUEUED)
        self._work: queue.SimpleQueue[Callable[[], None] | None] = queue.SimpleQueue()
        self._worker = threading.Thread(target=self._drain, name="dataset", daemon=True)
        self._worker.start()

    # -- the TraceSink calls, on the control loop's thread: copy and hand over -----------------------------------

    def tick(self, row: dict[str, Any]) -> None:
        if row["reset"]:
            self._work.put(self._end_episode)
        images = row.get("images")
        if images is None or row["command"] is None:
            self._work.put(lambda: self._count("skipped"))
            return
        if not self._frames_queued.acquire(blocking=False):
            self._work.put(lambda: self._count("dropped"))
            return
        frame = {
            STATE: np.array(row["state"], np.float32),
            ACTION: np.array(row["command"], np.float32),
            **{IMAGES + name: np.array(image, copy=True) for name, image in images.items()},
            "vlash.step": int(row["step"]),
            "vlash.chunk_id": int(row["chunk"]),
            "vlash.chunk_index": int(row["index"]),
            "vlash.held": int(bool(row["held"])),
            "vlash.mode": str(row.get("mode", "")),
        }
        task = self.task or str(row.get("prompt", ""))
        self._work.put(lambda: self._add(frame, task))

    def chunk(self, record: ChunkRecord) -> None:
        row = record.trace_row()  # now: the worker thread writes it later
        self._work.put(lambda: self._line({"kind": "chunk", **row}))

    def summary(self, summary: dict[str, Any]) -> None:
        self._work.put(self._end_episode)  # the run is over: its last episode too
        self._work.put(lambda: self._line({"kind": "summary", **summary}))

    def close(self) -> None:
        """Write what is queued, save the last episode, finalize and commit (module doc); `error` says why not."""
        if not self._worker.is_alive():
            return
        self._work.put(None)
        self._worker.join()
        if self.error is None:
            self._guarded(self._end_episode)
        if self.error is None and self.frames == 0:
            self.error = RuntimeError("no frame was recorded")
        self._run_log.close()
        if self.error is None:
            self._guarded(self._commit)
        if self.error is not None and not self.committing:  # a failed commit keeps what it was moving
            try:
                self.writer.close()
            except Exception:  # noqa: BLE001 - it failed already; what it holds is discarded either way
                log.debug("dataset: closing the writer after a failure failed too", exc_info=True)
            discard(self.partial)
        if self.dropped_frames:
            log.warning("dataset: %d frames dropped (the writer fell behind)", self.dropped_frames)

    @property
    def outcome(self) -> str:
        """One line for the end of a run (after close): what was recorded, or why nothing was."""
        if self.error is not None and self.committing:
            if (self.partial / JOURNAL).is_file():
                return (f"{self.path}: appending was cut short ({self.error}); the next `vlash run --record-dataset "
                        f"{self.path}` finishes it from {self.partial / JOURNAL}")  # fmt: skip
            kept = f"it is kept in {self.partial}" + ("" if self.appending else ", a whole dataset: rename it yourself")
            return f"{self.path}: the recording could not be moved there ({self.error}); {kept}"
        if self.error is not None:
            return f"{self.path}: no dataset written ({self.error})"
        verb = "appended to" if self.appending else "wrote"
        line = f"{verb} {self.path} ({self.writer.name} writer): episodes {self.episodes}, frames {self.frames}"
        if self.dropped_frames or self.skipped_frames:
            line += f" ({self.dropped_frames} dropped: the writer fell behind; {self.skipped_frames} skipped)"
        return line

    def __enter__(self) -> DatasetRecorder:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- the worker thread ----------------------------------------------------------------------------------------

    def _drain(self) -> None:
        while (job := self._work.get()) is not None:
            self._guarded(job)

    def _guarded(self, job: Callable[[], None]) -> None:
        """Run a job unless writing already failed; a failure stops the recording, never the robot."""
        if self.error is not None:
            return
        try:
            job()
        except Exception as exc:  # noqa: BLE001 - disk full, a frame of another shape: the dataset is dropped
            self.error = exc
            log.warning("dataset %s: writing stopped (%s); the run goes on", self.path, exc)

    def _add(self, frame: dict[str, Any], task: str) -> None:
        try:
            if self._episode["first_step"] is None:
                self._episode["first_step"] = frame["vlash.step"]
            self.writer.add_frame(frame, task)
            self._episode["frames"] += 1
            self.frames += 1
        finally:
            self._frames_queued.release()

    def _count(self, kind: str) -> None:
        self._episode[kind] += 1
        if kind == "dropped":
            self.dropped_frames += 1
        else:
            self.skipped_frames += 1

    def _end_episode(self) -> None:
        index = self.writer.save_episode()
        if index is not None:
            self.episodes += 1
            self._line({"kind": "episode", "episode_index": index, **self._episode})
        self._episode = dict(frames=0, dropped=0, skipped=0, first_step=None)

    def _line(self, obj: dict[str, Any]) -> None:
        self._run_log.write(json.dumps(obj, default=_plain) + "\n")

    def _commit(self) -> None:
        self.writer.finalize()
        runs = self.path / VLASH_DIR
        number = len(list(runs.glob("run-*.jsonl"))) if self.appending else 0
        (self.partial / VLASH_DIR).mkdir(parents=True, exist_ok=True)
        os.replace(self.partial / "run.jsonl", self.partial / VLASH_DIR / f"run-{number:03d}.jsonl")
        self.committing = True
        commit(self.partial, real_target(self.path), self.appending)


def _plain(value: Any) -> Any:
    """JSON for numpy values in records and summaries."""
    return value.tolist() if isinstance(value, np.ndarray | np.generic) else str(value)
