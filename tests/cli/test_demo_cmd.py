"""`vlash demo`: a server child process, the simulated arm through real ZeroMQ, a table and a PNG."""

from __future__ import annotations

import importlib.util
import re
from types import SimpleNamespace

import pytest

from robot_io.rerun_trace import read_recording
from robot_io.run_summary import LABELS, RunSummary
from tests.server.conftest import write_policy
from vlash.cli.main import main
from vlash.demo.report import FIELDS, injection_note, summary_table
from vlash.demo.session import DemoConfig


def test_demo_compares_modes_side_by_side_and_writes_the_plot(tmp_path, capsys):
    policy = write_policy(tmp_path)
    png = tmp_path / "out" / "demo.png"
    # 2 s per mode: with 1 s, sync ran a single chunk once in a clean-clone run on a slow VM
    argv = ["demo", "--checkpoint", str(policy), "--duration-s", "2", "--modes", "sync,faster", "--steps", "4",
            "--inject-latency-ms", "30", "--threads", "1", "--plot", str(png),
            "--record", str(tmp_path / "d.rrd")]  # fmt: skip
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "serving on tcp://127.0.0.1:" in out and "+30 ms" in out
    header = next(line for line in out.splitlines() if "metric" in line)
    assert header.index("sync") < header.index("faster")  # one table, a column per mode
    chunks = next(line for line in out.splitlines() if "chunks run" in line)
    assert all(int(n) >= 2 for n in chunks.strip("│┃| ").split("│")[1:]), chunks
    assert 'every row is defined in docs/METHODS.md, "Run summary"' in out
    # each chunk waited the 30 ms injected (sync runs every denoise step), the rest is the policy's own time
    injected = re.search(r"chunk latency p50 = injected \+ the policy's own time: sync (\d+) \+ (\d+) ms, faster ", out)
    assert injected and 30 <= int(injected.group(1)) <= 40, out
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 20_000
    assert f"vlash demo: {png} holds an earlier vlash demo's plot" not in out  # there was none
    if importlib.util.find_spec("rerun") is not None:  # the [viz] extra: each mode's run under its name
        recording = read_recording(tmp_path / "d.rrd")
        for mode in ("sync", "faster"):
            cameras = [e for e in recording if e.startswith(f"{mode}/camera/")]
            assert len(cameras) == 1 and len(recording[cameras[0]]["step"]) >= 30, recording.keys()
            assert f"{mode}/command/joint0" in recording and f"{mode}/state/joint1" in recording
            assert any("faster" in text[0] for text in recording["faster/chunks"]["TextLog:text"])


def test_missing_shipped_policy_is_a_clean_error_with_a_way_forward(capsys):
    assert main(["demo", "--policy", "no-such-policy"]) == 2
    err = capsys.readouterr().err
    assert "no shipped policy 'no-such-policy'" in err and "--random-weights" in err


@pytest.mark.parametrize(
    ("argv", "match"),
    [
        (["--modes", "sync,warp"], "warp"),
        (["--random-weights"], "needs --policy"),
        (["--duration-s", "0"], "--duration-s must be > 0, got 0.0"),
        (["--duration-s", "inf"], "--duration-s must be > 0, got inf"),
        (["--execution-horizon", "0"], "--execution-horizon must be an int >= 1, got 0"),
        (["--plot", "."], "--plot '.' is a directory; give a file name"),  # said before the demo runs, not after
    ],
)
def test_bad_arguments_name_the_problem(argv, match, capsys, tmp_path):
    assert main(["demo", "--checkpoint", str(tmp_path), *argv]) == 2
    assert match in capsys.readouterr().err


def test_a_plot_file_vlash_demo_did_not_write_is_refused_before_the_demo_runs(capsys, tmp_path):
    mine = tmp_path / "demo.png"
    mine.write_bytes(b"\x89PNG\r\n\x1a\n my own figure")
    assert main(["demo", "--checkpoint", str(tmp_path), "--plot", str(mine)]) == 2
    err = capsys.readouterr().err
    assert err == (f"vlash demo: error: --plot '{mine}' exists and vlash demo did not write it, so it is not "
                   "replaced: move it, or give another --plot (e.g. --plot demo-2.png)\n")  # fmt: skip
    assert mine.read_bytes() == b"\x89PNG\r\n\x1a\n my own figure"


def test_a_plot_an_earlier_demo_wrote_is_replaced(tmp_path):
    import matplotlib.pyplot as plt

    from vlash.cli.demo_cmd import check_plot
    from vlash.demo.plot import PLOT_SOFTWARE

    fig = plt.figure()
    fig.savefig(tmp_path / "demo.png", metadata={"Software": PLOT_SOFTWARE})
    plt.close(fig)
    assert check_plot(tmp_path / "demo.png") and not check_plot(tmp_path / "new.png")


def test_a_bad_checkpoint_is_said_before_an_earlier_plot_is_announced_as_replaced(capsys, tmp_path):
    import matplotlib.pyplot as plt

    from vlash.demo.plot import PLOT_SOFTWARE

    fig = plt.figure()
    fig.savefig(tmp_path / "demo.png", metadata={"Software": PLOT_SOFTWARE})
    plt.close(fig)
    before = (tmp_path / "demo.png").read_bytes()
    nope = tmp_path / "nope"
    assert main(["demo", "--checkpoint", str(nope), "--plot", str(tmp_path / "demo.png")]) == 2
    said = capsys.readouterr()
    assert said.out == "" and f"--checkpoint {str(nope)!r} is not a directory" in said.err, said
    assert (tmp_path / "demo.png").read_bytes() == before


def test_the_demo_keeps_every_tick_and_chunk_of_its_runs_for_the_plot():
    config = DemoConfig(duration_s=20.0, rate_hz=30.0).run_config("faster")
    assert config.trace_ticks > 600 and config.executor.record_window > 600  # 600 ticks, at most one chunk each


def summary(**counts) -> RunSummary:
    fields = {name: 0 for name in RunSummary.__dataclass_fields__}
    return RunSummary(**{**fields, "mode": "vlash", "rate_hz": 30.0, **counts})


def test_the_table_names_rows_as_vlash_run_does_and_marks_only_holds_not_by_design():
    healthy = summary(ticks=600, chunks=36, watchdog_holds=59, waiting_steps=59)  # every hold a first chunk's wait
    starved = summary(ticks=600, chunks=20, watchdog_holds=250, waiting_steps=58, unexpected_holds=192)
    table = summary_table({"sync": SimpleNamespace(summary=healthy), "vlash": SimpleNamespace(summary=starved)})
    labels = list(table.columns[0].cells)
    assert labels == [LABELS[name] for name in FIELDS]  # one name per quantity, shared with vlash run
    holds = labels.index("watchdog holds")  # its split right below it
    assert labels[holds + 1 : holds + 3] == ["of which waiting (by design)", "of which not by design"]
    ok, bad = (list(column.cells)[holds + 2] for column in table.columns[1:])
    assert str(ok) == "0 (0%)" and ok.spans[0].style == "green"  # 59 holds, all by design: nothing alarming
    assert str(bad) == "192 (32%)" and bad.spans[0].style == "bold red"


def test_the_injection_note_splits_each_chunk_latency_into_injected_and_own_time():
    def result(latency_ms, injected):
        records = [SimpleNamespace(timing_ms={"injected_ms": ms}) for ms in injected] + [SimpleNamespace(timing_ms={})]
        return SimpleNamespace(summary=summary(latency_p50_ms=latency_ms), records=records)

    note = injection_note({"sync": result(290.4, [150.2, 150.3, 151.0]), "faster": result(224.9, [109.0])}, 150)
    assert note.startswith("chunk latency p50 = injected + the policy's own time: sync 150 + 140 ms, faster 109 + "
                           "116 ms (the 150 ms are spread over the prefill and each denoise step")  # fmt: skip
    assert "\n" not in note
