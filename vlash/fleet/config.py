"""`FleetConfig`: what a vlash fleet on Ray Serve runs. One object is the `args:` mapping of a `serve run` config
(configs/ray/*.yaml, read by `vlash.fleet.app.build_app`) and what `vlash serve --ray` builds from its flags.
No Ray and no torch here: a bad value fails before Ray starts anything, and `vlash serve` generates its fleet flags
from these fields before torch is imported."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from vlash.dataclass_io import dataclass_from_mapping
from vlash.errors import ConfigError
from vlash.policies.pi05.config import Pi05Config, load_preset
from vlash.sampling import Schedule
from vlash.server.openpi_mapping import PROFILES, ObservationMap, load_map
from vlash.thread_waits import server_wait_env

if TYPE_CHECKING:
    from vlash.policies.formats.base import CheckpointOptions
    from vlash.runtime.loading import LoadedRuntime


@dataclass
class FleetConfig:
    """A fleet: the policy every model replica loads (the arguments of `vlash serve`), the replicas, the ingress."""

    # --- the policy (load_runtime's arguments); paths must exist on every node that runs a model replica
    policy: str | None = None  # a shipped policy name, or a preset with random_weights (e.g. pi05-tiny)
    checkpoint: str | None = None  # a policy directory (vlash, LeRobot, openpi) or an exported artifact
    random_weights: bool = False  # `policy` is a preset: random weights (tests, load checks)
    # cpu, cuda, or auto: cuda when num_gpus > 0, else cpu (Ray picks each replica's GPU, so never cuda:N)
    device: str = "auto"
    dtype: str | None = None  # fp32, bf16, fp16; None: bf16 on cuda, fp32 on cpu
    engine: str = "torch"  # torch, or the engine of an exported artifact
    compile_mode: str | None = None  # torch engine: torch.compile mode (default, max-autotune, ...); None: eager
    graphs: str | None = None  # torch engine on a GPU: CUDA graphs per "chunk" or per "step"; None: off
    steps: int | None = None  # denoise steps; None: the policy's
    schedule: str = "constant"  # default flow schedule: constant or horizon-aware
    # LeRobot / openpi directories: {tokenizer, model_config (preset or YAML), asset_id, state_in_prompt,
    # relative_mask [bool per action dim]}, as `vlash serve --tokenizer ...`
    checkpoint_options: CheckpointOptions | dict | None = None
    allow_failed_gate: bool = False  # serve a quantized artifact whose fidelity gate failed
    warm_up_runs: int = 2  # full requests each replica runs before it takes traffic
    # --- the model replicas
    num_replicas: int = 1  # model replicas, a fixed count (ignored when autoscaling is set)
    autoscaling: dict[str, Any] | None = None  # Ray Serve's autoscaling_config: min_replicas, max_replicas, ...
    num_cpus: float = 1.0  # CPUs Ray reserves per replica
    num_gpus: float = 0.0  # GPUs per model replica: 1 for one replica per GPU
    # requests @serve.batch hands to PolicyRuntime.run_batch at once (serve.batch's max_batch_size; capped by the
    # runtime's own max_batch where it has one), and its longest wait for more (batch_wait_timeout_s), as the
    # policy server's max_batch and batch_wait_ms
    max_batch: int = 8
    batch_wait_ms: float = 5.0
    max_ongoing_requests: int | None = None  # requests a replica accepts at once; None: 2 x max_batch
    unhealthy_after: int = 3  # batches in a row that failed in the runtime (no success between): health fails
    # --- the openpi ingress
    ingress_replicas: int = 1  # openpi ingress replicas (each holds its robots' websockets)
    # CPUs Ray reserves per ingress replica: it decodes frames and waits on the model, and with none reserved it
    # never waits for CPUs the model replicas hold (as Serve's own HTTP proxy)
    ingress_num_cpus: float = 0.0
    openpi_profile: str = "auto"  # observation map: auto, droid, libero, aloha
    openpi_map_file: str | None = None  # YAML observation map (configs/openpi/), read when the app is built
    default_prompt: str | None = None  # instruction for observations without one
    infer_timeout_s: float = 30.0  # longest wait for one chunk, retries on a dead replica included
    observation_map: ObservationMap | None = field(default=None, init=False, repr=False)  # loaded map

    def __post_init__(self) -> None:
        if (self.policy is None) == (self.checkpoint is None):
            raise ConfigError(f"give exactly one of policy and checkpoint, got {self.policy!r} / {self.checkpoint!r}")
        if self.checkpoint is not None and Path(self.checkpoint).expanduser().exists():
            self.checkpoint = str(Path(self.checkpoint).expanduser().resolve())  # replicas run in other folders
        try:
            self.schedule = Schedule(self.schedule).value
        except ValueError:
            raise ConfigError(f"schedule must be one of {[s.value for s in Schedule]}, got {self.schedule!r}") from None
        _check_number(self, "num_gpus", 0.0)
        self.device = _replica_device(self.device, self.num_gpus)
        if self.graphs is not None and self.device == "cpu":
            raise ConfigError(f"graphs ({self.graphs!r}) are CUDA graphs: they need device cuda, not cpu")
        _check_int(self, "num_replicas", 1)
        _check_int(self, "max_batch", 1)
        _check_int(self, "unhealthy_after", 1)
        _check_int(self, "ingress_replicas", 1)
        _check_int(self, "warm_up_runs", 0)
        if self.steps is not None:
            _check_int(self, "steps", 1)
        if self.max_ongoing_requests is not None:
            _check_int(self, "max_ongoing_requests", 1)
        for name in ("num_cpus", "num_gpus", "ingress_num_cpus", "batch_wait_ms"):
            _check_number(self, name, 0.0)
        _check_number(self, "infer_timeout_s", 1e-3)
        if self.autoscaling is not None and not isinstance(self.autoscaling, dict):
            raise ConfigError(
                f"autoscaling must be a mapping (Ray Serve's autoscaling_config), got {self.autoscaling!r}"
            )
        if isinstance(self.checkpoint_options, dict):
            self.checkpoint_options = _checkpoint_options(self.checkpoint_options)
        if self.openpi_profile not in PROFILES:
            raise ConfigError(f"openpi_profile must be one of {list(PROFILES)}, got {self.openpi_profile!r}")
        if self.openpi_map_file is not None:
            if self.openpi_profile != "auto":
                raise ConfigError(f"give openpi_map_file or openpi_profile, not both (got {self.openpi_profile!r})")
            self.observation_map = load_map(self.openpi_map_file)
        else:
            self.observation_map = PROFILES[self.openpi_profile]

    @classmethod
    def from_mapping(cls, args: Any, source: str = "fleet args") -> FleetConfig:
        """From `serve run`'s `args:` mapping; ConfigError naming unknown or bad keys."""
        if isinstance(args, dict) and "observation_map" in args:
            raise ConfigError(f"{source}: give openpi_map_file (a YAML file) or openpi_profile, not observation_map")
        return dataclass_from_mapping(cls, args, source, "fleet", ConfigError)

    @property
    def replica_actor_options(self) -> dict[str, Any]:
        """The model replicas' ray_actor_options: their resources, and idle OpenMP workers that sleep (Ray merges
        these env_vars with an application's own runtime_env)."""
        return {
            "num_cpus": self.num_cpus,
            "num_gpus": self.num_gpus,
            "runtime_env": {"env_vars": server_wait_env()},
        }

    @property
    def ongoing_requests(self) -> int:
        return self.max_ongoing_requests or 2 * self.max_batch

    def load(self) -> LoadedRuntime:
        """The runtime this config names (on a replica: the weights load here)."""
        from vlash.runtime.loading import load_runtime  # extra: server

        return load_runtime(
            self.policy,
            self.checkpoint,
            self.random_weights,
            self.device,
            self.dtype,
            self.engine,
            self.steps,
            self.schedule,
            self.checkpoint_options,
            allow_failed_gate=self.allow_failed_gate,
            compile_mode=self.compile_mode,
            graphs=self.graphs,
        )


def _checkpoint_options(doc: dict) -> CheckpointOptions:
    """`checkpoint_options:` of a YAML file (what the --tokenizer, --model-config, ... flags give)."""
    from vlash.policies.formats.base import CheckpointOptions  # extra: server

    options = dataclass_from_mapping(CheckpointOptions, dict(doc), "checkpoint_options", "options", ConfigError)
    model_config = options.model_config
    if model_config is not None and not isinstance(model_config, Pi05Config):
        model_config = load_preset(model_config)
    mask = options.relative_mask
    if mask is not None and (not isinstance(mask, list | tuple) or not all(isinstance(m, bool) for m in mask)):
        raise ConfigError(f"checkpoint_options.relative_mask must be a list of booleans, got {mask!r}")
    tokenizer = None if options.tokenizer is None else Path(options.tokenizer)
    return CheckpointOptions(
        tokenizer, model_config, options.asset_id, options.state_in_prompt, None if mask is None else tuple(mask)
    )


def _replica_device(device: str, num_gpus: float) -> str:
    """The device a replica runs on: the GPU Ray reserved for it (num_gpus > 0) or the CPU."""
    if not isinstance(device, str):
        raise ConfigError(f"device must be a string, got {device!r}")
    if device == "auto":
        return "cuda" if num_gpus > 0 else "cpu"
    if num_gpus > 0 and (device == "cpu" or device.startswith("cuda:")):
        raise ConfigError(f"device {device!r} with num_gpus {num_gpus}: Ray gives each replica its GPU; use cuda")
    if num_gpus == 0 and device.startswith("cuda"):
        raise ConfigError(f"device {device!r} needs a GPU reserved per replica: set num_gpus (1: one per replica)")
    return device


def _check_int(config: FleetConfig, name: str, low: int) -> None:
    value = getattr(config, name)
    if type(value) is not int or value < low:
        raise ConfigError(f"{name} must be an int >= {low}, got {value!r}")


def _check_number(config: FleetConfig, name: str, low: float) -> None:
    value = getattr(config, name)
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) or value < low:
        raise ConfigError(f"{name} must be a number >= {low}, got {value!r}")
