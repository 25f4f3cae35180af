"""Build a `PolicyRuntime` from what `vlash serve` is told: a shipped policy, a directory, an exported artifact
or a preset with random weights; warm it up on a synthetic request."""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from robot_io.protocol import Infer
from vlash.devices import DeviceProfile, is_profile_name, load_profile, resolve_device
from vlash.engines import create_engine
from vlash.engines.artifact import POLICY_DIR, ArtifactManifest, is_artifact
from vlash.errors import ConfigError
from vlash.policies.formats.base import CheckpointOptions, LoadedPolicy
from vlash.policies.formats.loading import load_policy
from vlash.policies.formats.random_policy import random_policy
from vlash.policies.names.shipped import shipped_policy_dir
from vlash.policies.pi05.weights import resolve_dtype
from vlash.policies.quantized.gate import RecordedGate, require_gate
from vlash.policies.quantized.manifest import QuantManifest, is_quantized
from vlash.policies.quantized.schemes import precision_label
from vlash.runtime.policy_runtime import PolicyRuntime
from vlash.runtime.request import make_infer
from vlash.sampling.guidance_weight_bounds import DEFAULT_GUIDANCE_WEIGHT


@dataclass
class LoadedRuntime:
    runtime: PolicyRuntime
    model_id: str  # name clients see in Metadata
    precision: str  # dtype name, e.g. "fp32"; quantized: e.g. "int8 (torch-int8) / fp32 activations"
    params: int  # model parameter count
    load_s: float  # seconds to load the weights
    gate: RecordedGate | None = None  # a quantized artifact's recorded fidelity gate (None: not quantized)


def artifact_gate(path: str | Path) -> RecordedGate | None:
    """The fidelity gate recorded in a quantized artifact's manifest: a torch weight-only policy directory's
    quant.json, or an engine artifact's manifest.json["quantization"]. None: not a quantized artifact."""
    path = Path(path)
    if is_quantized(path):
        manifest = QuantManifest.read(path)
        return RecordedGate(manifest.scheme, manifest.fidelity)
    if is_artifact(path):
        return ArtifactManifest.load(path).quant_gate
    return None


def check_gate(path: str | Path, allow_failed_gate: bool = False) -> RecordedGate | None:
    """`artifact_gate`, refused (FailedGateError, with the gate's metrics and thresholds) when it failed and
    `allow_failed_gate` is False; a warning when it was never checked or failed and is allowed. Every command that
    runs an artifact (serve, bench) opens it through this."""
    gate = artifact_gate(path)
    require_gate(gate, str(path), allow_failed_gate)
    return gate


def load_runtime(
    policy: str | None = None,
    checkpoint: str | Path | None = None,
    random_weights: bool = False,
    device: str = "auto",
    dtype: str | None = None,
    engine: str = "torch",
    num_steps: int | None = None,
    schedule: str = "constant",
    options: CheckpointOptions | None = None,
    allow_failed_gate: bool = False,
    threads: int | None = None,
    compile_mode: str | None = None,
    graphs: str | None = None,
    random_dims: dict[str, int] | None = None,
    guidance_weight: float = DEFAULT_GUIDANCE_WEIGHT,
) -> LoadedRuntime:
    """Exactly one of `policy` (shipped name; a preset with `random_weights`) and `checkpoint` (directory: vlash,
    LeRobot or openpi, with `options` for what the latter two do not store). Engines other than torch run an
    exported artifact (`vlash export`): `checkpoint` is its directory. A quantized artifact whose recorded
    fidelity gate failed is refused unless `allow_failed_gate` (`check_gate`). threads: onnxruntime's intra-op
    threads (None: the device profile's); torch's are the process's (torch.set_num_threads)."""
    if (policy is None) == (checkpoint is None):
        raise ConfigError("give exactly one of --policy NAME and --checkpoint DIR")
    options = options or CheckpointOptions()
    if checkpoint is None and options != CheckpointOptions():
        raise ConfigError("checkpoint options (--tokenizer, --model-config, ...) apply to --checkpoint DIR only")
    if engine != "torch":
        if compile_mode or graphs:
            raise ConfigError(f"compile and CUDA graphs apply to the torch engine, not {engine}")
        return _load_artifact(
            checkpoint, engine, device, num_steps, schedule, allow_failed_gate, threads, guidance_weight
        )
    if random_weights and policy is None:
        raise ConfigError("--random-weights needs --policy PRESET (e.g. pi05-tiny), not --checkpoint")
    dev = resolve_device(device)
    precision = dtype or ("bf16" if dev.type == "cuda" else "fp32")
    resolve_dtype(precision)  # CheckpointError naming the choices
    start = time.perf_counter()
    loaded: LoadedPolicy
    gate: RecordedGate | None = None
    if random_weights:
        assert policy is not None
        loaded = random_policy(policy, dtype=precision, device=dev, **(random_dims or {}))
        model_id = f"{policy}-random"
    else:
        path = shipped_policy_dir(policy) if policy is not None else Path(checkpoint)  # type: ignore[arg-type]
        gate = check_gate(path, allow_failed_gate)  # before the weights load
        loaded = load_policy(path, dtype=precision, device=dev, options=options)
        model_id = policy or path.resolve().name
    load_s = time.perf_counter() - start
    built = create_engine(engine, model=loaded.model, compile_mode=compile_mode, graphs=graphs)
    runtime = PolicyRuntime(loaded, built, num_steps=num_steps, schedule=schedule, guidance_weight=guidance_weight)
    params = sum(p.numel() for p in loaded.model.parameters())
    label = precision_label(getattr(loaded.model, "quant_scheme", None), precision)
    return LoadedRuntime(runtime, model_id, label, params, load_s, gate)


def _load_artifact(
    artifact: str | Path | None,
    engine: str,
    device: str,
    num_steps: int | None,
    schedule: str,
    allow_failed_gate: bool,
    threads: int | None,
    guidance_weight: float,
) -> LoadedRuntime:
    if artifact is None or not is_artifact(artifact):
        raise ConfigError(
            f"--engine {engine} serves an exported artifact: `vlash export ... --engine {engine} --out DIR`, "
            f"then `vlash serve --checkpoint DIR --engine {engine}` (got {artifact or 'a --policy name'})"
        )
    manifest = ArtifactManifest.load(artifact)
    gate = check_gate(artifact, allow_failed_gate)
    profile: DeviceProfile | None = load_profile(device) if is_profile_name(device) else None
    start = time.perf_counter()
    loaded = load_policy(Path(artifact) / POLICY_DIR)  # processor + config (the graphs hold the weights)
    built = create_engine(engine, artifact=artifact, profile=profile, threads=threads)
    load_s = time.perf_counter() - start
    runtime = PolicyRuntime(loaded, built, num_steps=num_steps, schedule=schedule, guidance_weight=guidance_weight)
    params = sum(p.numel() for p in loaded.model.parameters())
    return LoadedRuntime(runtime, manifest.policy, manifest.precision_label, params, load_s, gate)


def example_request(runtime: PolicyRuntime, seed: int = 0, schedule: str | None = None) -> Infer:
    """A valid request of the policy's shapes (warm-up, benchmarks)."""
    size = runtime.config.vision.image_size
    rng = np.random.default_rng(seed)
    images = {name: rng.integers(0, 256, (size, size, 3), dtype=np.uint8) for name in runtime.config.camera_names}
    state = np.zeros(runtime.state_dims, np.float32)
    return make_infer(images, state, "go to the goal", seed=seed, schedule=schedule)


def warm_up(runtime: PolicyRuntime, runs: int = 2, batch_sizes: Sequence[int] = (1,)) -> float:
    """Run `runs` full requests (both schedules) at each batch size; returns the seconds it took."""
    start = time.perf_counter()
    for size in batch_sizes:
        for i in range(runs):
            schedule = ("constant", "horizon-aware")[i % 2]
            request = example_request(runtime, seed=i, schedule=schedule)
            if size == 1:
                runtime.run(request)
            else:
                runtime.run_batch([request] * size)
    return time.perf_counter() - start
