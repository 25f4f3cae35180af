"""`vlash quantize`: quantize a policy (artifact + manifest) and optionally gate it against fp32 (`--check`)."""

from __future__ import annotations

import argparse
import json
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from vlash.cli.command import Command
from vlash.cli.flags import ConfigFlags
from vlash.cli.policy_args import POLICY_OR_CHECKPOINT, policy_flags, policy_source
from vlash.cli.preflight import (
    check_output_dir,
    check_output_file,
    check_output_folder,
    non_negative_int,
    overwrite_flags,
    positive_int,
)
from vlash.errors import ConfigError
from vlash.output_kinds import OutputKind
from vlash.policies.names.source import PolicyKind, PolicySource
from vlash.policies.quantized.schemes import get_scheme
from vlash.progress import progress
from vlash.quant.gate_thresholds import GateThresholds

HELP = "quantize a policy (torch int8/int4/fp8, ONNX int8, TensorRT), gate vs fp32"
SCHEME_NAMES = (
    "torch-int8",
    "torch-int4",
    "torch-fp8",
    "onnx-int8-dynamic",
    "onnx-int8-static",
    "trt-fp16",
    "trt-bf16",
    "trt-fp8",
    "trt-int8",
)  # = vlash.policies.quantized.schemes.SCHEMES (tests check); listed here so --help imports nothing heavy


@dataclass(frozen=True)
class QuantizeOptions:
    """What to write, and how to check it."""

    scheme: tuple[str, ...] = field(metadata={"repeatable": True, "choices": SCHEME_NAMES})  # a scheme to write
    out: Path  # artifact directory (one scheme) or parent of one per scheme (several)
    group_size: int = field(default=64, metadata={"parse": positive_int})  # torch-int4: inputs per scale group
    # static schemes: sim episodes to calibrate on
    calib_episodes: int = field(default=8, metadata={"parse": positive_int})
    check: bool = False  # gate each variant vs fp32; exit 1 if any fails
    # --check: held-out sim episodes (4 frames each)
    held_out_episodes: int = field(default=4, metadata={"parse": positive_int})
    # --check: sim episodes per task (default 3 if trained, else 0)
    rollout_episodes: int | None = field(default=None, metadata={"parse": non_negative_int})
    threads: int | None = field(default=None, metadata={"parse": positive_int})  # torch / onnxruntime CPU threads
    json: Path | None = None  # also write the --check results here


ACCEPTED = {
    PolicyKind.SHIPPED: "",
    PolicyKind.DIRECTORY: "vlash layout, fp32",
    PolicyKind.PRESET: "with --random-weights",
}
# --check's gate: flags of GateThresholds (vlash.cli.flags)
GATE_FLAGS = ConfigFlags(
    GateThresholds,
    "min_cosine max_abs_error max_success_drop",
    title="the gate of --check",
    description="a variant passes when it stays within these",
)
COMMAND = Command(
    "quantize",
    HELP,
    "Quantize a policy (an artifact with its manifest) and, with --check, gate each variant against fp32.",
    (
        policy_flags("the fp32 policy to quantize", ACCEPTED, checkpoint=True, random_weights=True),
        ConfigFlags(QuantizeOptions, "scheme out", title="output", advanced="group_size calib_episodes threads"),
        overwrite_flags(
            OutputKind.QUANTIZED_POLICY,
            OutputKind.ENGINE_ARTIFACT,
            where="a scheme's directory (torch: the former)",
            title="output",
        ),  # fmt: skip
        ConfigFlags(QuantizeOptions, "check held_out_episodes rollout_episodes json", title="the gate of --check"),
        GATE_FLAGS,
    ),
    exclusive=POLICY_OR_CHECKPOINT,
    required_one_of=POLICY_OR_CHECKPOINT,
)


def quantize_source(args: argparse.Namespace) -> PolicySource:
    """The policy to quantize, and the other flags checked before anything loads (one-line errors)."""
    source = policy_source(args, "quantize", ACCEPTED)
    if source.kind is PolicyKind.DIRECTORY and source.layout != "vlash":
        raise ConfigError(
            f"{source.value} is {source.describe()}: `vlash convert` it to a vlash policy directory first"
        )
    outs = scheme_outputs(args)
    if len(outs) > 1:  # --out holds one directory per scheme: only those are replaced
        check_output_folder(args.out, "--out")
    for scheme, out in outs.items():
        check_output_dir(out, "--out", scheme_output_kind(scheme), args.overwrite)
    check_output_file(args.json, "--json")
    GATE_FLAGS.build(args)  # a bad gate value fails now, not after every scheme was quantized
    return source


def scheme_outputs(args: argparse.Namespace) -> dict[str, Path]:
    """scheme -> the directory it is written to: --out itself for one scheme, --out/SCHEME for several."""
    schemes = list(dict.fromkeys(args.scheme))
    return {scheme: args.out if len(schemes) == 1 else args.out / scheme for scheme in schemes}


def scheme_output_kind(scheme: str) -> OutputKind:
    """torch schemes write a quantized policy directory, the others an engine artifact."""
    return OutputKind.QUANTIZED_POLICY if get_scheme(scheme).engine == "torch" else OutputKind.ENGINE_ARTIFACT


def _fp32_dir(source: PolicySource, tmp: Path) -> Path:
    """The fp32 policy directory to quantize: --policy's, or a preset's random weights written under `tmp`."""
    from vlash.policies.formats.random_policy import write_random_policy  # extra: server

    return write_random_policy(tmp / "fp32", source.value) if source.kind is PolicyKind.PRESET else source.path


def run(args: argparse.Namespace) -> int:
    policy = quantize_source(args)  # before torch is imported: a bad argument is reported at once
    import torch  # extra: server

    from vlash.engines import create_engine  # extra: server
    from vlash.policies.formats.loading import load_policy  # extra: server
    from vlash.quant.api import open_quantized, quantize, record_fidelity  # extra: server
    from vlash.quant.calibration import FrameSpec, policy_tasks  # extra: server
    from vlash.quant.check import check_variant, format_table, is_trained  # extra: server

    if args.threads:
        torch.set_num_threads(args.threads)
    with tempfile.TemporaryDirectory(prefix="vlash-quant-") as tmp:
        source = _fp32_dir(policy, Path(tmp))
        reference_policy = load_policy(source)
        tasks = policy_tasks(reference_policy.metadata)
        calibration = FrameSpec(tasks=tasks, episodes=args.calib_episodes)
        outs = scheme_outputs(args)
        for scheme, out in outs.items():
            quantize(source, out, scheme, group_size=args.group_size, calibration=calibration)
            print(f"vlash quantize: {scheme} -> {out}")
        if not args.check:
            return 0
        thresholds = GATE_FLAGS.build(args)
        rollouts = (
            args.rollout_episodes if args.rollout_episodes is not None else (3 if is_trained(reference_policy) else 0)
        )
        reference = create_engine("torch", model=reference_policy.model)
        held_out = FrameSpec(tasks=tasks, episodes=args.held_out_episodes, held_out=True)
        results, ref_rollout = [], None
        with progress("vlash quantize: checked", len(outs)) as update:
            for scheme, out in outs.items():
                engine, policy, _ = open_quantized(out, threads=args.threads)
                result = check_variant(
                    scheme, reference, engine, reference_policy, thresholds, held_out, rollouts, ref_rollout
                )
                ref_rollout = result.reference_rollout
                record_fidelity(out, {**result.to_dict(), "thresholds": vars(thresholds)})
                results.append(result)
                update(len(results), scheme)
    print(format_table(results))
    for result in results:  # the manifest keeps the verdict: serve / bench refuse these (vlash.policies.quantized.gate)
        if not result.passed:
            print(
                f"vlash quantize: {outs[result.variant]} records its failed gate; vlash serve and vlash bench "
                "refuse it unless given --allow-failed-gate"
            )
    if args.json:
        args.json.write_text(json.dumps([r.to_dict() for r in results], indent=2) + "\n")
    return 0 if all(r.passed for r in results) else 1
