"""vlash's `rtc` equals LeRobot 0.6.1's guided RTC (lerobot/policies/rtc) on the tiny LeRobot pi0.5 checkpoint
(examples/lerobot_pi05_tiny): the same observation, noise, previous chunk's leftover, delay d, execution horizon s,
mask and maximum guidance weight give the same actions within 1e-4 (robot units, actions up to ~270). The reference
was made by LeRobot itself (tests/fixtures/lerobot_pi05_rtc/make_reference.py, not run here; see its README).

vlash's settings map onto LeRobot's: LeRobot's `execution_horizon` is where its prefix weights end, H - s in vlash's
terms (cut to the leftover's length by both); its EXP schedule is vlash's mask; `max_guidance_weight` is
PolicyRuntime's `guidance_weight`."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from tests.torch_threads import torch_threads
from vlash.engines import create_engine
from vlash.policies.formats.base import CheckpointOptions
from vlash.policies.formats.loading import load_policy
from vlash.policies.pi05.config import load_preset
from vlash.runtime.policy_runtime import PolicyRuntime, make_infer

ROOT = Path(__file__).resolve().parents[2]
SHIPPED = ROOT / "examples" / "lerobot_pi05_tiny"
FIXTURE = ROOT / "tests" / "fixtures" / "lerobot_pi05_rtc"
META = json.loads((FIXTURE / "reference.meta.json").read_text())
SETTINGS = sorted(META["settings"])
TOLERANCE = 1e-4  # absolute, robot units; observed 3.1e-5 on every setting (fp32 rounding of actions up to ~270)
CAMERAS = ("top", "wrist")


@pytest.fixture(autouse=True, scope="module")
def _one_thread():
    with torch_threads(1):
        yield


@pytest.fixture(scope="module")
def reference() -> dict[str, np.ndarray]:
    with np.load(FIXTURE / "reference.npz") as arrays:
        return {key: arrays[key] for key in arrays.files}


@pytest.fixture(scope="module")
def policy():
    options = CheckpointOptions(
        tokenizer=SHIPPED / "tokenizer" / "tokenizer.json", model_config=load_preset(str(SHIPPED / "model_config.yaml"))
    )
    return load_policy(SHIPPED / "pretrained_model", options=options)


def _request(reference: dict, setting: str | None):
    images = {cam: reference[f"next/image/{cam}"] for cam in CAMERAS}
    fields: dict = {"seed": int(reference["next/seed"])}
    if setting is not None:  # what RtcExecutor sends: the leftover in robot units, d and s as chunk indices
        s = META["settings"][setting]
        fields.update(guidance=reference[f"{setting}/leftover"], delay_steps=s["delay"])
        fields.update(execution_horizon=s["execution_horizon"], schedule="constant")
    return make_infer(images, reference["next/state"], str(reference["next/task"]), **fields)


def _runtime(policy, setting: str) -> PolicyRuntime:
    weight = META["settings"][setting]["max_weight"]
    return PolicyRuntime(policy, create_engine("torch", model=policy.model), guidance_weight=weight)


@pytest.mark.parametrize("setting", SETTINGS)
def test_rtc_gives_lerobots_actions(policy, reference, setting):
    actions = _runtime(policy, setting).run(_request(reference, setting)).actions
    np.testing.assert_allclose(actions, reference[f"{setting}/actions"], atol=TOLERANCE, rtol=0)


@pytest.mark.parametrize("setting", SETTINGS)
def test_the_guided_rows_are_weighted_as_lerobot_weights_them(policy, reference, setting):
    plan = _runtime(policy, setting)._prepare(_request(reference, setting)).plan
    assert plan.guidance_mask is not None
    np.testing.assert_allclose(plan.guidance_mask[0].numpy(), reference[f"{setting}/weights"], atol=1e-6, rtol=0)


def test_the_reference_sees_the_guidance(policy, reference):
    """Unguided, vlash gives LeRobot's unguided chunk; guidance moves every setting's chunk by far more than the
    tolerance, and each setting's differently, so a wrong weight, mask, delay or gradient would fail the test."""
    unguided = reference["next/unguided_actions"]
    actions = PolicyRuntime(policy, create_engine("torch", model=policy.model)).run(_request(reference, None)).actions
    np.testing.assert_allclose(actions, unguided, atol=TOLERANCE, rtol=0)
    chunks = [reference[f"{setting}/actions"] for setting in SETTINGS]
    assert all(np.abs(chunk - unguided).max() > 1000 * TOLERANCE for chunk in chunks)
    assert all(np.abs(a - b).max() > 1000 * TOLERANCE for i, a in enumerate(chunks) for b in chunks[i + 1 :])
    assert all(META["settings"][s]["correction_equals_err"] for s in SETTINGS)  # LeRobot holds v constant
