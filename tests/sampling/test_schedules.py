import pytest
import torch

from vlash.sampling import Schedule, build_tau_grid, constant_tau_grid, global_times, horizon_aware_tau_grid

# N = 3, 7, 19: 1 - 1/N > (N - 1)/N in float64, so the first hit leaves a rounding residue.
CASES = [(10, 50, 0), (10, 50, 7), (5, 16, 3), (4, 8, 0), (1, 6, 2), (10, 3, 1), (3, 12, 0), (7, 30, 2), (19, 50, 5)]


def test_global_times_exact_ends():
    t = global_times(10)
    assert t.dtype == torch.float64
    assert t[0].item() == 1.0 and t[-1].item() == 0.0
    assert torch.allclose(t, torch.linspace(1, 0, 11, dtype=torch.float64))


def test_constant_grid_rows_and_prefix():
    grid = constant_tau_grid(10, 12, prefix_len=3)
    assert grid.shape == (11, 12) and grid.dtype == torch.float32
    assert torch.all(grid[:, :3] == 0)
    expected = torch.tensor([1 - k / 10 for k in range(11)], dtype=torch.float32)
    for i in range(3, 12):
        assert torch.equal(grid[:, i], expected)


@pytest.mark.parametrize("n,h,d", CASES)
def test_has_first_new_action_final_after_one_step(n, h, d):
    grid = horizon_aware_tau_grid(n, h, prefix_len=d)
    assert grid[0, d].item() == 1.0
    assert torch.all(grid[1:, d] == 0.0)  # exactly 0, not a rounding residue


@pytest.mark.parametrize("n,h,d", [c for c in CASES if c[1] - 1 > c[2]])
def test_has_last_index_equals_constant(n, h, d):
    has = horizon_aware_tau_grid(n, h, prefix_len=d)
    const = constant_tau_grid(n, h, prefix_len=d)
    assert torch.equal(has[:, -1], const[:, -1])


@pytest.mark.parametrize("n,h,d", CASES)
@pytest.mark.parametrize("alpha", [0.3, 0.6, 1.0, 2.0])
def test_has_monotone_bounded_and_prefix_zero(n, h, d, alpha):
    grid = horizon_aware_tau_grid(n, h, prefix_len=d, alpha=alpha)
    assert torch.all((grid >= 0) & (grid <= 1))
    assert torch.all(grid[1:] <= grid[:-1]), "tau must not increase over steps"
    assert torch.all(grid[:, d + 1 :] >= grid[:, d:-1]), "later indices must not be less noisy"
    assert torch.all(grid[:, :d] == 0)
    assert torch.all(grid[0, d:] == 1) and torch.all(grid[-1] == 0)


def test_has_matches_formula_in_the_middle():
    n, h, d, alpha, u0 = 10, 20, 2, 0.6, 0.9
    grid = horizon_aware_tau_grid(n, h, prefix_len=d, alpha=alpha)
    i, k = 9, 3
    u = u0 * (1 - ((i - d) / (h - 1 - d)) ** alpha)
    expected = min(max((1 - k / n - u) / (1 - u), 0.0), 1.0)
    assert grid[k, i].item() == pytest.approx(expected, abs=1e-6)
    assert 0 < expected < 1


def test_has_custom_u0_delays_first_action():
    grid = horizon_aware_tau_grid(10, 12, u0=0.75)
    assert grid[2, 0].item() > 0  # t_2 = 0.8 > 0.75
    assert grid[3, 0].item() == 0.0


def test_has_u0_zero_is_constant():
    assert torch.equal(horizon_aware_tau_grid(10, 12, prefix_len=2, u0=0.0), constant_tau_grid(10, 12, 2))


@pytest.mark.parametrize(
    "kwargs,word",
    [
        ({"num_steps": 0}, "num_steps"),
        ({"horizon": 0}, "horizon"),
        ({"prefix_len": 12}, "prefix_len"),
        ({"prefix_len": -1}, "prefix_len"),
        ({"alpha": 0.0}, "alpha"),
        ({"alpha": -1.0}, "alpha"),
        ({"u0": 1.0}, "u0"),
        ({"u0": -0.1}, "u0"),
    ],
)
def test_has_grid_validation(kwargs, word):
    args = {"num_steps": 10, "horizon": 12, "prefix_len": 0} | kwargs
    with pytest.raises(ValueError, match=word):
        horizon_aware_tau_grid(**args)


def test_build_tau_grid_dispatch():
    assert torch.equal(build_tau_grid("constant", 10, 8, 2), constant_tau_grid(10, 8, 2))
    assert torch.equal(
        build_tau_grid(Schedule.HORIZON_AWARE, 10, 8, 2, alpha=0.5),
        horizon_aware_tau_grid(10, 8, 2, alpha=0.5),
    )
    with pytest.raises(ValueError):
        build_tau_grid("linear", 10, 8)


def test_batched_horizon_aware_tau_matches_grid_rows():
    """Training draws one (t, d) per sample; each row must equal the sampler's grid at that t and d."""
    from vlash.sampling import horizon_aware_tau

    n, h = 10, 50
    for d in (0, 3):
        grid = horizon_aware_tau_grid(n, h, prefix_len=d)
        t = global_times(n)[[0, 4, 9]]
        batched = horizon_aware_tau(t, h, torch.tensor([d, d, d]), u0=(n - 1) / n)
        torch.testing.assert_close(batched.float(), grid[[0, 4, 9]], atol=1e-6, rtol=0)
    mixed = horizon_aware_tau(torch.tensor([0.95, 0.95]), h, torch.tensor([0, 7]))
    assert (mixed[1, :7] == 0).all() and (mixed[0, :7] > 0).any()
