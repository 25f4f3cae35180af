"""HostLoad: the line printed beside a timing and the one warning when other work competes for the cores."""

from __future__ import annotations

import pytest

import robot_io.host_load as host_load
from robot_io.host_load import HostLoad


@pytest.mark.parametrize(
    ("load", "cores", "threads", "warned"),
    [(1.01, 2, 1, True), (1.0, 2, 1, False), (0.2, 4, 4, True), (3.9, 8, 4, False), (None, 2, 2, False)],
)
def test_the_warning_comes_when_the_load_exceeds_the_cores_left_free(load, cores, threads, warned):
    host = HostLoad(load, cores, threads)
    assert host.contended is warned and (host.warning() is not None) is warned
    assert host.lines()[0] == (f"host load {'unknown' if load is None else f'{load:.2f}'} (1-min average) on {cores} "
                               f"cores; torch threads: {threads}")  # fmt: skip
    assert len(host.lines()) == 1 + warned


def test_now_samples_the_load_average_and_the_cores_of_this_process(monkeypatch):
    monkeypatch.setattr(host_load, "load_average", lambda: 0.5)
    monkeypatch.setattr(host_load, "available_cores", lambda: 6)
    assert HostLoad.now(5, "control-loop threads").as_dict() == {
        "load_1m": 0.5, "cores": 6, "threads": 5, "what": "control-loop threads"}  # fmt: skip


def test_a_host_without_a_load_average_prints_unknown_and_never_warns(monkeypatch):
    def no_load_average():
        raise OSError("no load average here")

    monkeypatch.setattr(host_load.os, "getloadavg", no_load_average)
    host = HostLoad.now(1)
    assert host.load_1m is None and host.lines() == [f"host load unknown (1-min average) on {host.cores} cores; "
                                                     "torch threads: 1"]  # fmt: skip
