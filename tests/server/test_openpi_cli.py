"""`vlash serve --openpi-port 0` as a process, driven by openpi's own client package.

The real `openpi-client` (PyPI) pins numpy<2 and cannot live in the dev environment, so the slow test installs
it into a temporary virtual environment and runs an openpi-style robot script (WebsocketClientPolicy +
ActionChunkBroker, DROID observation keys) with that environment's python. It skips, saying why, only when the
environment cannot be created or the package cannot be installed (no network).
"""

from __future__ import annotations

import json
import re
import subprocess
import time
import urllib.request
import venv
from contextlib import ExitStack
from pathlib import Path

import numpy as np
import pytest
from websockets.sync.client import connect

from robot_io.client import PolicyClient
from robot_io.protocol import Infer
from tests.serve_process import ServeProcess
from tests.server.conftest import PROMPT
from vlash.server.openpi_codec import packb, unpackb

INSTALL_S = 600.0  # pip through the local mirrors; the network may be slow
SEED = 11
HORIZON = 5  # the broker's action_horizon: a new chunk every 5 steps

ROBOT_SCRIPT = '''
"""An openpi robot script's use of openpi-client, unchanged: a remote policy behind a chunk broker."""
import json, sys
import numpy as np
from openpi_client import action_chunk_broker, websocket_client_policy

host, port, horizon, obs_file, out_file = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], sys.argv[5]
saved = np.load(obs_file)
obs = {key.replace("|", "/"): saved[key] for key in saved.files}  # the DROID keys
obs["prompt"] = "PROMPT"
obs["seed"] = SEED  # vlash's optional noise seed, so the test can compare values
policy = websocket_client_policy.WebsocketClientPolicy(host=host, port=port)
broker = action_chunk_broker.ActionChunkBroker(policy=policy, action_horizon=horizon)
steps = []
for _ in range(horizon + 1):  # the last step fetches a second chunk
    result = broker.infer(obs)
    steps.append({"action": result["actions"].tolist(), "dtype": str(result["actions"].dtype),
                  "server_timing": result["server_timing"], "policy_timing": result["policy_timing"]})
broker.reset()  # sends nothing (openpi's reset is a no-op on the wire)
direct = policy.infer(obs)
out = {"metadata": policy.get_server_metadata(), "steps": steps, "direct_shape": list(direct["actions"].shape)}
json.dump(out, open(out_file, "w"))
'''.replace("PROMPT", PROMPT).replace("SEED", str(SEED))


def _observation() -> dict[str, np.ndarray]:
    rng = np.random.default_rng(5)
    return {
        "observation/exterior_image_1_left": rng.integers(0, 256, (224, 224, 3), dtype=np.uint8),
        "observation/wrist_image_left": rng.integers(0, 256, (224, 224, 3), dtype=np.uint8),
        "observation/joint_position": np.array([0.4]),  # the micro policy has 2 state dims: joint + gripper
        "observation/gripper_position": np.array([0.9]),
    }


class Served(ServeProcess):
    """`vlash serve --openpi-port 0` in a subprocess; its ZeroMQ endpoint and openpi URL read from its startup lines."""

    def __init__(self, policy_dir: Path) -> None:
        super().__init__(
            ["--checkpoint", str(policy_dir), "--steps", "2", "--openpi-port", "0", "--openpi-profile", "droid"]
        )
        text = "".join(self.out)  # the openpi line comes before the last startup line ("serving on")
        self.url = re.search(r"openpi clients on (ws://\S+) \(observations: droid\)", text).group(1)
        self.host, self.port = re.match(r"ws://([\d.]+):(\d+)", self.url).groups()


@pytest.fixture(scope="module")
def served(policy_dir):
    srv = Served(policy_dir)
    yield srv
    srv.stop()


def _zmq_chunk(served: Served) -> np.ndarray:
    obs = _observation()
    images = {"base_0_rgb": obs["observation/exterior_image_1_left"]}  # the 1-camera policy: the wrist is unused
    state = np.array([0.4, 0.9], np.float32)
    with PolicyClient(served.endpoint, timeout_s=30.0) as client:
        return client.infer(Infer(1, 0, time.time_ns(), PROMPT, images, state, seed=SEED)).actions


def test_serve_answers_healthz_and_openpi_frames(served):
    with urllib.request.urlopen(f"http://{served.host}:{served.port}/healthz", timeout=30) as response:
        assert response.status == 200 and response.read() == b"OK\n"
    with ExitStack() as stack:
        ws = stack.enter_context(connect(served.url, compression=None, max_size=None, open_timeout=30))
        metadata = unpackb(ws.recv(timeout=30))
        ws.send(packb({**_observation(), "prompt": PROMPT, "seed": SEED}))
        reply = unpackb(ws.recv(timeout=60))
    assert metadata["observation_map"] == "droid" and metadata["action_dim"] == 2
    np.testing.assert_array_equal(reply["actions"], _zmq_chunk(served))


def _openpi_python(root: Path) -> Path:
    """A virtual environment with openpi-client from the registry; skips if it cannot be made."""
    try:
        venv.EnvBuilder(with_pip=True).create(root)
    except Exception as exc:  # no ensurepip, read-only disk...
        pytest.skip(f"cannot create a virtual environment: {exc}")
    python = root / "bin" / "python"
    # openpi-client 0.1.1/0.1.2 import typing_extensions without declaring it (openpi's own env brings it)
    cmd = [str(python), "-m", "pip", "install", "--quiet", "openpi-client", "typing_extensions"]
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=INSTALL_S)
    except subprocess.TimeoutExpired:
        pytest.skip(f"pip install openpi-client took over {INSTALL_S:.0f} s")
    if done.returncode != 0:
        pytest.skip(f"cannot install openpi-client (no network?): {(done.stderr or done.stdout)[-800:]}")
    return python


@pytest.mark.slow
def test_the_real_openpi_client_drives_vlash_serve(served, tmp_path):
    python = _openpi_python(tmp_path / "venv")
    obs_file, out_file, script = tmp_path / "obs.npz", tmp_path / "out.json", tmp_path / "robot.py"
    np.savez(obs_file, **{key.replace("/", "|"): value for key, value in _observation().items()})
    script.write_text(ROBOT_SCRIPT)
    cmd = [str(python), str(script), served.host, served.port, str(HORIZON), str(obs_file), str(out_file)]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, done.stderr[-3000:]
    out = json.loads(out_file.read_text())

    meta = out["metadata"]
    assert meta["server"] == "vlash" and meta["observation_map"] == "droid"
    assert (meta["state_dim"], meta["action_dim"], meta["chunk_length"]) == (2, 2, 50)
    assert [c["name"] for c in meta["cameras"]] == ["base_0_rgb"]

    chunk = _zmq_chunk(served)  # the ZeroMQ path, same observation and seed
    steps = out["steps"]
    assert len(steps) == HORIZON + 1 and all(s["dtype"] == "float32" for s in steps)
    got = np.array([s["action"] for s in steps], np.float32)  # one row per broker step
    np.testing.assert_array_equal(got[:HORIZON], chunk[:HORIZON])
    np.testing.assert_array_equal(got[HORIZON], chunk[0])  # the broker fetched a fresh chunk: same seed, same row
    first, second = steps[0]["server_timing"], steps[HORIZON]["server_timing"]
    assert first["infer_ms"] > 0 and "prev_total_ms" not in first
    assert second["infer_ms"] > 0 and second["prev_total_ms"] > 0
    assert steps[0]["policy_timing"]["infer_ms"] > 0
    assert out["direct_shape"] == [50, 2]


def test_serve_exits_cleanly_on_sigterm_with_openpi_on(served):
    assert served.stop() == 0, "".join(served.err[-30:])
