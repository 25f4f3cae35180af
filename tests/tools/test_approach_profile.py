"""tools/approach_profile.py: target segments, first-within steps, and a short oracle run end to end."""

from __future__ import annotations

import json

import numpy as np
import pytest

from tests.tools.tool_loader import load_tool
from vlash.errors import ConfigError


def _tool():
    return load_tool("approach_profile")


def _info(ee, target, events=()):
    return {
        "ee_xy": np.array(ee, float),
        "target_xy": None if target is None else np.array(target, float),
        "events": list(events),
    }


def test_segments_split_by_target_and_the_touch_step_closes_its_segment():
    tool = _tool()
    a, b = (1.0, 0.0), (0.0, 1.0)
    infos = [
        _info((0.0, 0.0), None),  # nothing shown yet
        _info((0.5, 0.0), a),
        _info((0.8, 0.0), a),
        _info((0.97, 0.0), None, [{"kind": "touch", "id": 0, "xy": a}]),  # touches a: reports no target any more
        _info((0.9, 0.2), b),
        _info((0.8, 0.4), b, [{"kind": "touch", "id": 2, "xy": (0.5, 0.5)}]),  # a wrong target (reach)
    ]
    first, second = tool.segments_of(infos)
    np.testing.assert_allclose(first.distances, [0.5, 0.2, 0.03])
    assert first.touched and first.first_within(0.06) == 2 and first.first_within(0.3) == 1
    assert not second.touched and second.first_within(0.06) is None  # the wrong target's touch is not b's
    assert second.distances.min() == pytest.approx(np.hypot(0.8, 0.6))


def test_summary_counts_reached_targets_and_closest_approach_of_the_missed():
    tool = _tool()
    prof = tool.PolicyProfile(
        "p",
        [tool.Segment(np.array([0.5, 0.2, 0.05]), True), tool.Segment(np.array([0.4, 0.12, 0.09]), False)],
        successes=1,
        episodes=1,
    )
    s = tool.summarize(prof, (0.15, 0.06), dt=0.1)
    assert [c["reached"] for c in s["radii"]] == [2, 1]
    assert s["radii"][0]["median_steps"] == 1.5 and s["radii"][1]["mean_s"] == pytest.approx(0.2)
    assert s["touched"] == 1 and s["closest_approach_untouched_median"] == pytest.approx(0.09)
    curves = tool.distance_curves(prof, 5)
    assert len(curves["median"]) == 5 and curves["median"][-1] == pytest.approx(0.07)  # edge-padded


def test_oracle_reach_run_writes_json_and_plot(tmp_path):
    tool = _tool()
    out, png = tmp_path / "a.json", tmp_path / "a.png"
    tool.main(["--task", "reach", "--episodes", "2", "--json", str(out), "--plot", str(png)])
    result = json.loads(out.read_text())
    (oracle,) = result["policies"]
    assert oracle["successes"] == 2 and oracle["touched"] == 2
    steps = [c["median_steps"] for c in oracle["radii"]]
    assert steps == sorted(steps)  # a smaller radius is never reached earlier
    assert png.stat().st_size > 0


def test_the_delay_and_mode_reach_the_robots_executor(tmp_path):
    tool = _tool()

    def first_touch(*args: str) -> float:
        out = tmp_path / "r.json"
        tool.main(["--task", "reach", "--episodes", "1", "--json", str(out), *args])
        (oracle,) = json.loads(out.read_text())["policies"]
        return oracle["radii"][-1]["median_steps"]

    instant, waiting = first_touch(), first_touch("--delay", "4")
    assert waiting > instant + 4  # sync holds d steps for every chunk
    assert first_touch("--mode", "vlash", "--delay", "4") < waiting  # the async mode hides the delay


def test_bad_arguments_are_refused():
    tool = _tool()
    with pytest.raises(ConfigError):
        tool.main(["--radii", "0.1,-1"])
    with pytest.raises(SystemExit):
        tool.main(["--task", "track"])  # moving targets have no fixed goal to approach
    with pytest.raises(SystemExit):
        tool.main(["--mode", "warp"])
    with pytest.raises(ConfigError, match="delay must be an int >= 0"):
        tool.main(["--delay", "-1"])
    with pytest.raises(ConfigError, match="delay 12 > execution horizon 10"):
        tool.main(["--mode", "naive", "--delay", "12", "--episodes", "1"])
