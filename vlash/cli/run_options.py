"""`vlash run`'s command line: its own options (RunOptions) and the flags of the configs it builds (ExecutorConfig,
RunConfig), grouped as `vlash run --help` shows them."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from robot_io.executors import ExecutorConfig
from robot_io.protocol.endpoints import DEFAULT_ENDPOINT
from robot_io.robots import SPECS
from robot_io.run_setup import RunConfig
from robot_io.run_summary import MAX_HOLD_SHARE
from vlash.cli.flags import ConfigFlags
from vlash.cli.sim_args import sim_flags
from vlash.sim.tasks import TASK_TYPES

ROBOT_SPECS = f"'sim:<task>[:<seed>]' (task: {', '.join(TASK_TYPES)}), {SPECS}"  # every --robot choice


@dataclass(frozen=True)
class RunOptions:
    """What `vlash run` connects, and what it writes."""

    server: str  # policy server endpoint: tcp://HOST:PORT or ipc:///PATH
    # robot spec: sim:<task>[:<seed>], lerobot:<type> (lerobot:so101_follower), or mock (an arm shaped like the
    # served policy, to try a server without hardware)
    robot: str = "sim:reach"
    robot_config: Path | None = None  # lerobot:<type>: YAML of LeRobot's config fields (port, id, cameras)
    # feed policy camera POLICY from robot camera ROBOT (POLICY=none leaves it out, masked); needed whenever the
    # names differ
    camera: tuple[str, ...] = field(default=(), metadata={"repeatable": True, "metavar": "POLICY=ROBOT"})
    # write the summary and every chunk record here (one JSON document, the records written as the run goes)
    json: Path | None = None
    # write every tick and every chunk record here as the run goes (JSON Lines: kind tick / chunk, then the summary)
    trace: Path | None = None
    # show the run live in a rerun viewer: camera frames, commanded vs measured joints, chunks, latency, holds (the
    # [viz] extra)
    display: bool = False
    # write what --display shows to a rerun recording (`rerun FILE.rrd` replays it; the [viz] extra)
    record: Path | None = field(default=None, metadata={"metavar": "FILE.rrd"})
    # record the run as a LeRobot dataset (format v3.0, for lerobot-train): each tick's observation, the action
    # sent, the chunk; a new DIR, or one recorded before, appended to (the [dataset] extra)
    record_dataset: Path | None = field(default=None, metadata={"metavar": "DIR"})
    # reply timeout [s]: the client drops the connection and reconnects after this long without a reply (at the
    # start, while it waits for the server, it sends HELLO again this often)
    timeout: float = field(default=5.0, metadata={"metavar": "S"})
    # exit with status 1 when the watchdog held more than this share of the ticks not by design (the waits for an
    # episode's first chunk and sync's are by design), or when no chunk ran
    max_hold_share: float = field(default=MAX_HOLD_SHARE, metadata={"metavar": "F"})
    server_key: Path | None = None  # CurveZMQ: the server's public key file
    client_key: Path | None = None  # CurveZMQ: this client's secret key file


ROBOT_FLAGS = ConfigFlags(
    RunOptions,
    "server robot robot_config camera",
    title="robot and server",
    notes={
        "server": f"(e.g. {DEFAULT_ENDPOINT}, where vlash serve binds by default)",
        "robot": f"(task: {', '.join(TASK_TYPES)})",
    },  # fmt: skip
    advanced="timeout server_key client_key max_hold_share",
)
OUTPUT_FLAGS = ConfigFlags(RunOptions, "json trace display record record_dataset", title="outputs")
# The settings of the run: flags of ExecutorConfig and RunConfig (vlash.cli.flags)
EXECUTOR_FLAGS = ConfigFlags(
    ExecutorConfig,
    "mode execution_horizon action_stride initial_delay adapt_delay prompt",
    title="execution",
    notes={
        "mode": "(default: {default}; what each needs and did in the evaluation: the table under 'advanced options')",
        "execution_horizon": "(default: {default}, or half the policy's chunk when that is shorter)",
        "prompt": "(default: the simulated task's)",
        "link_timeout_s": "(keep it above the server's slowest reply)",
    },
    advanced="link_timeout_s on_link_loss",
)
RUN_FLAGS = ConfigFlags(
    RunConfig, "rate_hz duration_s", title="execution", advanced=("on_missing", "max_step", "server_wait_s")
)
SIM_FLAGS = sim_flags("of a sim:<task> robot (the ones the policy was trained in: its state's extras too)", True)
GROUPS = (ROBOT_FLAGS, EXECUTOR_FLAGS, RUN_FLAGS, OUTPUT_FLAGS, SIM_FLAGS)
RENAMED = {
    "--fps": "--rate-hz",
    "--duration": "--duration-s",
    "--horizon": "--execution-horizon",
    "--quantize": "--action-stride",
    "--quantization": "--action-stride",
    "--delay": "--initial-delay",
    "--fixed-delay": "--no-adapt-delay",
    "--link-timeout": "--link-timeout-s",
}
