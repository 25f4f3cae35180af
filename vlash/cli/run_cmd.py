"""`vlash run --server tcp://HOST:5555 --robot sim:reach --mode vlash --rate-hz 30 --duration-s 20`: drive a robot
with a remote policy. Robot side only: robot_io and the standard library, never torch or rich (it runs on the
robot computer, where only numpy, pyzmq, msgspec and pyyaml are installed).

    vlash run --server tcp://gpu-box:5555 --robot lerobot:so101_follower --robot-config configs/robots/so101.yaml \\
        --camera base_0_rgb=front --camera left_wrist_0_rgb=wrist --camera right_wrist_0_rgb=none

Every argument is checked before anything connects (one line, rc 2). The exit status says whether the robot was
driven: rc 1, with the reason on stderr after the summary, when no chunk ever ran or the watchdog held more than
--max-hold-share of the ticks not by design; more than 10% is called out on stderr with rc 0. Ctrl-C (SIGINT) or
SIGTERM stops the run after its current tick: the hold is commanded, the summary printed and --json / --trace
written, then rc 130 (143 for SIGTERM); a second one stops at once. What the robot is left doing is said as it is
after the disconnect: a LeRobot arm with disable_torque_on_disconnect: true has its torque off. Memory stays
bounded however long the run; --trace streams every tick and chunk to a file; --display shows the run in a rerun
viewer and --record FILE.rrd writes the same for replay (robot_io.rerun_trace); --record-dataset DIR records the
run as a LeRobot dataset (robot_io.dataset).
"""

from __future__ import annotations

import argparse
import math
import sys
from contextlib import ExitStack

from robot_io.camera_map import parse_camera_map
from robot_io.client import PolicyClient
from robot_io.dataset import DatasetError, check_dataset, open_dataset
from robot_io.executors import ExecutorConfig
from robot_io.host_load import HostLoad
from robot_io.protocol import Metadata
from robot_io.protocol.curve import CurveClientKeys
from robot_io.protocol.endpoints import check_endpoint
from robot_io.protocol.errors import EndpointError, RobotIOError
from robot_io.rerun_trace import RerunError, RerunRecording, RerunTrace
from robot_io.robots import Robot, RobotConfigError, make_robot
from robot_io.run_trace import JsonLinesTrace, JsonReport
from robot_io.runner import RunConfig, run_robot
from robot_io.server_wait import ServerNotAnswering, wait_for_server
from robot_io.stop_signals import StopRequest, handle_stop_signals
from vlash.cli.command import Command
from vlash.cli.mode_guide import help_table, mode_warning
from vlash.cli.run_options import EXECUTOR_FLAGS, GROUPS, RENAMED, ROBOT_SPECS, RUN_FLAGS
from vlash.cli.run_report import CONTROL_THREADS, PROGRESS_EVERY_S, StatusPrinter, report, status_line, summary_text
from vlash.cli.sim_args import load_sim_arguments
from vlash.errors import ConfigError
from vlash.sim.robot import SimRobot
from vlash.sim.tasks import TASK_TYPES

DEFAULT_HORIZON = ExecutorConfig.execution_horizon  # s unless given, when the policy's chunk is long enough
RECENT_CHUNKS = 20  # chunk records the executor keeps in memory; --json / --trace get every one as it is final
DESCRIPTION = """Drive a robot (or the simulator) with chunks from a vlash policy server.

At the start it waits up to --server-wait-s (120 s: a server still loading its policy) for the server's first
reply, with a line on stderr every 5 s; the robot is connected only once the server answered, so nothing is sent
to it before. No reply by then: one line, exit status 2.

Ctrl-C (or SIGTERM) ends the run after its current tick: the hold is commanded, the summary printed with what the
robot was left doing once disconnected (a LeRobot arm whose config says disable_torque_on_disconnect: true has its
torque off and may fall) and --json / --trace written, then the exit status is 130 (143); a second Ctrl-C stops at
once. A LeRobot arm that asks to be calibrated when no terminal can answer (systemd, nohup, < /dev/null) is refused
in one line naming LeRobot's lerobot-calibrate command. The summary's rows are defined in docs/METHODS.md, "Run
summary"."""
# under the "advanced" heading, beside --link-timeout-s and --on-link-loss
LINK_LOSS = """When the server stops answering: the client gives up on a request after --timeout, the executor
re-sends it after 2 s and keeps asking without blocking the control loop; the link counts as lost after --link-timeout-s
without any reply while one is owed. With --on-link-loss finish-chunk (the default) the robot keeps executing
the chunk it is running until it runs out (up to a whole chunk, e.g. 49 ticks of a 50-action chunk) and then
the watchdog holds: right when a healthy server is only slow. With --on-link-loss hold the chunk stops at the
tick the link counts as lost and the watchdog holds from then on: the robot moves without a server for at
most --link-timeout-s plus one period after the first unanswered request; when replies return, it starts afresh
with a first (sync) chunk. Each loss and return is printed with the time of day."""

COMMAND = Command("run", "run a robot (or the simulator) under a remote policy server", DESCRIPTION, GROUPS, RENAMED,
                  advanced_note=f"the rest: their defaults suit a first run. {LINK_LOSS}\n\nExecution modes (--mode): "
                  + help_table())  # fmt: skip


def check_args(args: argparse.Namespace) -> None:
    """Every argument, before anything connects: ConfigError naming the flag and the value (the run's settings
    are checked by RunConfig and ExecutorConfig, built here as they will run but for the horizon)."""
    try:
        check_endpoint(args.server)
    except EndpointError as exc:
        raise ConfigError(f"--server {exc}") from None
    check_robot_spec(args.robot)
    if not (math.isfinite(args.timeout) and args.timeout > 0):
        raise ConfigError(f"--timeout must be a positive number, got {args.timeout}")
    build_config(args, execution_horizon(args))  # checked again with the horizon once the policy's chunk is known
    if not 0 <= args.max_hold_share <= 1:
        raise ConfigError(f"--max-hold-share must be between 0 and 1, got {args.max_hold_share}")
    if (args.server_key is None) != (args.client_key is None):
        raise ConfigError("CurveZMQ needs both --server-key (server public) and --client-key (client secret)")
    files = {"--server-key": args.server_key, "--client-key": args.client_key, "--robot-config": args.robot_config}
    for flag, path in files.items():
        if path is not None and not path.is_file():
            raise ConfigError(f"{flag} {str(path)!r}: no such file")
    for flag, path in {"--json": args.json, "--trace": args.trace, "--record": args.record}.items():
        if path is not None and path.is_dir():
            raise ConfigError(f"{flag} {str(path)!r} is a directory; give a file name")
    if args.record_dataset is not None:
        if RUN_FLAGS.value(args, "rate_hz") % 1:
            raise ConfigError("--record-dataset needs a whole --rate-hz (a LeRobot dataset's fps is an integer)")
        try:
            check_dataset(args.record_dataset)
        except DatasetError as exc:
            raise ConfigError(f"--record-dataset: {exc}") from None


def check_robot_spec(spec: str) -> None:
    """A --robot value of a known kind (sim:<task>, lerobot:<type>, mock), a simulated task by its name; else one
    line listing every choice. The type of a lerobot:<type> is LeRobot's to check (make_robot)."""
    kind, _, rest = spec.partition(":")
    if kind == "sim" and rest.partition(":")[0] and rest.partition(":")[0] not in TASK_TYPES:
        raise ConfigError(f"--robot {spec!r}: unknown simulated task {rest.partition(':')[0]!r}; choose one of "
                          f"{', '.join(TASK_TYPES)}")  # fmt: skip
    if kind not in ("sim", "lerobot", "mock") or (kind == "mock" and rest):
        raise ConfigError(f"unknown robot spec {spec!r}; --robot takes {ROBOT_SPECS}")


def execution_horizon(args: argparse.Namespace, chunk_length: int | None = None) -> int:
    """s: --execution-horizon as given; else ExecutorConfig's, shortened by `default_horizon` once the policy's
    `chunk_length` is known."""
    given = EXECUTOR_FLAGS.given(args).get("execution_horizon")
    if given is not None or chunk_length is None:
        return DEFAULT_HORIZON if given is None else given
    return default_horizon(chunk_length, EXECUTOR_FLAGS.value(args, "action_stride"))


def default_horizon(chunk_length: int, action_stride: int) -> int:
    """s when --execution-horizon is not given: ExecutorConfig's, or half the policy's chunk (in control steps) when
    that is shorter."""
    return max(1, min(DEFAULT_HORIZON, chunk_length // action_stride // 2))


def build_config(args: argparse.Namespace, horizon: int, action_kind: str = "absolute") -> RunConfig:
    """The run the flags ask for, at execution horizon `horizon`, for a robot whose actions are `action_kind`
    (a simulated arm says which: velocity actions roll the state forward as velocities): one-line ConfigError naming
    the flag."""
    try:
        camera_map = parse_camera_map(args.camera)
    except ValueError as exc:
        raise ConfigError(str(exc)) from None
    executor = EXECUTOR_FLAGS.build(args, execution_horizon=horizon, record_window=RECENT_CHUNKS,
                                    action_kind=action_kind)  # fmt: skip
    # nothing per tick is kept in memory (trace_ticks 0): --trace streams it to a file
    return RUN_FLAGS.build(args, executor=executor, camera_map=camera_map, trace_ticks=0)


def _curve(args: argparse.Namespace) -> CurveClientKeys | None:
    if (args.server_key is None) != (args.client_key is None):
        raise ConfigError("CurveZMQ needs both --server-key (server public) and --client-key (client secret)")
    if args.server_key is None:
        return None
    try:
        return CurveClientKeys.from_files(args.client_key, args.server_key)
    except (OSError, ValueError) as exc:  # not a key file, or the public one where the secret one is needed
        raise ConfigError(f"CurveZMQ keys: {exc}") from None


def _open_traces(args: argparse.Namespace, stack: ExitStack) -> list:
    traces = []
    for flag, path, kind in (("--json", args.json, JsonReport), ("--trace", args.trace, JsonLinesTrace)):
        if path is not None:
            try:
                traces.append(stack.enter_context(kind(path)))
            except OSError as exc:
                raise ConfigError(f"{flag} {str(path)!r}: {exc.strerror or exc}") from None
    if args.display or args.record is not None:
        try:
            recording = stack.enter_context(RerunRecording(f"vlash run {args.robot}", args.display, args.record))
        except (RerunError, OSError) as exc:  # no rerun, no viewer, a file that cannot be opened
            raise ConfigError(str(exc)) from None
        traces.append(RerunTrace(recording))
    return traces


def _open_dataset(args: argparse.Namespace, robot: Robot, config: RunConfig, stack: ExitStack) -> list:
    """--record-dataset's recorder for this robot, closed (the dataset committed) when the run is over."""
    if args.record_dataset is None:
        return []
    kind, _, rest = args.robot.partition(":")
    robot_type = rest if kind == "lerobot" else f"vlash_{kind}_{rest.partition(':')[0]}".rstrip("_")
    run = dict(robot=args.robot, server=args.server, mode=config.executor.mode, rate_hz=config.rate_hz)
    try:
        recorder = open_dataset(args.record_dataset, robot, round(config.rate_hz), robot_type,
                                config.executor.prompt, run)  # fmt: skip
    except (DatasetError, OSError) as exc:  # a dataset of another shape to append to, a folder we cannot write
        raise ConfigError(f"--record-dataset: {exc}") from None
    return [stack.enter_context(recorder)]


def _robot(args: argparse.Namespace, metadata: Metadata | None = None) -> Robot:
    """The robot --robot names: the simulator's arm (sim:TASK, from vlash.sim), or one robot_io builds."""
    try:
        simulated = args.sim_config is not None or bool(args.sim)
        if args.robot.partition(":")[0] == "sim":
            if args.robot_config is not None:
                raise RobotConfigError(f"a robot config file applies to lerobot:<type> robots, not {args.robot!r}")
            return SimRobot.from_spec(args.robot, settings=load_sim_arguments(args) if simulated else None)
        if simulated:
            raise RobotConfigError(f"--sim-config / --sim apply to sim:<task> robots, not {args.robot!r}")
        return make_robot(args.robot, args.robot_config, metadata)
    except (RobotIOError, ValueError) as exc:  # unknown spec or type, bad config file, LeRobot not installed
        raise ConfigError(str(exc)) from None


def _wait_for_server(args: argparse.Namespace, client: PolicyClient, stop: StopRequest) -> Metadata | None:
    """The server's METADATA, waiting up to --server-wait-s for one that is still starting (a progress line on stderr
    every few seconds; the robot is not connected yet, so nothing is sent to it); None when a stop signal came
    first. No server: one line naming the flag."""
    flag, wait_s = RUN_FLAGS.flag("server_wait_s"), RUN_FLAGS.value(args, "server_wait_s")

    def progress(line: str) -> None:  # plain lines, terminal or not
        print(f"vlash run: {line} of {wait_s:g} ({flag})", file=sys.stderr, flush=True)

    try:
        return wait_for_server(client, wait_s, progress, stop.event, PROGRESS_EVERY_S, f"; {flag} sets the wait")
    except ServerNotAnswering as exc:
        raise ConfigError(str(exc)) from None
    except RobotIOError as exc:  # protocol mismatch, a server that refuses this client
        raise ConfigError(f"{type(exc).__name__}: {exc}") from None


def run(args: argparse.Namespace) -> int:
    check_args(args)
    curve = _curve(args)
    robot = None if args.robot == "mock" else _robot(args)  # the mock arm: once the server said the policy's shape
    stop = StopRequest()
    try:
        with ExitStack() as stack:
            traces = _open_traces(args, stack)
            client = stack.enter_context(PolicyClient(args.server, args.timeout, f"vlash-run:{args.robot}", curve))
            stack.enter_context(handle_stop_signals(stop))  # the first signal ends the loop; a second one raises
            metadata = _wait_for_server(args, client, stop)
            if metadata is None:  # a stop signal while the server was starting: the robot was never connected
                print(f"vlash run: stopped by {stop.name} while waiting for the server; the robot was not connected "
                      "and was sent nothing", file=sys.stderr)  # fmt: skip
                return stop.exit_code or 130
            warning = mode_warning(args.mode, metadata.trained_with, metadata.model_id)
            if warning:
                print(f"vlash run: warning: {warning}", file=sys.stderr, flush=True)
            robot = robot or _robot(args, metadata)
            for trace in traces:
                if isinstance(trace, RerunTrace):  # its series are named after the robot's entries
                    trace.names = (getattr(robot, "state_names", ()), getattr(robot, "action_names", ()))
            kind = getattr(robot, "action_kind", "absolute")  # SimRobot's: its interface's
            config = build_config(args, execution_horizon(args, metadata.chunk_length), kind)
            traces += _open_dataset(args, robot, config, stack)
            printer = StatusPrinter()
            host = HostLoad.now(1, CONTROL_THREADS)  # before the run: the other processes' load, not the run's own
            try:
                result = run_robot(robot, client, config, status=printer, traces=traces, stop=stop.event,
                                   metadata=metadata)  # fmt: skip
            except RobotIOError as exc:  # no server, protocol mismatch, robot/policy mismatch, camera trouble at setup
                raise ConfigError(f"{type(exc).__name__}: {exc}") from None
            finally:
                printer.close()
    except KeyboardInterrupt:  # a second signal (or Ctrl-C before the handlers): robot disconnected, files closed
        after = f"a second signal after {stop.name}" if stop.signum is not None else "Ctrl-C"
        left = getattr(robot, "after_disconnect", None)  # e.g. torque off: what disconnecting left it doing
        print(f"vlash run: stopped at once by {after}: no hold commanded, no summary"
              + (f"; the robot {left}" if left else ""), file=sys.stderr)  # fmt: skip
        return stop.exit_code or 130
    return report(result, traces, stop, args.max_hold_share, host)


# what `vlash demo` and the tests take from here: the status line and the summary are run_report's
__all__ = ["COMMAND", "StatusPrinter", "check_args", "report", "run", "status_line", "summary_text"]
