"""The openpi websocket endpoint in front of a live PolicyServer, over loopback: the metadata frame, served chunks
equal to the ZeroMQ path's, openpi's timing fields, its error replies (text frame + close 1011) and /healthz.

The client here speaks the wire format with websockets + vlash's codec; tests/server/test_openpi_cli.py drives
the same endpoint with the real openpi-client package.
"""

from __future__ import annotations

import logging
import re
import time
import urllib.request
from contextlib import ExitStack
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
from websockets.exceptions import ConnectionClosed, ConnectionClosedError
from websockets.sync.client import connect

from robot_io.client import PolicyClient
from robot_io.protocol import Infer
from tests.server.conftest import MICRO, PROMPT, start_server, write_policy
from vlash.errors import ConfigError
from vlash.server.config import OpenpiConfig, ServerConfig
from vlash.server.openpi_codec import packb, unpackb
from vlash.server.openpi_endpoint import OpenpiEndpoint

TIMEOUT_S = 30.0  # per frame; a busy 2-core machine
CAMERAS = ["base_0_rgb", "left_wrist_0_rgb"]
SEED = 7


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    """A micro policy with two cameras (DROID's two), 2 state and action dims."""
    directory = tmp_path_factory.mktemp("two-cameras")
    preset = directory / "micro-2cam.yaml"
    preset.write_text(MICRO.read_text().replace("camera_names: [base_0_rgb]", f"camera_names: {CAMERAS}"))
    srv = start_server(write_policy(directory, preset=preset))
    yield srv
    srv.stop()


@pytest.fixture(scope="module")
def endpoint(server):
    with OpenpiEndpoint(server, OpenpiConfig(port=0, infer_timeout_s=TIMEOUT_S)) as ep:
        yield ep


class OpenpiTestClient:
    """openpi's WebsocketClientPolicy in a few lines: the metadata frame on connect, one frame each way."""

    def __init__(self, url: str) -> None:
        self._stack = ExitStack()
        self.ws = self._stack.enter_context(connect(url, compression=None, max_size=None, open_timeout=TIMEOUT_S))
        frame = self.ws.recv(timeout=TIMEOUT_S)
        assert isinstance(frame, bytes), "the metadata frame is binary"
        self.metadata = unpackb(frame)

    def infer(self, observation: dict) -> dict:
        self.ws.send(packb(observation))
        reply = self.ws.recv(timeout=TIMEOUT_S)
        if isinstance(reply, str):
            raise RuntimeError(reply)  # what openpi's client does with the error frame
        return unpackb(reply)

    def error(self, frame: bytes | str) -> tuple[str, int | None]:
        """Send `frame`, expect openpi's error reply: (the text frame, the close code)."""
        self.ws.send(frame)
        message = self.ws.recv(timeout=TIMEOUT_S)
        assert isinstance(message, str), f"expected a text frame, got {type(message).__name__}"
        with pytest.raises(ConnectionClosedError):
            self.ws.recv(timeout=TIMEOUT_S)
        return message, self.ws.close_code

    def close(self) -> None:
        self._stack.close()


def _image(seed: int) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, 256, (56, 40, 3), dtype=np.uint8)


def _droid(seed: int | None = SEED, **changes) -> dict:
    obs = {
        "observation/exterior_image_1_left": _image(1),
        "observation/wrist_image_left": _image(2),
        "observation/joint_position": np.array([0.3]),
        "observation/gripper_position": np.array([1.2]),
        "prompt": PROMPT,
        "seed": seed,
    }
    obs.update(changes)
    return {k: v for k, v in obs.items() if v is not None}


def _zmq_chunk(server, images: dict, state, seed: int = SEED) -> np.ndarray:
    with PolicyClient(server.endpoint, timeout_s=TIMEOUT_S) as client:
        infer = Infer(1, 0, time.time_ns(), PROMPT, images, np.asarray(state, np.float32), seed=seed)
        return client.infer(infer).actions


@pytest.fixture
def client(endpoint):
    c = OpenpiTestClient(endpoint.url)
    yield c
    c.close()


def test_metadata_frame_describes_the_policy(client, server):
    assert server.endpoint.startswith("tcp://127.0.0.1:")  # the inproc endpoint is a second one
    meta = client.metadata
    assert meta["server"] == "vlash" and meta["observation_map"] == "auto" and meta["model_id"] == "micro"
    assert [c["name"] for c in meta["cameras"]] == CAMERAS
    assert (meta["state_dim"], meta["action_dim"], meta["chunk_length"]) == (2, 2, server.metadata.chunk_length)
    assert meta["control_rate_hz"] == server.metadata.control_rate_hz and meta["num_steps"] == 4


def test_droid_chunks_equal_the_zeromq_paths_and_carry_openpi_timing(client, server):
    first, second = client.infer(_droid()), client.infer(_droid())
    expected = _zmq_chunk(server, {"base_0_rgb": _image(1), "left_wrist_0_rgb": _image(2)}, [0.3, 1.2])
    for reply in (first, second):
        assert reply["actions"].dtype == np.float32 and reply["actions"].shape == (50, 2)
        np.testing.assert_array_equal(reply["actions"], expected)
        assert reply["server_timing"]["infer_ms"] > 0 and reply["policy_timing"]["infer_ms"] > 0
    assert "prev_total_ms" not in first["server_timing"]  # openpi reports it from the second request on
    assert second["server_timing"]["prev_total_ms"] >= first["server_timing"]["infer_ms"]  # recv -> send of the first


def test_chw_float_images_and_the_native_layout_serve_the_same_chunk(client, server):
    droid = client.infer(_droid())["actions"]
    chw_float = {
        "observation/exterior_image_1_left": _image(1).transpose(2, 0, 1).astype(np.float32) / 255.0,
        "observation/wrist_image_left": np.ascontiguousarray(_image(2).transpose(2, 0, 1)),
    }
    np.testing.assert_array_equal(client.infer(_droid(**chw_float))["actions"], droid)
    native = {"images": {"base_0_rgb": _image(1), "left_wrist_0_rgb": _image(2)}, "state": [0.3, 1.2]}
    np.testing.assert_array_equal(client.infer({**native, "prompt": PROMPT, "seed": SEED})["actions"], droid)


def test_unseeded_requests_are_served_with_fresh_noise(client):
    a, b = client.infer(_droid(seed=None))["actions"], client.infer(_droid(seed=None))["actions"]
    assert a.shape == b.shape == (50, 2) and not np.array_equal(a, b)


@pytest.mark.parametrize(
    ("frame", "match"),
    [
        (_droid(extra=1), r"droid map: unknown observation key\(s\) \['extra'\]"),
        (_droid(**{"observation/joint_position": np.zeros(3)}), r"give 4 values, the policy takes 2"),
        (_droid(prompt=None), "no prompt"),
        (_droid(**{"observation/gripper_position": np.array([np.nan])}), "state: contains NaN"),  # vlash's codec
        ({"cam": _image(1)}, r"observation keys \['cam'\] fit none of the maps"),
        (b"\xc1not msgpack", "not a msgpack frame"),
        (packb({"x": {b"__ndarray__": True, b"data": b"", b"dtype": "|O", b"shape": [0]}}), "unsupported dtype"),
        ("a text frame", "expected a binary msgpack frame"),
        # refused by the policy server itself (its validation), forwarded as openpi's error reply
        (_droid(**{"observation/exterior_image_1_left": np.zeros((1, 4000, 3), np.uint8)}), "BAD_VALUE: image"),
        (_droid(**{"observation/exterior_image_1_left": None, "observation/wrist_image_left": None}), "UNKNOWN_CAMERA"),
    ],
    ids=[
        "unknown-key",
        "state-length",
        "no-prompt",
        "nan",
        "no-profile",
        "garbage",
        "object-dtype",
        "text",
        "server",
        "no-camera",
    ],
)
def test_bad_requests_get_a_text_frame_and_close_1011_and_the_server_keeps_serving(endpoint, server, frame, match):
    errors_before = server.counters()["errors"]
    bad = OpenpiTestClient(endpoint.url)
    message, code = bad.error(packb(frame) if isinstance(frame, dict) else frame)
    assert code == 1011
    assert re.search(match, message), message
    if match.startswith(("BAD_VALUE", "UNKNOWN_CAMERA")):
        assert server.counters()["errors"] == errors_before + 1  # counted by the server: its own error
    good = OpenpiTestClient(endpoint.url)
    try:
        assert good.infer(_droid())["actions"].shape == (50, 2) and server.running
    finally:
        good.close()


def test_an_empty_array_with_a_huge_dim_gets_a_typed_refusal_and_no_traceback(endpoint, caplog):
    """shape [0, 2**64 - 1]: the product of the dims is 0, so only a bound on each dim refuses it (before numpy's
    reshape, whose ValueError was once logged with a full traceback)."""
    huge = {b"__ndarray__": True, b"data": b"", b"dtype": "<f8", b"shape": [0, 2**64 - 1]}
    bad = OpenpiTestClient(endpoint.url)
    with caplog.at_level(logging.INFO, logger="vlash"):
        message, code = bad.error(packb(_droid(**{"observation/joint_position": huge})))
    assert code == 1011 and "describe over" in message and "ValueError" not in message, message
    assert not [r for r in caplog.records if r.exc_info or r.levelno >= logging.ERROR]
    assert any("describe over" in r.getMessage() for r in caplog.records)  # logged as a refusal, one line


def test_healthz_answers_on_the_websocket_port(endpoint):
    with urllib.request.urlopen(f"http://127.0.0.1:{endpoint.port}/healthz", timeout=TIMEOUT_S) as response:
        assert response.status == 200 and response.read() == b"OK\n"


def test_a_default_prompt_serves_observations_without_one(server):
    config = OpenpiConfig(port=0, profile="droid", default_prompt=PROMPT, infer_timeout_s=TIMEOUT_S)
    with OpenpiEndpoint(server, config) as endpoint:
        c = OpenpiTestClient(endpoint.url)
        try:
            assert c.metadata["observation_map"] == "droid"
            with_default = c.infer(_droid(prompt=None))["actions"]
            np.testing.assert_array_equal(with_default, c.infer(_droid())["actions"])
        finally:
            c.close()
    assert endpoint.counters["requests"] == 2 and endpoint.counters["errors"] == 0


def test_a_map_file_drives_the_endpoint(server, tmp_path: Path):
    path = tmp_path / "arm.yaml"
    path.write_text("cameras: {front: base_0_rgb, wrist: left_wrist_0_rgb}\nstate: [q]\nchw: false\n")
    with OpenpiEndpoint(server, OpenpiConfig(port=0, map_file=path, infer_timeout_s=TIMEOUT_S)) as endpoint:
        c = OpenpiTestClient(endpoint.url)
        try:
            assert c.metadata["observation_map"] == "arm"
            obs = {"front": _image(1), "wrist": _image(2), "q": np.array([0.3, 1.2]), "prompt": PROMPT, "seed": SEED}
            reply = c.infer(obs)
        finally:
            c.close()
    expected = _zmq_chunk(server, {"base_0_rgb": _image(1), "left_wrist_0_rgb": _image(2)}, [0.3, 1.2])
    np.testing.assert_array_equal(reply["actions"], expected)


def test_a_camera_the_observation_leaves_out_is_left_out_of_the_request(client, server):
    reply = client.infer(_droid(**{"observation/wrist_image_left": None}))  # the policy masks left_wrist_0_rgb
    np.testing.assert_array_equal(reply["actions"], _zmq_chunk(server, {"base_0_rgb": _image(1)}, [0.3, 1.2]))


def test_stop_closes_open_connections_and_the_server_keeps_running(server):
    endpoint = OpenpiEndpoint(server, OpenpiConfig(port=0, infer_timeout_s=TIMEOUT_S))
    endpoint.start()
    c = OpenpiTestClient(endpoint.url)
    start = time.monotonic()
    endpoint.stop()
    assert time.monotonic() - start < 15.0
    with pytest.raises(ConnectionClosed):  # closed with 1001 (going away)
        c.infer(_droid())
    assert server.running


def test_the_endpoint_refuses_to_start_where_it_would_bypass_curve_keys(tmp_path):
    """No authentication here: beside a server whose ZeroMQ clients need CurveZMQ keys, only with insecure."""
    keyed = SimpleNamespace(config=ServerConfig(curve_keys=tmp_path, allow_dir=tmp_path))  # all start() reads
    endpoint = OpenpiEndpoint(keyed, OpenpiConfig(port=0))
    with pytest.raises(ConfigError, match="no authentication while --curve-keys/--allow-dir require it.*--insecure"):
        endpoint.start()
    assert endpoint.url is None  # nothing listens
