"""`vlash demo`'s figure: columns titled with mode and delay, one legend outside the axes (chunk boundaries and
episode resets in it), and trajectories broken at episode resets. Runs from PointArm in simulated time (no server)."""

from __future__ import annotations

import numpy as np
import pytest

from robot_io.control import SimulatedClock
from robot_io.executors import ExecutorConfig
from robot_io.runner import RunConfig, Runner
from tests.fakes import PointArm, point_metadata, ramp_planner
from vlash.sim.policy_link import SimulatedPolicyLink

pytest.importorskip("matplotlib")
from vlash.demo.plot import demo_figure, plot_demo, written_by_demo  # noqa: E402  (matplotlib is the simulator extra's)


def run(mode: str, latency_s: float):
    clock = SimulatedClock()
    client = SimulatedPolicyLink(ramp_planner(20), point_metadata(), clock, latency_s)
    config = RunConfig(ExecutorConfig(mode, execution_horizon=5, initial_delay=2), rate_hz=30.0, duration_s=3.0)
    return Runner(PointArm(episode_steps=40), client, config, clock).run()


@pytest.fixture(scope="module")
def results():
    return {"sync": run("sync", 0.1), "vlash": run("vlash", 0.1)}


def test_columns_are_titled_with_their_mode_and_delay(results):
    fig = demo_figure(results, "demo")
    titles = [ax.get_title() for ax in fig.axes[: len(results)]]  # the top row, one axes per column
    for mode, title in zip(results, titles, strict=True):
        d = results[mode].summary.delay_steps
        assert title.startswith(f"{mode}: d = {d} steps ({d * 1000 / 30:.0f} ms), latency p50 100 ms\n"), title


def test_one_legend_outside_the_data_names_chunk_boundaries_and_episode_resets(results):
    fig = demo_figure(results, "demo")
    assert all(ax.get_legend() is None for ax in fig.axes) and len(fig.legends) == 1
    legend = fig.legends[0]
    labels = [t.get_text() for t in legend.get_texts()]
    assert {"chunk boundary", "episode reset", "commanded", "measured", "watchdog hold"} <= set(labels)
    assert len(labels) == len(set(labels))  # each once, though every column draws them
    fig.canvas.draw()
    box = legend.get_window_extent()
    assert not any(box.overlaps(ax.get_window_extent()) for ax in fig.axes)


def test_trajectories_break_at_episode_resets_instead_of_jumping(results):
    fig = demo_figure(results, "demo")
    resets = np.flatnonzero(results["sync"].resets)
    assert resets.tolist() == [40, 80]  # PointArm starts a new episode every 40 observations, 1 unit away
    commanded = fig.axes[0].get_lines()[0]  # joint 0 of the first column (sync)
    x, y = np.asarray(commanded.get_xdata()), np.asarray(commanded.get_ydata())
    gaps = np.flatnonzero(np.isnan(y))
    assert len(gaps) == 2 and np.isnan(x[gaps]).all()  # no segment across a reset
    assert np.nanmax(np.abs(np.diff(y))) < 0.5  # what is drawn has no jump left: the 1-unit ones were resets


def test_the_png_is_written(results, tmp_path):
    path = plot_demo(results, tmp_path / "sub" / "demo.png", "demo")
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert written_by_demo(path)  # vlash demo may replace it, and says so


def test_a_png_vlash_demo_did_not_write_is_told_apart(tmp_path):
    import matplotlib.pyplot as plt

    fig = plt.figure()
    fig.savefig(tmp_path / "mine.png")  # matplotlib's own Software chunk, as an older vlash demo wrote it too
    plt.close(fig)
    (tmp_path / "notes.png").write_text("not even a PNG")
    assert not written_by_demo(tmp_path / "mine.png") and not written_by_demo(tmp_path / "notes.png")
    assert not written_by_demo(tmp_path / "missing.png")
