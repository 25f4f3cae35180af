"""One admission on every entry point (vlash.runtime.admission): the same bad requests sent over ZeroMQ (loopback), over
the openpi websocket, through the Ray fleet's request path (its ingress's function, no Ray) and through the evaluation
harness's learned policy get the same refusal: the same ErrorCode and text. Issue 42: the fleet once took a
100,000-character prompt, a NaN state and a 5000-px image (its `encode` checked nothing)."""

from __future__ import annotations

import time

import numpy as np
import pytest

from robot_io.protocol import Error, ErrorCode, Infer, MessageError, decode, encode
from tests.robot_io.test_protocol import METADATA, make_infer
from tests.server.conftest import PROMPT, image, raw_dealer
from tests.server.test_openpi_endpoint import OpenpiTestClient
from vlash.eval.policies import LearnedPolicy
from vlash.fleet.openpi_requests import chunk_request
from vlash.policies.formats.loading import load_policy
from vlash.runtime.admission import admit, check_infer
from vlash.server.config import OpenpiConfig
from vlash.server.openpi_codec import packb
from vlash.server.openpi_endpoint import OpenpiEndpoint
from vlash.server.openpi_frames import error_text

TIMEOUT_S = 30.0  # per reply; a busy 2-core machine
LONG_PROMPT = "x" * 100_000


def _image(side: tuple[int, int] = (32, 32)) -> np.ndarray:
    return np.zeros((*side, 3), np.uint8)


# name -> the fields of a bad INFER (the rest as `_fields` makes them); each reaches admission on every entry point:
# openpi's frame codec and observation map let it through (a 100,000-char prompt the codec refuses itself: see below)
BAD = {
    "prompt-too-long": {"prompt": "x" * 5000},
    "nan-state": {"state": np.array([np.nan, 0.0], np.float32)},
    "inf-state": {"state": np.array([0.0, np.inf], np.float32)},
    "5000-px-image": {"images": {"base_0_rgb": _image((5000, 8))}},
    "empty-image": {"images": {"base_0_rgb": _image((0, 8))}},
    "too-thin-image": {"images": {"base_0_rgb": _image((1, 4000))}},  # the policy's check: no pixel left per side
}


def _fields(**changes) -> dict:
    fields = {"prompt": PROMPT, "state": np.array([0.1, 0.2], np.float32), "images": {"base_0_rgb": _image()}}
    return {**fields, **changes}


def _frame(fields: dict, prompt: bool = True) -> bytes:
    """The openpi frame (vlash's own observation keys) that maps onto the INFER of `fields`."""
    frame = {"images": fields["images"], "state": fields["state"]}
    frame.update({"prompt": fields["prompt"]} if prompt else {})
    return packb(frame)


def _zeromq_refusal(server, fields: dict) -> str:
    """The ERROR a robot gets for the INFER of `fields` (sent as PolicyClient sends it: encoded, not validated)."""
    infer = Infer(1, 0, time.time_ns(), fields["prompt"], fields["images"], fields["state"])
    with raw_dealer(server.endpoint) as socket:
        socket.send_multipart(encode(infer))
        assert socket.poll(int(TIMEOUT_S * 1e3)), "no reply"
        reply = decode(socket.recv_multipart())
    assert isinstance(reply, Error), reply
    return f"{reply.code.value}: {reply.message}"


def _websocket_refusal(url: str, frame: bytes) -> str:
    client = OpenpiTestClient(url)
    try:
        message, code = client.error(frame)
    finally:
        client.close()
    assert code == 1011
    return message


def _fleet_refusal(server, frame: bytes, default_prompt: str | None = None) -> str:
    with pytest.raises(MessageError) as refused:
        chunk_request(frame, server.metadata, None, default_prompt, 0)
    return error_text(refused.value)


def _eval_refusal(learned: LearnedPolicy, fields: dict) -> str:
    """What the evaluation harness's learned policy raises for the INFER of `fields` (its simulated link's request)."""
    plan = learned.planner(env=None, commanded=None, action_stride=1)
    with pytest.raises(MessageError) as refused:
        plan(Infer(1, 0, time.time_ns(), fields["prompt"], fields["images"], fields["state"]))
    return error_text(refused.value)


@pytest.fixture(scope="module")
def endpoint(server):  # refusals at once (their pacing: test_openpi_connections.py)
    with OpenpiEndpoint(server, OpenpiConfig(port=0, infer_timeout_s=TIMEOUT_S, refusal_delay_s=0)) as ep:
        yield ep


@pytest.fixture(scope="module")
def learned(policy_dir):
    return LearnedPolicy(load_policy(policy_dir))


@pytest.mark.parametrize("case", list(BAD))
def test_every_entry_point_refuses_a_bad_request_with_the_same_code_and_text(server, endpoint, learned, case):
    fields = _fields(**BAD[case])
    zeromq = _zeromq_refusal(server, fields)
    assert zeromq.startswith(f"{ErrorCode.BAD_VALUE.value}: "), zeromq
    assert _websocket_refusal(endpoint.url, _frame(fields)) == zeromq
    assert _fleet_refusal(server, _frame(fields)) == zeromq
    assert _eval_refusal(learned, fields) == zeromq
    assert server.running


def test_a_100000_character_prompt_is_refused_on_every_entry_point(server):
    """openpi's frame codec refuses a str that long before any mapping (MAX_STR_BYTES), so here it comes as the
    server's default prompt, which the observation map fills in. On ZeroMQ its header frame is past
    Limits.max_header_bytes, refused before it is parsed; an INFER made in process is encoded and decoded as a receiver
    would (`check`), so both openpi servers refuse it the same way, in the same words."""
    zeromq = _zeromq_refusal(server, _fields(prompt=LONG_PROMPT))
    assert zeromq.startswith("BAD_MESSAGE: frame 0: "), zeromq
    config = OpenpiConfig(port=0, infer_timeout_s=TIMEOUT_S, default_prompt=LONG_PROMPT)
    with OpenpiEndpoint(server, config) as endpoint:
        websocket = _websocket_refusal(endpoint.url, _frame(_fields(), prompt=False))
    assert websocket.startswith("BAD_MESSAGE: frame 0: "), websocket
    assert _fleet_refusal(server, _frame(_fields(), prompt=False), LONG_PROMPT) == websocket


def test_admission_checks_an_infer_made_in_process_and_trusts_only_a_decoded_one(server):
    bad = Infer(1, 0, 0, PROMPT, {"base_0_rgb": image(32)}, np.array([np.nan, 0.0], np.float32))
    with pytest.raises(MessageError, match="state: contains NaN or inf"):
        admit(bad, server.metadata, server.limits)
    request = admit(bad, server.metadata, server.limits, decoded=True)  # decode would have refused it already
    assert request is bad  # the runtime's request is the INFER itself, never a copy


def test_what_only_the_policy_knows_is_checked_against_its_metadata():
    valid = make_infer(guidance=None)
    check_infer(decode(encode(valid)), METADATA)
    native = {"front": np.zeros((48, 64, 3), np.uint8), "wrist": np.zeros((3, 2, 3), np.uint8)}
    check_infer(make_infer(images=native, guidance=None), METADATA)  # any size: the server resizes as trained
    check_infer(make_infer(images={"front": native["front"]}, guidance=None), METADATA)  # a camera left out: masked
    cases = [
        (make_infer(images={}), ErrorCode.UNKNOWN_CAMERA, "no camera image"),
        (make_infer(images={"top": np.zeros((6, 8, 3), np.uint8)}), ErrorCode.UNKNOWN_CAMERA, "unknown camera"),
        (
            make_infer(images={"front": np.zeros((1, 64, 3), np.uint8), "wrist": np.zeros((6, 8, 3), np.uint8)}),
            ErrorCode.BAD_VALUE,
            "1x64 is too thin to resize into 6x8",
        ),
        (make_infer(state=np.zeros(5, np.float32), future_state=None), ErrorCode.BAD_VALUE, "state: expected 4 dims"),
        (make_infer(prefix=np.zeros((2, 4), np.float32), guidance=None), ErrorCode.BAD_VALUE, "expected 3 action dims"),
        (make_infer(prefix=np.zeros((10, 3), np.float32)), ErrorCode.BAD_VALUE, "10 rows, must be fewer than"),
        (make_infer(guidance=np.ones((11, 3), np.float32)), ErrorCode.BAD_VALUE, "11 rows, must be 1 to chunk_length"),
        (make_infer(guidance=np.ones((0, 3), np.float32)), ErrorCode.BAD_VALUE, "0 rows, must be 1 to chunk_length"),
        (make_infer(delay_steps=11, guidance=None), ErrorCode.BAD_VALUE, "delay_steps=11"),
        (make_infer(execution_horizon=11, guidance=None), ErrorCode.BAD_VALUE, "execution_horizon=11"),
        (make_infer(execution_horizon=0, guidance=None), ErrorCode.BAD_VALUE, "execution_horizon=0"),
        (make_infer(), ErrorCode.BAD_VALUE, "needs schedule 'constant'"),
    ]
    for infer, code, match in cases:
        with pytest.raises(MessageError, match=match) as info:
            check_infer(infer, METADATA)
        assert info.value.code is code
