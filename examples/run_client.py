"""Drive the simulated arm with a policy server for a few seconds (vlash mode by default), then print the summary.

    vlash serve --policy pi05-tiny --random-weights --bind tcp://127.0.0.1:5555   # in another shell
    python examples/run_client.py --server tcp://127.0.0.1:5555 --mode vlash --duration-s 5

The simulated arm has one camera ("base_0_rgb"). It feeds the policy's camera of the same name, else the policy's
first camera; the policy's other cameras are left out (masked). --camera POLICY=ROBOT overrides that.
"""

from __future__ import annotations

import argparse
import sys

from robot_io.executors import EXECUTION_MODES


def default_camera_map(policy_cameras: list[str], robot_camera: str) -> dict[str, str | None]:
    """The robot's one camera feeds the policy camera of its name, else the first; the others are masked."""
    fed = robot_camera if robot_camera in policy_cameras else policy_cameras[0] if policy_cameras else None
    return {name: (robot_camera if name == fed else None) for name in policy_cameras}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--server", default="tcp://127.0.0.1:5555", help="policy server endpoint")
    parser.add_argument("--mode", default="vlash", choices=EXECUTION_MODES, help="chunk execution mode")
    parser.add_argument("--duration-s", type=float, default=5.0, help="run length [s]")
    parser.add_argument("--robot", default="sim:reach", help="sim:<task>[:<seed>] (reach, track, whack, intercept)")
    parser.add_argument("--camera", action="append", default=[], metavar="POLICY=ROBOT", help="camera map entry")
    args = parser.parse_args(argv)

    # imported here: --help works without the simulator's dependencies (gymnasium, OpenCV)
    from robot_io.camera_map import parse_camera_map
    from robot_io.client import PolicyClient
    from robot_io.executors import ExecutorConfig
    from robot_io.robots.base import robot_cameras
    from robot_io.run_summary import LABELS
    from robot_io.runner import RunConfig, run_robot
    from vlash.sim.robot import SimRobot

    robot = SimRobot.from_spec(args.robot)  # the simulator's arm, a Robot like any other
    with PolicyClient(args.server, timeout_s=10.0, client_name="examples/run_client") as client:
        policy_cameras = [c.name for c in client.connect().cameras]
        cameras = parse_camera_map(args.camera) or default_camera_map(policy_cameras, robot_cameras(robot)[0])
        print(f"camera map (policy <- robot, None: masked): {cameras}")
        executor = ExecutorConfig(mode=args.mode, execution_horizon=10)
        config = RunConfig(executor, rate_hz=30.0, duration_s=args.duration_s, camera_map=cameras)
        result = run_robot(robot, client, config)
    for field, label in LABELS.items():  # the rows of `vlash run`'s summary (docs/METHODS.md, "Run summary")
        print(f"{label:>28}: {result.summary.cell(field)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
