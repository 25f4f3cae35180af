"""Drive the simulated arm with a policy server for a few seconds in vlash mode, then print the summary.

vlash serve --policy pi05-tiny --random-weights --bind tcp://127.0.0.1:5555   # in another shell
python examples/run_client.py
"""

from robot_io.client import PolicyClient
from robot_io.executors import ExecutorConfig
from robot_io.robots import SimRobot
from robot_io.runner import RunConfig, run_robot

with PolicyClient("tcp://127.0.0.1:5555") as client:
    config = RunConfig(ExecutorConfig(mode="vlash", execution_horizon=10), rate_hz=30.0, duration_s=5.0)
    result = run_robot(SimRobot("reach"), client, config)
for key, value in result.summary.as_dict().items():
    print(f"{key:>20}: {value}")
