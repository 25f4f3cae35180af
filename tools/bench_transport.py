"""Transport round trip on loopback: PolicyClient.infer against an echo ROUTER, tcp and ipc.

Each round trip sends an INFER (2 x 224x224x3 uint8 images + a 32-dim state) through the real encode /
decode + PolicyClient path and gets back an ACTIONS message holding a 50x32 float32 chunk. The echo server
runs in its own process (as a policy server would). The "raw" rows send the same bytes over bare
DEALER/ROUTER sockets without the codec, to separate transport from codec (every row builds a fresh request
per round outside the timed region, as a camera delivers new frames; copying on send as PolicyClient
does; "raw zero-copy" sends the image buffers with copy=False, which pyzmq releases through its
garbage-collector thread, slower on this 2-core VM); "no send check" skips the
sender-side validation (encode(validate=False) on both ends: one decode per message instead of two);
"codec only" is the four codec calls of a round trip in process, without sockets.

    python tools/bench_transport.py [--rounds 2000] [--warmup 200] [--json]
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import tempfile
import time

import numpy as np
import zmq

from robot_io.client import PolicyClient
from robot_io.protocol import Actions, CameraSpec, Hello, Infer, Metadata, decode, encode

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


def serve(endpoint: str, raw: bool, ready, stop, validate: bool = True) -> None:
    """Echo server process: HELLO -> METADATA, each INFER -> one final ACTIONS (raw: fixed reply frames)."""
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


class EchoServer:
    """The echo server in its own process (as a policy server would be), so it does not share our GIL."""

    def __init__(self, endpoint: str, raw: bool, validate: bool = True) -> None:
        ctx = multiprocessing.get_context("spawn")
        ready, self._stop = ctx.Queue(), ctx.Event()
        self._process = ctx.Process(target=serve, args=(endpoint, raw, ready, self._stop, validate), daemon=True)
        self._process.start()
        self.endpoint = ready.get(timeout=30)

    def close(self) -> None:
        self._stop.set()
        self._process.join(timeout=5)
        if self._process.is_alive():
            self._process.kill()


def make_request(request_id: int) -> Infer:
    images = {"front": np.full((224, 224, 3), 7, np.uint8), "wrist": np.full((224, 224, 3), 9, np.uint8)}
    return Infer(request_id, request_id, time.time_ns(), "pick up the cube", images, np.zeros(32, np.float32))


def protocol_round_trips(endpoint: str, rounds: int, validate: bool = True) -> list[float]:
    samples = []
    with PolicyClient(endpoint, timeout_s=5.0, validate_requests=validate) as client:
        client.connect()
        for i in range(rounds):
            request = make_request(i)  # built outside the timed region: the robot has the arrays already
            start = time.perf_counter()
            client.infer(request)
            samples.append((time.perf_counter() - start) * 1e3)
    return samples


def raw_round_trips(context: zmq.Context, endpoint: str, rounds: int, copy: bool = True) -> list[float]:
    socket = context.socket(zmq.DEALER)
    socket.setsockopt(zmq.LINGER, 0)
    socket.connect(endpoint)
    samples = []
    for i in range(rounds):
        request = make_request(i)  # fresh arrays each round, as in protocol_round_trips (a camera's new frame)
        frames = [b"h" * 300, request.state.data, request.images["front"].data, request.images["wrist"].data]
        start = time.perf_counter()
        socket.send_multipart(frames, copy=copy)
        if not socket.poll(5000):
            raise TimeoutError("echo server did not answer within 5 s")
        socket.recv_multipart(copy=False)
        samples.append((time.perf_counter() - start) * 1e3)
    socket.close(linger=0)
    return samples


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


PATHS = {  # row label -> (raw sockets, validate on send, copy on send)
    "protocol+client": (False, True, True),
    "  no send check": (False, False, True),
    "raw zmq": (True, False, True),
    "raw zero-copy": (True, False, False),
}


def measure(context: zmq.Context, transport: str, path: str, rounds: int, warmup: int, tmp: str) -> dict:
    raw, validate, copy = PATHS[path]
    endpoint = "tcp://127.0.0.1:*" if transport == "tcp" else f"ipc://{tmp}/bench-{len(path)}.sock"
    server = EchoServer(endpoint, raw, validate)
    try:
        if raw:
            run = lambda n: raw_round_trips(context, server.endpoint, n, copy)  # noqa: E731
        else:
            run = lambda n: protocol_round_trips(server.endpoint, n, validate)  # noqa: E731
        run(warmup)
        samples = np.array(run(rounds))
    finally:
        server.close()
    return summarize(path, transport, samples)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=2000, help="timed round trips per row")
    parser.add_argument("--warmup", type=int, default=200, help="untimed round trips before each row")
    parser.add_argument("--transports", nargs="+", default=["tcp", "ipc"], choices=["tcp", "ipc"])
    parser.add_argument("--paths", nargs="+", default=list(PATHS), choices=list(PATHS), help="rows per transport")
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
    args = parser.parse_args()
    context = zmq.Context()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for transport in args.transports:
            for path in args.paths:
                rows.append(measure(context, transport, path, args.rounds, args.warmup, tmp))
    context.term()
    codec_round_trips(args.warmup)
    rows.append(summarize("codec only", "-", np.array(codec_round_trips(args.rounds))))
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    if args.json:
        print(json.dumps({"cpus": os.cpu_count(), "load_1min": load, "rows": rows}, indent=2))
        return
    print(f"INFER 2x224x224x3 uint8 + state -> ACTIONS 50x32 float32; {os.cpu_count()} CPUs, load {load:.2f}")
    print(f"{'path':<16} {'transport':<9} {'rounds':>6} {'p50 ms':>8} {'p99 ms':>8} {'mean ms':>8} {'max ms':>8}")
    for r in rows:
        print(
            f"{r['path']:<16} {r['transport']:<9} {r['rounds']:>6} {r['p50_ms']:>8.3f} {r['p99_ms']:>8.3f} "
            f"{r['mean_ms']:>8.3f} {r['max_ms']:>8.3f}"
        )


if __name__ == "__main__":
    main()
