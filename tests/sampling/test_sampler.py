from types import SimpleNamespace

import pytest
import torch

from vlash.sampling import (
    NOT_FINAL,
    PREFIX,
    FlowSampler,
    SamplerConfig,
    constant_tau_grid,
)

HAS = "horizon-aware"


def _chunks(run) -> list[SimpleNamespace]:
    """A run's events (every row's, in row order) as the blocks each step made final, the rows' actions stacked
    [B, n, A]: the rows share their settings, so each step finalizes the same indices of every row. Each row's done
    event (its SampleResult) comes after its last final actions, once."""
    chunks: dict[tuple[int, int], SimpleNamespace] = {}
    done: list[int] = []
    for event in run:
        if event.done:
            assert event.row not in done and event.result is not None
            done.append(event.row)
            continue
        assert event.row not in done, "final actions after the row's done event"
        key = (event.step, event.start)
        chunk = chunks.setdefault(key, SimpleNamespace(start=event.start, stop=event.stop, step=event.step, rows=[]))
        assert chunk.stop == event.stop and len(chunk.rows) == event.row  # every row, in row order
        chunk.rows.append(event.actions)
    assert done == list(range(run.result.actions.shape[0]))
    return [
        SimpleNamespace(start=c.start, stop=c.stop, step=c.step, actions=torch.stack(c.rows)) for c in chunks.values()
    ]


def plain_euler(field, noise, num_steps=10):
    """openpi's loop: x <- x + dt * v(x, t), dt = -1/N, t = 1, 1 - 1/N, ..."""
    x = noise.clone()
    for k in range(num_steps):
        tau = torch.full(noise.shape[:2], 1 - k / num_steps)
        x = x + (-1.0 / num_steps) * field(x, tau)
    return x


@pytest.mark.parametrize("num_steps", [1, 5, 10])
def test_constant_matches_plain_euler(mixing_field, noise, num_steps):
    result = FlowSampler(SamplerConfig(num_steps=num_steps)).sample(mixing_field, noise)
    assert result.actions.dtype == torch.float32
    assert result.steps_run == num_steps and result.prefix_len == 0
    assert torch.allclose(result.actions, plain_euler(mixing_field, noise, num_steps), atol=1e-6)
    assert torch.all(result.final_at_step == num_steps - 1)


def test_gaussian_field_reaches_its_data(gaussian_field, toy):
    """Sanity of the toy field: many Euler steps land near N(mu, s^2)."""
    big = torch.randn(4000, 16, 3, generator=torch.Generator().manual_seed(9))
    out = FlowSampler(SamplerConfig(num_steps=50)).sample(gaussian_field, big).actions
    assert torch.allclose(out.mean(0), gaussian_field.mu, atol=0.05)
    assert out.std(0).mean().item() == pytest.approx(0.3, abs=0.03)


@pytest.mark.parametrize("d", [0, 4])
def test_has_first_new_action_final_after_one_step(mixing_field, noise, prefix, toy, d):
    rec = toy.Recorder(mixing_field)
    run = FlowSampler(SamplerConfig(schedule=HAS)).start(rec, noise, prefix=prefix[:, :d] if d else None)
    first = next(run)  # row 0's first final actions
    assert (first.row, first.step, first.start) == (0, 0, d) and first.stop > d and not first.done
    x_after_step1 = rec.xs[0] + (0.0 - 1.0) * mixing_field(rec.xs[0], rec.taus[0])
    result = run.drain()
    assert result.final_at_step[d].item() == 0
    assert torch.equal(first.actions[0], result.actions[0, d])
    assert torch.allclose(result.actions[:, d], x_after_step1[:, d], atol=1e-6)
    assert all(torch.all(t[:, d] == 0) for t in rec.taus[1:])


def test_has_last_token_follows_constant_schedule(gaussian_field, noise, toy):
    rec = toy.Recorder(gaussian_field)
    has = FlowSampler(SamplerConfig(schedule=HAS)).sample(rec, noise)
    const = FlowSampler(SamplerConfig()).sample(gaussian_field, noise)
    seen = torch.stack([t[0, -1] for t in rec.taus])
    assert torch.equal(seen, constant_tau_grid(10, noise.shape[1])[:-1, -1])
    assert torch.allclose(has.actions[:, -1], const.actions[:, -1], atol=1e-6)
    assert not torch.allclose(has.actions[:, 0], const.actions[:, 0], atol=1e-3)  # tau matters


@pytest.mark.parametrize("schedule", ["constant", HAS])
def test_prefix_bit_exact_and_tau_zero(mixing_field, noise, prefix, toy, schedule):
    rec = toy.Recorder(mixing_field)
    d = prefix.shape[1]
    noise = noise.clone()
    noise[:, :d] = 1e3  # must be ignored
    result = FlowSampler(SamplerConfig(schedule=schedule)).sample(rec, noise, prefix=prefix)
    assert torch.equal(result.actions[:, :d], prefix)
    assert result.prefix_len == d and torch.all(result.final_at_step[:d] == PREFIX)
    assert len(rec.taus) == 10
    assert torch.all(rec.taus[0][:, d:] == 1)
    for x, tau in zip(rec.xs, rec.taus, strict=True):
        assert torch.all(tau[:, :d] == 0)
        assert torch.equal(x[:, :d], prefix)
    no_prefix = FlowSampler(SamplerConfig(schedule=schedule)).sample(mixing_field, noise)
    assert not torch.allclose(no_prefix.actions[:, d:], result.actions[:, d:], atol=1e-3)


@pytest.mark.parametrize("schedule", ["constant", HAS])
@pytest.mark.parametrize("d", [0, 4])
def test_streaming_is_contiguous_and_matches_result(mixing_field, noise, prefix, schedule, d):
    run = FlowSampler(SamplerConfig(schedule=schedule)).start(mixing_field, noise, prefix=prefix[:, :d] if d else None)
    chunks = _chunks(run)
    result = run.result
    assert chunks[0].start == d and chunks[-1].stop == noise.shape[1]
    for before, after in zip(chunks, chunks[1:], strict=False):
        assert after.start == before.stop and after.step > before.step
    streamed = torch.cat([c.actions for c in chunks], dim=1)
    assert torch.equal(streamed, result.actions[:, d:])
    for c in chunks:
        assert torch.all(result.final_at_step[c.start : c.stop] == c.step)
    if schedule == HAS:
        assert chunks[0].step == 0 and len(chunks) > 2
    else:
        assert len(chunks) == 1 and chunks[0].step == 9


def test_early_stop(mixing_field, noise, prefix):
    d, k = prefix.shape[1], 8
    full = FlowSampler(SamplerConfig(schedule=HAS)).sample(mixing_field, noise, prefix=prefix)
    sampler = FlowSampler(SamplerConfig(schedule=HAS, early_stop_final=k))
    run = sampler.start(mixing_field, noise, prefix=prefix)
    chunks = _chunks(run)
    result = run.result
    assert result.steps_run < 10 and len(result.step_times_s) == result.steps_run
    assert result.num_final >= k and chunks[-1].stop == result.num_final
    n_final = result.num_final
    assert torch.all(result.final_at_step[d:n_final] >= 0)
    assert torch.all(result.final_at_step[n_final:] == NOT_FINAL)
    assert torch.equal(result.actions[:, :n_final], full.actions[:, :n_final])


def test_final_tau_snaps_grid_and_streamed_values_stay(mixing_field, noise):
    sampler = FlowSampler(SamplerConfig(schedule=HAS, final_tau=0.2))
    grid = sampler.tau_grid(noise.shape[1])
    assert torch.all((grid == 0) | (grid > 0.2))
    assert (grid == 0).sum() > (FlowSampler(SamplerConfig(schedule=HAS)).tau_grid(16) == 0).sum()
    run = sampler.start(mixing_field, noise)
    chunks = _chunks(run)
    assert torch.equal(torch.cat([c.actions for c in chunks], dim=1), run.result.actions)


def test_bf16_velocity_accumulates_in_fp32(mixing_field, noise):
    def bf16_field(x, tau):
        assert x.dtype == torch.float32 and tau.dtype == torch.float32
        return mixing_field(x, tau).bfloat16()

    result = FlowSampler(SamplerConfig()).sample(bf16_field, noise.bfloat16())
    assert result.actions.dtype == torch.float32
    reference = plain_euler(lambda x, t: bf16_field(x, t).float(), noise.bfloat16().float())
    assert torch.allclose(result.actions, reference, atol=1e-6)


def test_timings_and_synchronize(mixing_field, noise):
    calls = []
    result = FlowSampler(SamplerConfig(num_steps=4)).sample(mixing_field, noise, synchronize=lambda: calls.append(1))
    assert len(calls) == 1 + 4
    assert len(result.step_times_s) == 4 and all(t >= 0 for t in result.step_times_s)


def test_run_is_lazy_and_result_needs_finish(mixing_field, noise, toy):
    rec = toy.Recorder(mixing_field)
    run = FlowSampler(SamplerConfig()).start(rec, noise)
    assert len(rec.xs) == 0 and not run.done
    with pytest.raises(RuntimeError, match="not finished"):
        _ = run.result
    assert run.drain().steps_run == 10 and run.done


@pytest.mark.parametrize(
    "kwargs,word",
    [
        ({"num_steps": 0}, "num_steps"),
        ({"schedule": "linear"}, "schedule"),
        ({"alpha": 0.0}, "alpha"),
        ({"u0": 1.0}, "u0"),
        ({"final_tau": 1.0}, "final_tau"),
        ({"final_tau": -0.1}, "final_tau"),
        ({"early_stop_final": 0}, "early_stop_final"),
    ],
)
def test_config_validation(kwargs, word):
    with pytest.raises(ValueError, match=word):
        SamplerConfig(**kwargs)


def test_input_validation(mixing_field, noise, prefix):
    sampler = FlowSampler()
    with pytest.raises(ValueError, match="noise"):
        sampler.start(mixing_field, noise[0])
    with pytest.raises(ValueError, match="prefix"):
        sampler.start(mixing_field, noise, prefix=prefix[:2])
    with pytest.raises(ValueError, match="prefix length"):
        sampler.start(mixing_field, noise, prefix=torch.zeros(4, 16, 3))
    with pytest.raises(ValueError, match="early_stop_final"):
        FlowSampler(SamplerConfig(early_stop_final=17)).start(mixing_field, noise)
    with pytest.raises(ValueError, match="velocity_fn"):
        sampler.sample(lambda x, tau: x[:, :-1], noise)
