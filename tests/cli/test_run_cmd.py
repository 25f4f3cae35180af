"""`vlash run` on real robots: `lerobot:<type>` + `--robot-config` through the real command line against the fake
LeRobot (tests/fixtures/fake_lerobot) and a torch-free loopback policy server over ZeroMQ; camera maps; one-line
setup errors; the plain-text status and summary (no rich)."""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import signal
import subprocess
import sys
import textwrap
import threading
import time
from types import SimpleNamespace

import numpy as np
import pytest

from robot_io.protocol import CameraSpec, Metadata
from robot_io.run_summary import LABELS
from robot_io.stop_signals import StopRequest
from tests.fakes import LoopbackPolicyServer, hold_planner
from tests.import_guard import BLOCK_HEAVY_IMPORTS
from tests.robot_io.lerobot_fixture import FAKE_LEROBOT, ROOT, SO101_YAML, fake_lerobot_on_path
from vlash.cli.main import main
from vlash.cli.run_cmd import StatusPrinter, report, summary_text

PI05_CAMERAS = [CameraSpec(n, 224, 224) for n in ("base_0_rgb", "left_wrist_0_rgb", "right_wrist_0_rgb")]
SO101_MAP = ["--camera", "base_0_rgb=front", "--camera", "left_wrist_0_rgb=wrist", "--camera", "right_wrist_0_rgb=none"]


def so101_metadata(state_dim: int = 6) -> Metadata:
    return Metadata("hold", PI05_CAMERAS, state_dim, 6, 20, 30.0, "fp32", "loopback", 1, "constant", False)


@pytest.fixture
def fake_lerobot():
    with fake_lerobot_on_path() as path:
        yield path


def run_argv(endpoint: str, *extra: str) -> list[str]:
    return ["run", "--server", endpoint, "--robot", "lerobot:so101_follower", "--robot-config", str(SO101_YAML),
            "--duration-s", "1", "--timeout", "5", *extra]  # fmt: skip


def test_lerobot_robot_runs_end_to_end_through_the_command_line(fake_lerobot, capsys):
    from lerobot.robots.so_follower import INSTANCES

    with LoopbackPolicyServer("tcp://127.0.0.1:*", hold_planner(20), so101_metadata()) as server:
        assert main(run_argv(server.endpoint, *SO101_MAP)) == 0
        requests = list(server.requests)
    arm = INSTANCES[-1]
    assert len(requests) >= 2 and arm.sent and not arm.is_connected and arm.calibrated_on_connect
    for infer in requests:  # front (index 0) feeds base_0_rgb, wrist (index 1) left_wrist; right_wrist is masked
        assert sorted(infer.images) == ["base_0_rgb", "left_wrist_0_rgb"] and infer.state.shape == (6,)
        assert infer.images["base_0_rgb"][0, 0, 0] == 0 and infer.images["left_wrist_0_rgb"][0, 0, 0] == 1
    np.testing.assert_allclose(list(arm.sent[-1].values()), [0, 0, 0, 0, 0, 50])  # the hold plan kept it still
    out = capsys.readouterr().out
    assert "\r" not in out and out.count("step ") == 1  # not a terminal: one plain progress line per 5 s
    assert "vlash run: vlash at 30 Hz" in out and "  missed deadlines  " in out


def test_without_lerobot_the_command_fails_with_one_line_naming_the_extra(capsys):
    assert main(["run", "--server", "tcp://127.0.0.1:9", "--robot", "lerobot:so101_follower",
                 "--robot-config", str(SO101_YAML)]) == 2  # fmt: skip
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "pip install 'vlash[lerobot]'" in err and err.startswith("vlash run: error:")


@pytest.mark.parametrize(
    ("argv", "match"),
    [
        (["--robot", "lerobot:ur5_arm"], "unknown LeRobot robot type 'ur5_arm'; known types: ["),
        (["--robot", "lerobot:so101_follower"], "missing required fields ['port']"),
        (["--robot", "ros:arm"], "unknown robot spec 'ros:arm'"),
        (["--robot", "sim:reach", "--robot-config", str(SO101_YAML)], "applies to lerobot:<type> robots"),
        (["--robot", "sim:reach", "--camera", "base_0_rgb"], "expected POLICY_CAMERA=ROBOT_CAMERA"),
        (["--robot", "sim:reach", "--sim", "observe=[speed]"], "observe: unknown observation 'speed'"),
        (["--robot", "lerobot:so101_follower", "--sim-config", "velocity"], "apply to sim:<task> robots"),
    ],
)
def test_setup_errors_are_one_line(fake_lerobot, capsys, argv, match):
    assert main(["run", "--server", "tcp://127.0.0.1:9", *argv]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and match in err, err


@pytest.mark.parametrize(
    ("state_dim", "camera_args", "match"),
    [
        (6, [], "policy camera 'base_0_rgb' has no robot camera"),
        (6, SO101_MAP[:4], "'right_wrist_0_rgb' has no robot camera"),
        (
            7,
            SO101_MAP,
            "expects state_dim 7 and action_dim 6; the robot (LeRobotRobot) has state_dim 6 and action_dim 6",
        ),
    ],
)
def test_a_robot_that_does_not_fit_the_policy_is_refused_naming_both_sides(fake_lerobot, capsys, state_dim,
                                                                           camera_args, match):  # fmt: skip
    from lerobot.robots.so_follower import INSTANCES

    with LoopbackPolicyServer("tcp://127.0.0.1:*", hold_planner(20), so101_metadata(state_dim)) as server:
        assert main(run_argv(server.endpoint, *camera_args)) == 2
        assert server.served == 0
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and match in err, err
    if state_dim == 6:
        assert "the robot's cameras: ['front', 'wrist']" in err
    assert not INSTANCES[-1].sent and not INSTANCES[-1].is_connected  # nothing commanded, disconnected


BLOCKED_LEROBOT_RUN = BLOCK_HEAVY_IMPORTS + textwrap.dedent(
    """
    HEAVY = (*HEAVY, "rich", "gymnasium", "cv2")  # the robot computer: numpy, pyzmq, msgpack, pyyaml (+ LeRobot)
    sys.path.insert(0, {fake!r})
    from robot_io.protocol import CameraSpec, Metadata
    from tests.fakes import LoopbackPolicyServer, hold_planner
    from vlash.cli.main import main

    cams = [CameraSpec("base_0_rgb", 224, 224), CameraSpec("left_wrist_0_rgb", 224, 224)]
    meta = Metadata("hold", cams, 6, 6, 20, 30.0, "fp32", "loopback", 1, "constant", False)
    with LoopbackPolicyServer("tcp://127.0.0.1:*", hold_planner(20), meta) as server:
        rc = main(["run", "--server", server.endpoint, "--robot", "lerobot:so101_follower", "--robot-config",
                   {yaml!r}, "--camera", "base_0_rgb=front", "--camera", "left_wrist_0_rgb=wrist", "--duration-s", "1"])
        assert rc == 0 and server.served >= 2, (rc, server.served)
    loaded = sorted({{m.split(".")[0] for m in sys.modules}} & set(HEAVY))
    assert not loaded, loaded
    print("ok")
    """
).format(fake=str(FAKE_LEROBOT), yaml=str(SO101_YAML))


def test_vlash_run_drives_a_lerobot_arm_without_torch_rich_gymnasium_or_opencv():
    out = subprocess.run([sys.executable, "-c", BLOCKED_LEROBOT_RUN], capture_output=True, text=True, timeout=120,
                         cwd=ROOT)  # fmt: skip
    assert out.returncode == 0, out.stderr[-3000:]
    assert out.stdout.rstrip().endswith("ok") and "chunks" in out.stdout


class Terminal(io.StringIO):
    def isatty(self):
        return True


STATUS = dict(step=3, chunks=1, delay_steps=2, latency_ms=None, missed=0, holds=4, overruns=0, episodes=0, successes=0)


def test_status_is_rewritten_in_place_on_a_terminal_and_printed_every_few_seconds_otherwise():
    tty = Terminal()
    printer = StatusPrinter(tty)
    printer(STATUS)
    printer({**STATUS, "step": 4, "latency_ms": 81.2})
    printer.close()
    text = tty.getvalue()
    assert text.startswith("\rstep      3") and "\rstep      4" in text and "latency   81 ms" in text
    assert "\n" not in text and text.endswith("\r")
    plain = io.StringIO()
    printer = StatusPrinter(plain, every_s=3600.0)
    for step in range(5):
        printer({**STATUS, "step": step})
    assert plain.getvalue().count("\n") == 1 and "\r" not in plain.getvalue()  # the first, then one per hour


def test_summary_is_aligned_plain_text():
    from robot_io.runner import RunSummary

    fields = {name: 0 for name in RunSummary.__dataclass_fields__}
    summary = RunSummary(**{**fields, "mode": "rtc", "rate_hz": 30.0, "duration_s": 12.345, "ttfa_p50_ms": None})
    lines = summary_text(summary).splitlines()
    assert (
        lines[0] == "vlash run: rtc at 30 Hz"
        and lines[-1] == '  (every row is defined in docs/METHODS.md, "Run summary")'
    )
    assert len({len(line) for line in lines[1:-1]}) == 1  # values right-aligned in one column
    rows = {label: line[len(label) + 2 :].strip() for line in lines[1:-1] for label in LABELS.values()
            if line[2:].startswith(label + " ")}  # fmt: skip
    assert list(rows) == list(LABELS.values())  # every field, by its one name (vlash demo's table uses the same)
    assert rows["duration s"] == "12.3" and rows["first needed action p50 ms"] == "-"
    assert rows["missed deadlines"] == "0" and rows["of which not by design"] == "0 (0%)"


@pytest.mark.parametrize(
    ("argv", "match"),
    [
        (["--server", "localhost:5555"], "--server 'localhost:5555' is not an endpoint: give tcp://HOST:PORT or "
         "ipc:///PATH, e.g. tcp://localhost:5555"),
        (["--server", "tcp://localhost"], "--server 'tcp://localhost': give tcp://HOST:PORT (a port from 1 to 65535)"),
        (["--timeout", "0"], "--timeout must be a positive number, got 0.0"),
        (["--rate-hz", "-30"], "--rate-hz must be > 0, got -30.0"),
        (["--duration-s", "nan"], "--duration-s must be > 0, got nan"),
        (["--duration-s", "0.01"], "--duration-s 0.01 s is shorter than one control period at 30 Hz"),
        (["--max-step", "0"], "--max-step must be > 0 or None, got 0.0"),
        (["--link-timeout-s", "inf"], "--link-timeout-s must be > 0, got inf"),
        (["--execution-horizon", "0"], "--execution-horizon must be an int >= 1, got 0"),
        (["--initial-delay", "11"], "--initial-delay 11 > --execution-horizon 10"),
        (["--initial-delay", "6", "--execution-horizon", "5"], "--initial-delay 6 > --execution-horizon 5"),
        (["--mode", "warp"], "argument --mode: invalid choice: 'warp' (choose from 'sync', 'naive', 'vlash', 'prefix', "
         "'rtc', 'faster', 'ensemble')"),
        (["--max-hold-share", "1.5"], "--max-hold-share must be between 0 and 1, got 1.5"),
        (["--server-key", "/no/such.key", "--client-key", "/no/such.key_secret"], "--server-key '/no/such.key': no "
         "such file"),
    ],
)  # fmt: skip
def test_every_argument_is_checked_before_connecting_with_one_line(capsys, argv, match):
    with LoopbackPolicyServer("tcp://127.0.0.1:*", hold_planner(20), so101_metadata()) as server:
        try:
            rc = main(["run", "--server", server.endpoint, "--robot", "sim:reach", "--duration-s", "1", *argv])
        except SystemExit as exc:  # refused while parsing (a value none of the flag's choices)
            rc = exc.code
        assert server.handshakes == 0  # nothing connected
    err = capsys.readouterr().err
    assert rc == 2 and err.count("\n") == 1 and err.startswith(f"vlash run: error: {match}"), err


def test_a_run_in_which_no_chunk_ever_ran_exits_1_with_the_reason_after_the_summary(fake_lerobot):
    release = threading.Event()

    def never_in_time(infer):  # the server takes the request and answers after the run (a loaded CPU server)
        release.wait(10.0)
        return hold_planner(20)(infer)

    out = io.StringIO()
    with LoopbackPolicyServer("tcp://127.0.0.1:*", never_in_time, so101_metadata()) as server:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
            rc = main(run_argv(server.endpoint, *SO101_MAP))
        release.set()
    lines = out.getvalue().splitlines()
    assert rc == 1 and server.handshakes == 1
    summary = lines.index("vlash run: vlash at 30 Hz")
    assert summary < len(lines) - 1 and any(line.split() == ["chunks", "run", "0"] for line in lines[summary:])
    # every tick held (a loaded machine may skip a deadline or two: not a fixed count)
    assert re.fullmatch(r"vlash run: the robot did not get usable chunks: no chunk ran in (\d+) ticks \(\1 watchdog .*",
                        lines[-1]), lines[-1]  # fmt: skip


def test_trace_and_json_get_every_tick_and_chunk_written_as_the_run_goes(fake_lerobot, tmp_path, capsys):
    trace, report = tmp_path / "run" / "trace.jsonl", tmp_path / "run" / "report.json"
    with LoopbackPolicyServer("tcp://127.0.0.1:*", hold_planner(20), so101_metadata()) as server:
        assert main(run_argv(server.endpoint, *SO101_MAP, "--trace", str(trace), "--json", str(report))) == 0
    rows = [json.loads(line) for line in trace.read_text().splitlines()]
    ticks = [r for r in rows if r["kind"] == "tick"]
    chunks = [r for r in rows if r["kind"] == "chunk"]
    summary = rows[-1]
    assert summary["kind"] == "summary" and len(ticks) == summary["ticks"] >= 20  # 30 unless deadlines were skipped
    steps = [t["step"] for t in ticks]
    assert steps == sorted(set(steps)) and len(ticks[0]["state"]) == len(ticks[0]["command"]) == 6
    assert sorted(c["chunk_id"] for c in chunks) == list(range(1, summary["requests"] + 1))
    document = json.loads(report.read_text())
    assert document["summary"] == {k: v for k, v in summary.items() if k != "kind"}
    assert sorted(c["chunk_id"] for c in document["chunks"]) == [
        c["chunk_id"] for c in sorted(chunks, key=lambda c: c["chunk_id"])
    ]
    out = capsys.readouterr().out
    assert f"wrote {report}" in out and f"wrote {trace}" in out


def test_record_writes_the_run_for_rerun_named_after_the_robot_s_joints(fake_lerobot, tmp_path, capsys):
    pytest.importorskip("rerun")  # the [viz] extra
    from robot_io.rerun_trace import read_recording

    path = tmp_path / "runs" / "run.rrd"
    with LoopbackPolicyServer("tcp://127.0.0.1:*", hold_planner(20), so101_metadata()) as server:
        assert main(run_argv(server.endpoint, *SO101_MAP, "--record", str(path))) == 0
    recording = read_recording(path)
    ticks = len(recording["held"]["step"])
    assert ticks >= 20 and len(recording["state/shoulder_pan.pos"]["step"]) == ticks  # 30 unless deadlines slipped
    assert 0 < len(recording["command/gripper.pos"]["step"]) <= ticks
    assert len(recording["camera/front"]["step"]) == len(recording["camera/wrist"]["step"]) == ticks
    assert recording["chunks"]["TextLog:text"][0][0].startswith("chunk 1 (sync): requested at step 0")
    assert f"wrote {path}" in capsys.readouterr().out


def test_record_without_rerun_is_refused_before_anything_connects(fake_lerobot, tmp_path, capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "rerun", None)
    with LoopbackPolicyServer("tcp://127.0.0.1:*", hold_planner(20), so101_metadata()) as server:
        assert main(run_argv(server.endpoint, *SO101_MAP, "--record", str(tmp_path / "run.rrd"))) == 2
        assert server.handshakes == 0
    assert capsys.readouterr().err.strip().endswith("--display / --record need rerun: pip install 'vlash[viz]'")


def test_a_horizon_longer_than_the_policy_s_chunk_is_refused_in_one_line_at_the_handshake(fake_lerobot, capsys):
    from lerobot.robots.so_follower import INSTANCES

    with LoopbackPolicyServer("tcp://127.0.0.1:*", hold_planner(20), so101_metadata()) as server:
        assert main(run_argv(server.endpoint, *SO101_MAP, "--execution-horizon", "25", "--initial-delay", "3")) == 2
        assert server.served == 0
    err = capsys.readouterr().err
    assert (
        err.count("\n") == 1
        and "(s + 1) * q = (25 + 1) * 1 = 26 chunk indices needed, the policy's chunk has 20" in err
    )
    assert not INSTANCES[-1].sent and not INSTANCES[-1].is_connected


def test_help_says_how_long_the_robot_moves_without_a_server(capsys):
    with pytest.raises(SystemExit):
        main(["run", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "until it runs out (up to a whole chunk" in text and "--link-timeout-s plus one period" in text
    assert "--on-link-loss {finish-chunk,hold}" in text and "--max-hold-share F" in text


def test_the_mock_robot_takes_the_policys_shape_and_a_short_chunk_its_horizon(capsys):
    """`--robot mock` is built from the server's METADATA (LeRobot's tiny pi0.5: state 8, action 6, cameras top and
    wrist, a chunk of 10); the default horizon halves for that chunk (10 would need 11 chunk indices)."""
    cameras = [CameraSpec("top", 224, 224), CameraSpec("wrist", 120, 160)]
    meta = Metadata("tiny", cameras, 8, 6, 10, 30.0, "fp32", "loopback", 1, "constant", False)
    with LoopbackPolicyServer("tcp://127.0.0.1:*", hold_planner(10, state_index=range(6)), meta) as server:
        assert main(["run", "--server", server.endpoint, "--robot", "mock", "--duration-s", "1", "--timeout", "5"]) == 0
        requests, handshakes = list(server.requests), server.handshakes
    assert handshakes == 1 and len(requests) >= 2
    for infer in requests:
        assert infer.state.shape == (8,) and {k: v.shape for k, v in infer.images.items()} == {
            "top": (224, 224, 3), "wrist": (120, 160, 3)}  # fmt: skip
    assert re.search(r"^\s*chunks run\s+[1-9]", capsys.readouterr().out, re.M)


@pytest.mark.sim  # the simulated arm (gymnasium, OpenCV)
def test_a_simulated_robot_runs_in_the_settings_given_its_extras_sent_and_kept_in_vlash_mode():
    """`--robot sim:hold --sim-config velocity-observable`: the state the policy gets holds the joints, their
    velocities and the target (8 entries); vlash's future state rolls the joints and keeps the rest."""
    meta = Metadata("hold", [CameraSpec("base_0_rgb", 96, 96)], 8, 2, 20, 30.0, "fp32", "loopback", 1, "constant",
                    False)  # fmt: skip
    turn = lambda infer: np.tile(np.float32([0.3, 0.0]), (20, 1))  # noqa: E731  velocity actions: turn joint 0
    with LoopbackPolicyServer("tcp://127.0.0.1:*", turn, meta) as server:
        argv = ["run", "--server", server.endpoint, "--robot", "sim:hold", "--sim-config", "velocity-observable"]
        assert main([*argv, "--duration-s", "1", "--timeout", "5"]) == 0
        requests = list(server.requests)
    assert len(requests) >= 2 and all(infer.state.shape == (8,) for infer in requests)
    futures = [infer for infer in requests if infer.future_state is not None]
    assert futures and all(infer.delay_steps >= 1 for infer in futures)
    for infer in futures:  # joint 0 rolled forward by the committed 0.3 rad/s, joint 1 and the extras as observed
        np.testing.assert_allclose(infer.future_state[0], infer.state[0] + infer.delay_steps * 0.3 / 30, atol=1e-5)
        np.testing.assert_array_equal(infer.future_state[1:], infer.state[1:])
    assert np.abs(requests[-1].state[2] - 0.3) < 0.01  # joint 0's measured velocity
    assert np.abs(requests[0].state[4:6]).max() > 0.2  # the named target's position, after the joints' velocities


def test_ctrl_c_stops_the_run_cleanly_with_the_summary_the_json_and_rc_130(tmp_path):
    """A real `vlash run` process sent SIGINT while chunks run: the hold, the summary, what the robot was left doing
    once LeRobot disconnected it and the --json file with its summary, then exit status 130 (no traceback)."""
    report = tmp_path / "run.json"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), str(FAKE_LEROBOT)])}
    with LoopbackPolicyServer("tcp://127.0.0.1:*", hold_planner(20), so101_metadata()) as server:
        argv = [sys.executable, "-m", "vlash.cli.main", *run_argv(server.endpoint, *SO101_MAP), "--duration-s", "120",
                "--json", str(report)]  # fmt: skip
        proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=ROOT)
        try:
            deadline = time.monotonic() + 60.0  # an import and a handshake: seconds, even on a loaded machine
            while server.served < 3 and proc.poll() is None and time.monotonic() < deadline:
                time.sleep(0.05)
            assert server.served >= 3, "the run never got chunks"
            proc.send_signal(signal.SIGINT)
            out, err = proc.communicate(timeout=60.0)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.communicate(timeout=10.0)
    assert proc.returncode == 130, err[-3000:]
    assert "Traceback" not in err and "KeyboardInterrupt" not in err, err[-3000:]
    assert "vlash run: vlash at 30 Hz" in out and re.search(r"^  chunks run +[1-9]\d*$", out, re.MULTILINE), out
    # configs/robots/so101.yaml says disable_torque_on_disconnect: true: LeRobot turned the torque off, and it says so
    assert re.search(r"^vlash run: stopped by SIGINT \(Ctrl-C\) after \d+\.\d s \(\d+ ticks\); the robot has its "
                     r"torque off \(disable_torque_on_disconnect: true in its config\): the arm is limp and may fall "
                     r"under gravity; disable_torque_on_disconnect: false keeps it holding its last command$", out,
                     re.MULTILINE), out  # fmt: skip
    summary = json.loads(report.read_text())["summary"]
    assert summary is not None and summary["chunks"] >= 1 and 0 < summary["duration_s"] < 120


def test_holds_not_by_design_above_10_percent_are_called_out_after_the_summary_and_still_exit_0(capsys):
    from robot_io.runner import RunSummary

    fields = {name: 0 for name in RunSummary.__dataclass_fields__}
    counts = dict(ticks=300, chunks=20, watchdog_holds=116, waiting_steps=20, unexpected_holds=96, missed_deadlines=96)
    summary = RunSummary(**{**fields, "mode": "vlash", "rate_hz": 30.0, **counts})
    assert report(SimpleNamespace(summary=summary, stopped=False, left=""), [], StopRequest(), 0.5) == 0
    out, err = capsys.readouterr()
    assert re.search(r"^  of which not by design +96 \(32%\)$", out, re.MULTILINE), out
    assert err == ("vlash run: warning: the watchdog held 96 of 300 ticks (32%, more than 10%) not by design: 96 "
                   "missed deadlines, 0 ticks with the link lost\n")  # fmt: skip
