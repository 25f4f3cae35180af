"""The hostile clients of tools/bench_stalls.py, each run in its own process (`python tools/bench_stalls.py --hostile
KIND ...`) so that its Python work is not the measured robot's GIL: what issue 42 measured against a live server.

    malformed-headers  one DEALER keeping 50 header frames of 65,531 empty msgpack lists in flight (each refused)
    websocket-flood    100 openpi websocket clients, each sending valid observations back to back
    openpi-bombs       4 openpi websocket clients, each sending hostile frames back to back (16 MiB of empty lists,
                       a map 995 deep, 2**20 keys), reconnecting after every refusal

A kind runs until SIGTERM, prints "ready" on stdout once every client has connected, "answered" once the server has
replied to it the first time, and at its end one JSON line of counts: sent, answered (a reply of any kind), refused
(an error reply or a refusal at connect). The end comes within STOP_S of the SIGTERM: a client still waiting on a
connection or a reply (up to TIMEOUT_S each, on a loaded machine) is left behind, so the counts always come back.
"""

from __future__ import annotations

import itertools
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass

import numpy as np
import zmq
from websockets.exceptions import ConnectionClosed, InvalidStatus
from websockets.sync.client import ClientConnection, connect

from vlash.server.openpi_codec import packb, unpackb

MALFORMED_HEADER = b"\xdd" + (65531).to_bytes(4, "big") + b"\x90" * 65531  # issue 42's repro: a list, not a map
IN_FLIGHT = 50
FLOOD_CLIENTS = 100
BOMB_CLIENTS = 4
TIMEOUT_S = 30.0
STOP_S = 5.0  # after SIGTERM, the clients get this long to finish; one still waiting on a reply is left behind
NICE = 19  # the hostile processes' niceness
KINDS = ("malformed-headers", "websocket-flood", "openpi-bombs")


@dataclass
class Counts:
    sent: int = 0
    answered: int = 0
    refused: int = 0  # error replies, and connections the endpoint refused
    on_first_answer: Callable[[], None] = lambda: None

    def __post_init__(self) -> None:
        self._lock = threading.Lock()

    def as_dict(self) -> dict[str, int]:
        with self._lock:
            return {"sent": self.sent, "answered": self.answered, "refused": self.refused}

    def add(self, sent: int = 0, answered: int = 0, refused: int = 0) -> None:
        with self._lock:
            first = self.answered == 0 and answered > 0
            self.sent, self.answered, self.refused = self.sent + sent, self.answered + answered, self.refused + refused
            if first:
                self.on_first_answer()


def _bombs() -> list[bytes]:
    many_keys = 2**20
    keys = b"".join(b"\xa4" + f"{i:04x}".encode()[-4:] + b"\x00" for i in range(many_keys))  # duplicates are fine
    return [
        b"\xdd" + (16 * 1024 * 1024).to_bytes(4, "big") + b"\x90" * (16 * 1024 * 1024),
        b"\x81\xa1k" * 995 + b"\xc0",
        b"\xdf" + many_keys.to_bytes(4, "big") + keys,
    ]


def malformed_headers(endpoint: str, stop: threading.Event, counts: Counts, ready: Callable[[], None]) -> None:
    context = zmq.Context.instance()
    dealer = context.socket(zmq.DEALER)
    dealer.setsockopt(zmq.LINGER, 0)
    dealer.connect(endpoint)
    for _ in range(IN_FLIGHT):
        dealer.send(MALFORMED_HEADER)
    counts.add(sent=IN_FLIGHT)
    ready()
    while not stop.is_set():
        if dealer.poll(100):
            dealer.recv_multipart()
            dealer.send(MALFORMED_HEADER)
            counts.add(sent=1, answered=1, refused=1)  # every one of them is refused
    dealer.close()


def _open(url: str, counts: Counts, stop: threading.Event) -> tuple[ClientConnection, dict] | None:
    """A connection and its metadata frame; None (counted refused, after a pause) when the endpoint refuses it."""
    while not stop.is_set():
        try:
            ws = connect(url, compression=None, max_size=None, open_timeout=TIMEOUT_S)
            return ws, unpackb(ws.recv(timeout=TIMEOUT_S))
        except (InvalidStatus, ConnectionClosed, OSError, TimeoutError):
            counts.add(refused=1)
            stop.wait(0.05)
    return None


def _observation(metadata: dict, rng: np.random.Generator) -> bytes:
    images = {
        camera["name"]: rng.integers(0, 256, (camera["height"], camera["width"], 3), dtype=np.uint8)
        for camera in metadata["cameras"]
    }
    state = rng.standard_normal(metadata["state_dim"]).astype(np.float32)
    return packb({"images": images, "state": state, "prompt": "pick up the cube"})


def _websocket_client(
    url: str, frames: Callable[[dict], Iterable[bytes]], stop: threading.Event, counts: Counts
) -> None:
    """Send `frames(metadata)` one after another, each after the previous one's reply, until `stop`."""
    while not stop.is_set():
        opened = _open(url, counts, stop)
        if opened is None:
            return
        ws, metadata = opened
        try:
            for frame in frames(metadata):
                if stop.is_set():
                    break
                ws.send(frame)
                reply = ws.recv(timeout=TIMEOUT_S)
                refused = isinstance(reply, str)  # openpi's error reply: the connection closes next
                counts.add(sent=1, answered=1, refused=int(refused))
                if refused:
                    break
        except (ConnectionClosed, TimeoutError, OSError):
            pass
        finally:
            ws.close()


def _clients(count: int, run: Callable[[threading.Event], None], stop: threading.Event, ready) -> None:
    threads = [threading.Thread(target=run, args=(stop,), daemon=True) for _ in range(count)]
    for thread in threads:
        thread.start()
    ready()
    stop.wait()
    deadline = time.monotonic() + STOP_S  # the counts are printed on time, whatever a client is still waiting for
    for thread in threads:
        thread.join(max(0.0, deadline - time.monotonic()))


def websocket_flood(url: str, stop: threading.Event, counts: Counts, ready: Callable[[], None]) -> None:
    rng = np.random.default_rng(0)

    def frames(metadata: dict) -> Iterable[bytes]:
        return itertools.repeat(_observation(metadata, rng))  # the same observation, back to back

    _clients(FLOOD_CLIENTS, lambda s: _websocket_client(url, frames, s, counts), stop, ready)


def openpi_bombs(url: str, stop: threading.Event, counts: Counts, ready: Callable[[], None]) -> None:
    bombs = _bombs()
    turn = iter(range(10**9))
    _clients(BOMB_CLIENTS, lambda s: _websocket_client(url, lambda _: [bombs[next(turn) % 3]], s, counts), stop, ready)


def run_hostile(kind: str, endpoint: str, openpi_url: str, nice: int) -> int:
    """The `--hostile KIND` process: at niceness `nice`, run until SIGTERM, then print the counts."""
    os.nice(nice)
    stop, counts = threading.Event(), Counts(on_first_answer=lambda: print("answered", flush=True))
    signal.signal(signal.SIGTERM, lambda *_: stop.set())

    def ready() -> None:
        print("ready", flush=True)

    if kind == "malformed-headers":
        malformed_headers(endpoint, stop, counts, ready)
    elif kind == "websocket-flood":
        websocket_flood(openpi_url, stop, counts, ready)
    else:
        openpi_bombs(openpi_url, stop, counts, ready)
    print(json.dumps(counts.as_dict()), flush=True)
    return 0


@dataclass
class Hostile:
    """A running `--hostile KIND` process and what it has printed."""

    kind: str
    proc: subprocess.Popen
    reader: threading.Thread
    lines: list[str]
    answered: threading.Event  # set once the server has replied to it


def start_hostile(kind: str, endpoint: str, openpi_url: str, tool: str, nice: int = NICE) -> Hostile:
    """The `kind` process at niceness `nice`, started and running (its "ready" read)."""
    # niced (by itself, at its start: nothing runs between fork and exec in this threaded process): on a real robot
    # network the attacker's own CPU is another machine's, not the server's cores
    cmd = [sys.executable, tool, "--hostile", kind, "--endpoint", endpoint, "--openpi-url", openpi_url]
    proc = subprocess.Popen([*cmd, "--hostile-nice", str(nice)], stdout=subprocess.PIPE, text=True)
    lines: list[str] = []
    ready, answered = threading.Event(), threading.Event()

    def read() -> None:
        for line in proc.stdout:
            lines.append(line.strip())
            said = {"ready": ready, "answered": answered}.get(line.strip())
            if said is not None:
                said.set()

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    began = time.monotonic()
    while not ready.wait(0.1):
        if proc.poll() is not None or time.monotonic() - began > 120:
            proc.kill()
            raise RuntimeError(f"hostile client {kind} never got ready (exit {proc.poll()})")
    return Hostile(kind, proc, reader, lines, answered)


def wait_answered(hostile: Hostile, timeout_s: float) -> None:
    """Return once the server has replied to `hostile`; RuntimeError after `timeout_s` (the caller stops it)."""
    if not hostile.answered.wait(timeout_s):
        raise RuntimeError(f"the server answered no {hostile.kind} frame in {timeout_s:g} s")


def stop_hostile(hostile: Hostile) -> dict:
    """SIGTERM the process, wait, and return its counts; {} with a line on stderr saying why when it printed none."""
    hostile.proc.terminate()
    killed = False
    try:
        hostile.proc.wait(STOP_S + 10)
    except subprocess.TimeoutExpired:  # it prints its counts within STOP_S: one still running is wedged, and killed
        hostile.proc.kill()
        hostile.proc.wait()
        killed = True
    hostile.reader.join(5)
    counts = [line for line in hostile.lines if line.startswith("{")]
    if not counts:
        why = f"killed {STOP_S + 10:g} s after SIGTERM" if killed else f"exit code {hostile.proc.returncode}"
        print(f"hostile client {hostile.kind} printed no counts ({why}; reader alive: {hostile.reader.is_alive()})",
              file=sys.stderr, flush=True)  # fmt: skip
    return json.loads(counts[-1]) if counts else {}
