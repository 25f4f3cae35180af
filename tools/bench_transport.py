"""Transport round trips on loopback: vlash's PolicyClient, raw ZeroMQ, and openpi's websocket protocol.

Every row sends the same request (2 x 224x224x3 uint8 images + a 32-dim state) and gets back a 50x32 float32
chunk; each server runs in its own process (as a policy server would). All rows run in one pass, interleaved
round by round (in a new random order each round), so the VM's drift falls on every row alike.

ZeroMQ rows (tcp and ipc), against echo ROUTERs:
- "protocol+client": PolicyClient.infer, real encode / decode of INFER and ACTIONS (each validated on receipt);
- "  + send check": the same with sender-side validation too (encode(validate=True) on both ends, opt-in);
- "raw zmq": the same bytes over bare DEALER/ROUTER, no codec, copying on send as PolicyClient does: the floor;
- "raw zero-copy": raw with copy=False (pyzmq releases the buffers through its garbage-collector thread).
openpi rows (websocket over tcp):
- "openpi ws echo": openpi's wire format (msgpack-numpy frames, compression off) against a websocket echo
  server that decodes each observation and encodes a reply, as the echo ROUTER does: the protocol's floor;
- "client->server": PolicyClient against a real PolicyServer whose model is an echo (no compute);
- "openpi->server": an openpi client against vlash's openpi endpoint (vlash.server.openpi_endpoint) in front
  of that server: websocket, observation mapping, then the in-process submit to the server. Minus "client->server" it
  is what the adapter adds.
The openpi client here is a minimal one with openpi's wire format (websockets' sync client as openpi's
WebsocketClientPolicy uses it, frames from vlash.server.openpi_codec, byte-identical to openpi's): the
openpi-client package pins numpy<2 and cannot be imported in the dev environment.
"codec only" is the four vlash codec calls of a round trip in process, without sockets.
Every row builds a fresh request per round outside the timed region, as a camera delivers new frames.

    python tools/bench_transport.py [--rounds 2000] [--warmup 200] [--paths ...] [--json]
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import queue
import random
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import ExitStack
from types import SimpleNamespace

import numpy as np
import zmq

from robot_io.client import PolicyClient
from robot_io.protocol import Actions, CameraSpec, Hello, Infer, Metadata, decode, encode
from vlash.runtime.request import RowEvent

CHUNK = np.random.default_rng(0).standard_normal((50, 32)).astype(np.float32)
METADATA = Metadata(
    "echo",
    [CameraSpec("front", 224, 224), CameraSpec("wrist", 224, 224)],
    32,
    32,
    50,
    50.0,
    "fp32",
    "echo",
    10,
    "constant",
    False,
)
START_S = 120.0  # a server process's start-up (the vlash server imports torch)


def serve(ready, stop, endpoint: str, raw: bool, validate: bool = False) -> None:
    """Echo ROUTER process: HELLO -> METADATA, each INFER -> one final ACTIONS (raw: fixed reply frames)."""
    context = zmq.Context()
    socket = context.socket(zmq.ROUTER)
    socket.setsockopt(zmq.LINGER, 0)
    socket.bind(endpoint)
    ready.put(socket.getsockopt_string(zmq.LAST_ENDPOINT))
    raw_reply = [b"h" * 120, CHUNK.data]
    while not stop.is_set():
        if not socket.poll(50):
            continue
        identity, *frames = socket.recv_multipart(copy=False)
        if raw:
            socket.send_multipart([identity, *raw_reply], copy=False)
            continue
        request = decode(frames)
        if isinstance(request, Hello):
            reply = METADATA
        else:
            reply = Actions(request.request_id, 0, CHUNK, True, 50, request.step_index, {"total_ms": 0.0})
        socket.send_multipart([identity, *encode(reply, validate=validate)], copy=False)
    socket.close(linger=0)
    context.term()


def serve_openpi_echo(ready, stop) -> None:
    """Websocket echo process with openpi's framing: metadata on connect, each observation decoded, a reply
    {"actions", "server_timing"} encoded."""
    from websockets.sync.server import serve as ws_serve

    from vlash.server.openpi_codec import packb, unpackb

    def handler(conn) -> None:
        conn.send(packb({"server": "echo"}))
        for frame in conn:
            unpackb(frame)
            conn.send(packb({"actions": CHUNK, "server_timing": {"infer_ms": 0.0}}))

    with ws_serve(handler, "127.0.0.1", 0, compression=None, max_size=None) as server:
        ready.put(f"ws://127.0.0.1:{server.socket.getsockname()[1]}")
        threading.Thread(target=server.serve_forever, daemon=True).start()
        stop.wait()
        server.shutdown()


ECHO_RESULT = SimpleNamespace(
    actions=CHUNK, timing_ms={"first_action_ms": 0.0, "total_ms": 0.0}, step_ms=[], final_rows=50
)


class EchoRuntime:
    """Stands in for PolicyRuntime inside PolicyServer (the interface its model thread uses): every request's chunk
    is CHUNK, without a model."""

    horizon, num_steps = 50, 1
    max_batch = None  # any batch size, as the torch engine

    def rows_needed(self, request) -> int:
        return self.horizon  # the whole chunk: no early stop

    def stream(self, requests, cancelled=None, pace=None) -> Iterator[RowEvent]:
        """A batch that is done at once: no partial actions, every row's result CHUNK (as PolicyRuntime.stream)."""
        return iter([RowEvent(i, result=ECHO_RESULT) for i in range(len(requests))])


def serve_vlash(ready, stop) -> None:
    """A real PolicyServer (echo model) with the openpi endpoint in front; puts (zmq endpoint, ws url)."""
    from vlash.server.config import OpenpiConfig, ServerConfig
    from vlash.server.openpi_endpoint import OpenpiEndpoint
    from vlash.server.server import PolicyServer

    # one request at a time: the two rows' clients take turns, and a batching server would wait up to batch_wait_ms
    # for the other one's request (BENCHMARKS.md, "Batched serving" measures that)
    server = PolicyServer(EchoRuntime(), METADATA, ServerConfig(bind="tcp://127.0.0.1:0", max_batch=1))
    endpoint = server.start()
    openpi = OpenpiEndpoint(server, OpenpiConfig(port=0))
    ready.put((endpoint, openpi.start()))
    stop.wait()
    openpi.stop()
    server.stop()


class ServerProcess:
    """`target(ready, stop, *args)` in its own process (spawned: it does not share our GIL)."""

    def __init__(self, target, *args) -> None:
        ctx = multiprocessing.get_context("spawn")
        ready, self._stop = ctx.Queue(), ctx.Event()
        self._process = ctx.Process(target=target, args=(ready, self._stop, *args), daemon=True)
        self._process.start()
        self.address = self._wait_ready(ready, target.__name__)

    def _wait_ready(self, ready, name: str):
        """The address the process puts once it serves; RuntimeError at once if it dies first (a crash in the
        server), not after START_S."""
        deadline = time.monotonic() + START_S
        while time.monotonic() < deadline:
            try:
                return ready.get(timeout=0.5)
            except queue.Empty:
                if not self._process.is_alive():
                    raise RuntimeError(f"{name} exited ({self._process.exitcode}) before serving") from None
        self.close()
        raise TimeoutError(f"{name} did not serve within {START_S:g} s")

    def close(self) -> None:
        self._stop.set()
        self._process.join(timeout=10)
        if self._process.is_alive():
            self._process.kill()


def make_request(request_id: int) -> Infer:
    images = {"front": np.full((224, 224, 3), 7, np.uint8), "wrist": np.full((224, 224, 3), 9, np.uint8)}
    return Infer(request_id, request_id, time.time_ns(), "pick up the cube", images, np.zeros(32, np.float32))


def openpi_observation(request_id: int) -> dict:
    """The same payload in openpi's terms (vlash's native layout, which the endpoint's `auto` map takes)."""
    request = make_request(request_id)
    return {"images": request.images, "state": request.state, "prompt": request.prompt}


class ProtocolRows:
    """PolicyClient.infer round trips (against an echo ROUTER or a PolicyServer)."""

    def __init__(self, endpoint: str, validate: bool = False) -> None:
        self._client = PolicyClient(endpoint, timeout_s=5.0, validate_requests=validate)
        self._client.connect()

    def once(self, i: int) -> float:
        request = make_request(i)  # built outside the timed region: the robot has the arrays already
        start = time.perf_counter()
        self._client.infer(request)
        return (time.perf_counter() - start) * 1e3

    def close(self) -> None:
        self._client.close()


class RawRows:
    """The same bytes over a bare DEALER: no codec."""

    def __init__(self, context: zmq.Context, endpoint: str, copy: bool = True) -> None:
        self._socket = context.socket(zmq.DEALER)
        self._socket.setsockopt(zmq.LINGER, 0)
        self._socket.connect(endpoint)
        self._copy = copy

    def once(self, i: int) -> float:
        request = make_request(i)  # fresh arrays each round, as in ProtocolRows (a camera's new frame)
        frames = [b"h" * 300, request.state.data, request.images["front"].data, request.images["wrist"].data]
        start = time.perf_counter()
        self._socket.send_multipart(frames, copy=self._copy)
        if not self._socket.poll(5000):
            raise TimeoutError("echo server did not answer within 5 s")
        self._socket.recv_multipart(copy=False)
        return (time.perf_counter() - start) * 1e3

    def close(self) -> None:
        self._socket.close(linger=0)


class OpenpiRows:
    """A minimal openpi client (see the module docstring): metadata frame on connect, one frame each way."""

    def __init__(self, url: str) -> None:
        from websockets.sync.client import connect

        from vlash.server.openpi_codec import packb, unpackb

        self._packb, self._unpackb = packb, unpackb
        self._stack = ExitStack()
        self._ws = self._stack.enter_context(connect(url, compression=None, max_size=None))
        unpackb(self._ws.recv(timeout=10))

    def once(self, i: int) -> float:
        observation = openpi_observation(i)
        start = time.perf_counter()
        self._ws.send(self._packb(observation))
        reply = self._ws.recv(timeout=5)
        if isinstance(reply, str):
            raise RuntimeError(f"openpi error reply: {reply}")
        self._unpackb(reply)
        return (time.perf_counter() - start) * 1e3

    def close(self) -> None:
        self._stack.close()


def codec_round_trips(rounds: int) -> list[float]:
    """The four codec calls of one round trip, in process, no sockets: encode+decode INFER and ACTIONS."""
    samples = []
    for i in range(rounds):
        request = make_request(i)
        start = time.perf_counter()
        received = decode(encode(request))
        decode(encode(Actions(received.request_id, 0, CHUNK, True, 50, received.step_index, {"total_ms": 0.0})))
        samples.append((time.perf_counter() - start) * 1e3)
    return samples


ZMQ_PATHS = {  # row label -> (raw sockets, validate on send, copy on send); over each transport
    "protocol+client": (False, False, True),
    "  + send check": (False, True, True),
    "raw zmq": (True, False, True),
    "raw zero-copy": (True, False, False),
}
OPENPI_PATHS = ("openpi ws echo", "client->server", "openpi->server")  # websocket rows: tcp only
PATHS = (*ZMQ_PATHS, *OPENPI_PATHS)
FLOOR = "raw zmq"  # ratios are to this row over tcp (the same transport for the zmq rows)


def open_rows(paths, transports, context: zmq.Context, tmp: str, stack: ExitStack) -> dict[tuple[str, str], object]:
    """Start the servers and connect a client per row; `stack` closes them all."""
    rows: dict[tuple[str, str], object] = {}
    for transport in transports:
        for path in (p for p in paths if p in ZMQ_PATHS):
            raw, validate, copy = ZMQ_PATHS[path]
            endpoint = "tcp://127.0.0.1:*" if transport == "tcp" else f"ipc://{tmp}/bench-{len(rows)}.sock"
            server = _closed_by(stack, ServerProcess(serve, endpoint, raw, validate))
            row = RawRows(context, server.address, copy) if raw else ProtocolRows(server.address, validate)
            rows[(path, transport)] = _closed_by(stack, row)
    if "openpi ws echo" in paths:
        server = _closed_by(stack, ServerProcess(serve_openpi_echo))
        rows[("openpi ws echo", "tcp")] = _closed_by(stack, OpenpiRows(server.address))
    if {"client->server", "openpi->server"} & set(paths):
        server = _closed_by(stack, ServerProcess(serve_vlash))  # one server for both rows: they take turns
        zmq_endpoint, url = server.address
        if "client->server" in paths:
            rows[("client->server", "tcp")] = _closed_by(stack, ProtocolRows(zmq_endpoint))
        if "openpi->server" in paths:
            rows[("openpi->server", "tcp")] = _closed_by(stack, OpenpiRows(url))
    return rows


def _closed_by(stack: ExitStack, thing):
    stack.callback(thing.close)
    return thing


def interleaved(rows: dict, rounds: int, warmup: int) -> dict[tuple[str, str], np.ndarray]:
    """Warm every row up, then one round trip per row per round, in a new random order each round: every row
    follows every other one equally often. (A rotating order kept each row behind the same one, and the row after
    the heaviest, the openpi endpoint's, ran with the coldest caches: 0.1-0.25 ms slower whichever path it was.)"""
    keys = list(rows)
    for key in keys:
        for i in range(warmup):
            rows[key].once(i)
    samples: dict[tuple[str, str], list[float]] = {key: [] for key in keys}
    order = random.Random(0)  # seeded: a rerun takes the same orders
    for i in range(rounds):
        for key in order.sample(keys, len(keys)):
            samples[key].append(rows[key].once(i))
    return {key: np.array(values) for key, values in samples.items()}


def summarize(path: str, transport: str, samples: np.ndarray) -> dict:
    return {
        "path": path,
        "transport": transport,
        "rounds": len(samples),
        "p50_ms": float(np.percentile(samples, 50)),
        "p99_ms": float(np.percentile(samples, 99)),
        "mean_ms": float(samples.mean()),
        "max_ms": float(samples.max()),
    }


def add_ratios(rows: list[dict]) -> None:
    """p50 and p99 over those of raw zmq on the same transport (websocket rows: tcp)."""
    floors = {r["transport"]: r for r in rows if r["path"] == FLOOR}
    for r in rows:
        floor = floors.get(r["transport"] if r["transport"] in floors else "tcp")
        if floor is not None and r["transport"] != "-":
            r["p50_ratio"] = r["p50_ms"] / floor["p50_ms"]
            r["p99_ratio"] = r["p99_ms"] / floor["p99_ms"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=2000, help="timed round trips per row")
    parser.add_argument("--warmup", type=int, default=200, help="untimed round trips per row before timing")
    parser.add_argument("--transports", nargs="+", default=["tcp", "ipc"], choices=["tcp", "ipc"], help="zmq rows")
    parser.add_argument("--paths", nargs="+", default=list(PATHS), choices=list(PATHS), help="rows")
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
    args = parser.parse_args()
    context = zmq.Context()
    with tempfile.TemporaryDirectory() as tmp, ExitStack() as stack:
        rows = open_rows(args.paths, args.transports, context, tmp, stack)
        samples = interleaved(rows, args.rounds, args.warmup)
    context.term()
    table = [summarize(path, transport, values) for (path, transport), values in samples.items()]
    codec_round_trips(args.warmup)
    table.append(summarize("codec only", "-", np.array(codec_round_trips(args.rounds))))
    add_ratios(table)
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    if args.json:
        print(json.dumps({"cpus": os.cpu_count(), "load_1min": load, "rows": table}, indent=2))
        return
    print(f"INFER 2x224x224x3 uint8 + state -> ACTIONS 50x32 float32; {os.cpu_count()} CPUs, load {load:.2f}")
    print(f"rows interleaved round by round; x raw = p50 and p99 over raw zmq's ({FLOOR!r}, tcp for websocket rows)")
    header = f"{'path':<16} {'transport':<9} {'rounds':>6} {'p50 ms':>8} {'p99 ms':>8} {'mean ms':>8} {'max ms':>8}"
    print(f"{header} {'p50 x raw':>9} {'p99 x raw':>9}")
    for r in table:
        ratios = f"{r['p50_ratio']:>9.2f} {r['p99_ratio']:>9.2f}" if "p50_ratio" in r else f"{'-':>9} {'-':>9}"
        print(
            f"{r['path']:<16} {r['transport']:<9} {r['rounds']:>6} {r['p50_ms']:>8.3f} {r['p99_ms']:>8.3f} "
            f"{r['mean_ms']:>8.3f} {r['max_ms']:>8.3f} {ratios}"
        )


if __name__ == "__main__":
    main()
