"""tools/reach_variants.py: one episode of a reach variant through vlash eval's harness."""

from __future__ import annotations

import pytest

from tests.tools.tool_loader import load_tool

pytestmark = pytest.mark.sim


def test_an_episode_of_the_shipped_and_of_a_faster_arm():
    tool = load_tool("reach_variants")
    shipped, fast = tool.VARIANTS[0], tool.VARIANTS[1]
    _, mode, delay, success, steps, switches = tool._episode((shipped, "vlash", 4, 0))
    assert (mode, delay, success) == ("vlash", 4, True) and switches >= 1
    _, _, _, fast_success, fast_steps, _ = tool._episode((fast, "vlash", 4, 0))
    assert fast_success and fast_steps < steps  # the arm moves twice as fast
    _, _, _, _, sync_steps, _ = tool._episode((shipped, "sync", 0, 0))
    assert sync_steps < steps  # no delay to wait for at d = 0
