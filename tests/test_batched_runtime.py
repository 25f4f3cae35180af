"""PolicyRuntime.stream / run_batch: several requests as one batched prefill and denoise loop give each request
the chunk it gets alone (pi05-tiny, random weights), row by row."""

from __future__ import annotations

import time

import numpy as np
import pytest
from msgspec.structs import replace

from robot_io.protocol import Infer
from tests.torch_threads import torch_threads
from vlash.engines import create_engine
from vlash.engines.torch_engine import TorchEngine
from vlash.policies.formats.random_policy import random_policy
from vlash.policies.processing.processor import Observation
from vlash.runtime.policy_runtime import Cancelled, ChunkResult, PolicyRuntime, RowEvent, make_infer

STEPS = 4
ATOL = 1e-5  # normalized == robot units here (identity stats)
PREFIX = np.array([[0.1, 0.7], [-0.2, 0.3], [1e-7, 0.9999999]], np.float32)  # no exact normalize round trip


@pytest.fixture(autouse=True, scope="module")
def _one_thread():
    with torch_threads(1):
        yield


@pytest.fixture(scope="module")
def policy():
    return random_policy("pi05-tiny", seed=1)


@pytest.fixture(scope="module")
def runtime(policy) -> PolicyRuntime:
    return PolicyRuntime(policy, create_engine("torch", model=policy.model), num_steps=STEPS)


def _image(runtime: PolicyRuntime, seed: int) -> np.ndarray:
    size = runtime.config.vision.image_size
    return np.random.default_rng(seed).integers(0, 256, (size, size, 3), dtype=np.uint8)


def _requests(runtime: PolicyRuntime) -> list[Infer]:
    """Plain constant; horizon-aware with a 3-row prefix; horizon-aware with an early stop; guided RTC."""
    cam = runtime.config.camera_names[0]
    guidance = np.random.default_rng(5).normal(0.0, 0.5, (30, 2)).astype(np.float32)
    specs = [
        ("go", {}),
        ("pick up the red cube", {"prefix": PREFIX, "schedule": "horizon-aware"}),
        ("push the block to the target", {"schedule": "horizon-aware", "execution_horizon": 6}),
        ("go to the goal", {"guidance": guidance, "delay_steps": 2, "execution_horizon": 10}),
    ]
    return [
        make_infer(
            {cam: _image(runtime, i)}, np.array([0.2 * i - 0.3, 0.5 - 0.1 * i], np.float32), prompt, seed=i, **kw
        )
        for i, (prompt, kw) in enumerate(specs)
    ]


def _assert_same(got: ChunkResult, want: ChunkResult, request: Infer) -> None:
    assert isinstance(got, ChunkResult), got
    assert (got.final_rows, got.num_steps, got.seed) == (want.final_rows, want.num_steps, want.seed)
    np.testing.assert_array_equal(got.final_at_step, want.final_at_step)
    assert np.isnan(got.actions[got.final_rows :]).all() and np.isfinite(got.actions[: got.final_rows]).all()
    np.testing.assert_allclose(got.actions[: got.final_rows], want.actions[: want.final_rows], atol=ATOL, rtol=0)
    if request.prefix is not None:
        assert got.actions[: len(request.prefix)].tobytes() == request.prefix.tobytes()
    assert len(got.step_ms) == got.num_steps


@pytest.fixture(scope="module")
def alone(runtime) -> list[ChunkResult]:
    return [runtime.run(r) for r in _requests(runtime)]


def test_a_batch_gives_every_request_its_unbatched_chunk(runtime, alone):
    requests = _requests(runtime)
    obs = [Observation(r.images, r.state, r.prompt) for r in requests]
    lengths = runtime.processor.preprocess(obs).token_masks.sum(dim=1).tolist()
    assert len(set(lengths)) == len(lengths)  # prompts of different token lengths, padded with a mask
    assert 6 <= alone[2].final_rows < runtime.horizon and alone[2].num_steps == 2  # the early stop happens
    unguided = runtime.run(replace(requests[3], guidance=None))
    assert not np.allclose(unguided.actions, alone[3].actions, atol=1e-3)  # the guided row is guided
    results = runtime.run_batch(requests)
    for got, want, request in zip(results, alone, requests, strict=True):
        _assert_same(got, want, request)
        assert got.batch_size == 4 and want.batch_size == 1


def _cancel_row_at_pass(row: int, calls: int) -> tuple[list[int], object]:
    """A `cancelled` predicate that names `row` on its `calls`-th question about it (the 1st is asked before the
    batch runs, the 2nd before step 0, the 3rd before step 1, ...), and the list of its questions."""
    asked: list[int] = []

    def cancelled(i: int) -> bool:
        if i != row:
            return False
        asked.append(i)
        return len(asked) >= calls

    return asked, cancelled


def _outcomes(events: list[RowEvent]) -> dict[int, ChunkResult | Exception]:
    return {e.row: e.result for e in events if e.done}


def test_pieces_stream_per_row_as_they_do_alone_and_each_row_is_done_once_after_its_last(runtime):
    requests = _requests(runtime)
    want = [[(e.start, len(e.actions), e.step) for e in runtime.stream([r]) if not e.done] for r in requests]
    events = list(runtime.stream(requests))
    pieces = [e for e in events if not e.done]
    outcome = _outcomes(events)
    got = [[(p.start, len(p.actions), p.step) for p in pieces if p.row == i] for i in range(4)]
    assert got == want
    assert len(want[1]) > 2 and want[0] == [(0, runtime.horizon, STEPS - 1)]
    assert got[2][-1][0] + got[2][-1][1] == outcome[2].final_rows < runtime.horizon  # the early stop
    for piece in pieces:  # a piece is the final chunk's rows
        np.testing.assert_array_equal(
            outcome[piece.row].actions[piece.start : piece.start + len(piece.actions)], piece.actions
        )
    done_at = {e.row: at for at, e in enumerate(events) if e.done}
    assert sorted(done_at) == [0, 1, 2, 3] and len(events) == len(pieces) + 4
    for row, at in done_at.items():
        assert isinstance(events[at].result, ChunkResult)
        assert not any(e.row == row for e in events[at + 1 :])


def test_an_early_stopped_row_is_done_while_the_other_row_still_runs(runtime):
    """Its done event comes before the other row's last piece (a server answers it then), as do a refused request's
    at once and a cancelled row's before anything of the step it was cancelled before."""
    early, constant = _requests(runtime)[2], _requests(runtime)[0]
    bad = replace(constant, state=np.zeros(1, np.float32))
    asked, cancelled = _cancel_row_at_pass(3, calls=3)  # before step 1
    stream = list(runtime.stream([early, constant, bad, constant], cancelled))
    events = [(e.done, e.row, e.step) for e in stream]
    outcome = _outcomes(stream)
    assert events[0] == (True, 2, -1)  # refused before the batch ran
    early_done = events.index((True, 0, -1))
    last_piece = max(at for at, e in enumerate(events) if e[:2] == (False, 1))
    assert early_done < last_piece and events[last_piece][2] == STEPS - 1
    assert outcome[0].num_steps < STEPS and outcome[1].num_steps == STEPS
    # the cancelled row is over before step 1 ran, so before anything of step 1 was reported
    assert events.index((True, 3, -1)) < min(at for at, e in enumerate(events) if e[2] == 1)
    assert isinstance(outcome[3], Cancelled) and isinstance(outcome[2], ValueError) and len(asked) == 3


def test_step_and_prefill_times_include_the_pace_and_preprocessing_is_per_request(runtime, monkeypatch):
    pause_s = 0.02
    sampler = runtime._sampler

    def slow_sampler(request):  # inside the timed preparation of the second request only
        if request.prompt == "slow":
            time.sleep(10 * pause_s)
        return sampler(request)

    monkeypatch.setattr(runtime, "_sampler", slow_sampler)
    requests = [_requests(runtime)[0], replace(_requests(runtime)[1], prompt="slow")]
    paced: list[int] = []

    def pace(steps: int) -> None:
        paced.append(steps)
        time.sleep(pause_s)

    fast, slow = _outcomes(list(runtime.stream(requests, pace=pace))).values()
    assert paced == [0] + [1] * STEPS  # before the prefill, then before each step (the torch engine: step by step)
    for result in (fast, slow):
        assert result.timing_ms["prefill_ms"] >= pause_s * 1e3
        assert len(result.step_ms) == STEPS and min(result.step_ms) >= pause_s * 1e3
    assert slow.timing_ms["preprocess_ms"] >= 10 * pause_s * 1e3
    assert fast.timing_ms["preprocess_ms"] < slow.timing_ms["preprocess_ms"]  # not the batch's preprocessing


def test_a_cancelled_row_leaves_and_the_batch_shrinks(runtime, alone):
    requests = _requests(runtime)
    sizes = []
    engine = runtime.engine
    step = engine.denoise_step

    def recording(x, tau, cache):
        sizes.append((x.shape[0], cache.keys.shape[1]))
        return step(x, tau, cache)

    engine.denoise_step = recording
    asked, cancelled = _cancel_row_at_pass(3, calls=3)
    try:
        results = _outcomes(list(runtime.stream(requests, cancelled)))
    finally:
        del engine.denoise_step
    assert isinstance(results[3], Cancelled) and len(asked) == 3
    for i in range(3):
        _assert_same(results[i], alone[i], requests[i])
    # 4 rows at step 0; the guided row leaves before step 1; the early-stopped row after step 1
    assert [n for n, _ in sizes] == [4, 3, 2, 2] and all(n == rows for n, rows in sizes)


def test_a_row_cancelled_before_its_batch_never_enters_it(runtime, alone):
    requests = _requests(runtime)[:2]
    _, cancelled = _cancel_row_at_pass(0, calls=1)
    events = list(runtime.stream(requests, cancelled))
    assert (events[0].row, type(events[0].result)) == (0, Cancelled)
    assert {e.row for e in events[1:]} == {1}
    _assert_same(_outcomes(events)[1], alone[1], requests[1])
    assert _outcomes(events)[1].batch_size == 1


def test_rows_with_different_prefix_lengths_each_get_their_chunk_alone(runtime):
    cam = runtime.config.camera_names[0]
    prefix = np.random.default_rng(7).normal(0.0, 0.5, (5, 2)).astype(np.float32)
    requests = [
        make_infer({cam: _image(runtime, 10 + i)}, np.array([0.1, -0.2 * i], np.float32), prompt, seed=10 + i, **kw)
        for i, (prompt, kw) in enumerate(
            [
                ("pick", {"prefix": prefix[:2], "schedule": "horizon-aware"}),
                ("place it on the shelf", {"prefix": prefix[2:], "schedule": "horizon-aware", "execution_horizon": 4}),
                ("go", {"prefix": prefix[:5]}),
            ]
        )
    ]
    alone = [runtime.run(r) for r in requests]
    assert [int((a.final_at_step == -2).sum()) for a in alone] == [2, 3, 5]
    for got, want, request in zip(runtime.run_batch(requests), alone, requests, strict=True):
        _assert_same(got, want, request)


def test_an_engine_that_cannot_shrink_a_batch_keeps_every_row_to_the_end(runtime, policy, alone):
    class GraphEngine(TorchEngine):  # a per-step engine of fixed batch (as an artifact engine padded to its batch)
        can_shrink_batch = False

    assert runtime.engine.can_shrink_batch and runtime.max_batch is None
    assert not TorchEngine(policy.model, compile_mode="reduce-overhead").can_shrink_batch
    assert not TorchEngine(policy.model, graphs="step").can_shrink_batch
    engine = GraphEngine(policy.model)
    sizes = []

    def recording(x, tau, cache):
        sizes.append((x.shape[0], cache.keys.shape[1]))
        return TorchEngine.denoise_step(engine, x, tau, cache)

    engine.denoise_step = recording
    fixed = PolicyRuntime(policy, engine, num_steps=STEPS)
    requests = _requests(fixed)

    _, cancelled = _cancel_row_at_pass(3, calls=3)
    results = _outcomes(list(fixed.stream(requests, cancelled)))
    assert sizes == [(4, 4)] * STEPS  # the early-stopped and the cancelled rows stay in x
    assert isinstance(results[3], Cancelled)
    for i in range(3):
        _assert_same(results[i], alone[i], requests[i])


def test_a_malformed_request_is_its_outcome_and_the_others_are_served(runtime, alone):
    requests = _requests(runtime)
    bad_state = replace(requests[1], state=np.zeros(1, np.float32))
    bad_prefix = replace(requests[0], prefix=np.zeros((2, 3), np.float32))
    bad_horizon = replace(requests[2], execution_horizon=0)
    results = runtime.run_batch([requests[0], bad_state, bad_prefix, bad_horizon, requests[3]])
    assert all(isinstance(r, ValueError) for r in results[1:4])
    assert "execution_horizon" in str(results[3])
    _assert_same(results[0], alone[0], requests[0])
    _assert_same(results[4], alone[3], requests[3])
    assert results[0].batch_size == 2
    with pytest.raises(ValueError, match="entries"):  # alone, the same request raises from its stream
        runtime.run(bad_state)


def test_an_engine_failure_ends_the_whole_stream(runtime, monkeypatch):
    def lost(x, tau, cache):
        raise RuntimeError("device lost")

    monkeypatch.setattr(runtime.engine, "denoise_step", lost)
    with pytest.raises(RuntimeError, match="device lost"):
        runtime.run_batch(_requests(runtime)[:2])
    assert runtime.run_batch([]) == []


def test_onnxruntime_static_batch_is_padded_and_matches_torch(runtime, alone, policy, tmp_path):
    pytest.importorskip("onnxruntime")
    from vlash.engines.onnx_export import export_onnx

    export_onnx(policy.model, tmp_path, batch=2)
    engine = create_engine("onnxruntime", artifact=tmp_path, threads=1)
    ort = PolicyRuntime(policy, engine, num_steps=STEPS)
    assert ort.max_batch == 2
    requests = _requests(runtime)[:3]  # guided RTC needs autograd: the torch engine only
    pairs = ort.run_batch(requests[:2])
    padded = ort.run_batch(requests[2:])
    assert [r.batch_size for r in pairs + padded] == [2, 2, 1]
    for got, want, request in zip(pairs + padded, alone[:3], requests, strict=True):
        assert (got.final_rows, got.num_steps) == (want.final_rows, want.num_steps)
        np.testing.assert_array_equal(got.final_at_step, want.final_at_step)
        np.testing.assert_allclose(got.actions[: got.final_rows], want.actions[: want.final_rows], atol=1e-4)
        if request.prefix is not None:
            assert got.actions[: len(request.prefix)].tobytes() == request.prefix.tobytes()
    with pytest.raises(ValueError, match="at most 2"):
        list(ort.stream(requests))
