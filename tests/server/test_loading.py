"""Where `vlash serve` gets its policy: shipped directories, checkpoints, random-weight presets; its config."""

from __future__ import annotations

import numpy as np
import pytest

from tests.server.conftest import MICRO
from vlash.errors import CheckpointError, ConfigError
from vlash.policies.names.shipped import available_shipped, shipped_policy_dir, shipped_root
from vlash.runtime.loading import example_request, load_runtime, warm_up
from vlash.server.config import ServerConfig


def test_shipped_policies_resolve_next_to_the_package_and_unknown_names_list_the_available():
    assert shipped_root().name == "checkpoints" and (shipped_root().parent / "vlash" / "__init__.py").is_file()
    for name in available_shipped():
        assert (shipped_policy_dir(name) / "config.yaml").is_file()
    with pytest.raises(CheckpointError, match="available"):
        shipped_policy_dir("no-such-policy")
    with pytest.raises(CheckpointError):
        shipped_policy_dir("../vlash")


def test_random_weights_preset_serves_a_chunk():
    loaded = load_runtime(str(MICRO), random_weights=True, device="cpu", num_steps=2)
    assert loaded.model_id.endswith("-random") and loaded.precision == "fp32" and loaded.params > 0
    runtime = loaded.runtime
    assert warm_up(runtime, runs=1) > 0
    actions = runtime.run(example_request(runtime)).actions
    assert actions.shape == (runtime.horizon, 2) and np.isfinite(actions).all()


def test_checkpoint_loading_and_source_rules(policy_dir):
    assert load_runtime(checkpoint=policy_dir, device="cpu").model_id == "policy"
    with pytest.raises(ConfigError, match="exactly one"):
        load_runtime()
    with pytest.raises(ConfigError, match="--random-weights"):
        load_runtime(checkpoint=policy_dir, random_weights=True)


@pytest.mark.parametrize(
    ("kw", "match"),
    [
        ({"bind": "localhost:5555"}, "bind"),
        ({"schedule": "linear"}, "schedule"),
        ({"steps": 0}, "steps"),
        ({"inject_latency_ms": -1.0}, "inject_latency_ms"),
        ({"control_rate_hz": 0.0}, "control_rate_hz"),
        ({"poll_ms": 0}, "poll_ms"),
    ],
)
def test_server_config_names_the_bad_value(kw, match):
    with pytest.raises(ConfigError, match=match):
        ServerConfig(**kw)
    # a non-loopback bind needs CurveZMQ keys or insecure=True (tests/server/test_server_config.py)
    assert ServerConfig().is_local and not ServerConfig(bind="tcp://0.0.0.0:5555", insecure=True).is_local
