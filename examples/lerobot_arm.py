"""Drive a LeRobot SO-101 arm (or another LeRobot arm) with a policy server, then print the summary.

    # the policy server (random weights of the SO-101's shape stand in for your fine-tune: --checkpoint DIR)
    vlash serve --policy pi05-tiny --random-weights --action-dims 6
    # the arm, its port and cameras from the YAML (the policy's one camera, base_0_rgb, sees the arm's "front")
    python examples/lerobot_arm.py --server tcp://127.0.0.1:5555 --robot-config configs/robots/so101.yaml \\
        --camera base_0_rgb=front
    # or from flags: port, calibration id, the scene camera's OpenCV index
    python examples/lerobot_arm.py --server tcp://127.0.0.1:5555 --port /dev/ttyACM0 --id my_so101 --front-camera 0 \\
        --camera base_0_rgb=front

Across machines, serve with `--bind tcp://0.0.0.0:5555 --insecure` (or CurveZMQ keys: `vlash keys`, docs/PROTOCOL.md)
and give the GPU machine's address to --server.

The robot is built by LeRobot's own config registry and factory (`lerobot:<type>`, as `vlash run --robot` does);
the config comes from a YAML of LeRobot's config fields, from the flags, or both (flags win). Needs LeRobot on
the robot computer: pip install 'vlash[lerobot]'. Same as `vlash run --robot lerobot:so101_follower ...`.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


def robot_fields(args: argparse.Namespace) -> dict:
    """LeRobot config fields: the YAML's, then --port / --id / --front-camera on top."""
    from robot_io.robots.lerobot_factory import load_robot_config

    fields = load_robot_config(args.robot_config) if args.robot_config else {}
    if args.port:
        fields["port"] = args.port
    if args.id:
        fields["id"] = args.id
    if args.front_camera is not None:
        front = dict(type="opencv", index_or_path=args.front_camera, width=640, height=480, fps=30)
        fields["cameras"] = {**(fields.get("cameras") or {}), "front": front}
    return fields


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--server", default="tcp://127.0.0.1:5555", help="policy server endpoint")
    parser.add_argument("--type", default="so101_follower", help="LeRobot robot type (its config registry name)")
    parser.add_argument("--robot-config", type=Path, default=None, help="YAML of LeRobot config fields")
    parser.add_argument("--port", default=None, help="the arm's serial port (overrides the YAML)")
    parser.add_argument("--id", default=None, help="the arm's id: names its calibration file (overrides the YAML)")
    parser.add_argument("--front-camera", type=int, default=None, help="OpenCV index of a 640x480 camera 'front'")
    parser.add_argument("--camera", action="append", default=[], metavar="POLICY=ROBOT", help="camera map entry")
    parser.add_argument(
        "--mode", default="vlash", help="chunk execution mode: sync, naive, vlash, prefix, rtc, faster, ensemble"
    )
    parser.add_argument("--rate-hz", type=float, default=30.0, help="control rate [Hz]")
    parser.add_argument("--duration-s", type=float, default=20.0, help="run length [s]")
    parser.add_argument("--max-step", type=float, default=5.0, help="largest joint change per tick (degrees)")
    parser.add_argument("--prompt", default="", help="task instruction")
    args = parser.parse_args(argv)

    from robot_io.camera_map import parse_camera_map
    from robot_io.client import PolicyClient
    from robot_io.executors import ExecutorConfig
    from robot_io.protocol.errors import RobotIOError
    from robot_io.robots.lerobot_factory import make_lerobot_robot
    from robot_io.run_summary import LABELS
    from robot_io.runner import RunConfig, run_robot

    try:
        robot = make_lerobot_robot(args.type, robot_fields(args))
        executor = ExecutorConfig(mode=args.mode, execution_horizon=10, prompt=args.prompt)
        config = RunConfig(executor, rate_hz=args.rate_hz, duration_s=args.duration_s, max_step=args.max_step,
                           camera_map=parse_camera_map(args.camera))  # fmt: skip
        with PolicyClient(args.server, timeout_s=10.0, client_name=f"examples/lerobot_arm:{args.type}") as client:
            result = run_robot(robot, client, config)
    except (RobotIOError, ValueError) as exc:  # no LeRobot, bad config, camera map or dims that do not fit
        print(f"lerobot_arm: error: {exc}", file=sys.stderr)
        return 2
    for field, label in LABELS.items():  # the rows of `vlash run`'s summary (docs/METHODS.md, "Run summary")
        print(f"{label:>28}: {result.summary.cell(field)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
