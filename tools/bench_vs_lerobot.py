"""vlash beside LeRobot 0.6.1's own pi0.5 (`PI05Policy.predict_action_chunk`) on identical weights, on the CPU.

    .venv-lerobot/bin/python tools/bench_vs_lerobot.py --depth 2 --vision-depth 3 --rounds 20 --threads 2 --bf16 \
        --json vs_lerobot.json
    .venv-lerobot/bin/python tools/bench_vs_lerobot.py --smoke      # tiny sizes, 1 round: .ci/lerobot_lane.sh

Needs LeRobot (Python 3.12, `pip install "lerobot[pi]==0.6.1"` beside vlash's `.[lerobot]`): the venv of
.ci/lerobot_lane.sh, which runs --smoke as this tool's CI smoke test (the 3.11 dev env has no LeRobot, so there is
no test under tests/tools/ that could run it).

The checkpoint: LeRobot builds PI05Policy at pi0.5's real widths (SigLIP So400m/14 1152 wide, Gemma 2B 2048 wide
with mlp 16384, the 300M expert 1024 wide) and --depth / --vision-depth layers (tools/bench_vs_lerobot_build.py
patches its hard-coded sizes; the vocabulary is a tiny tokenizer's 421 rows, which leaves a chunk's compute as it
is), seeded random weights re-drawn so that every weight matters, made-up normalization stats; LeRobot's own
save_pretrained writes it to a temporary directory. LeRobot loads it back with PI05Policy.from_pretrained and its
saved processors; vlash with `load_runtime(checkpoint=...)`, the path of `vlash serve --checkpoint`.

Before any timing both sides get one observation (--cameras 224x224 cameras, state 6, a task) and the same noise
(LeRobot's `policy.model.sample_noise` replaced, as in tests/fixtures/lerobot_pi05_tiny); when a row's actions differ
from LeRobot's by more than its tolerance (max |diff|: --tolerance on normalized model actions, --pipeline-tolerance
on robot-unit actions, --bf16-tolerance on normalized bf16 actions) the tool exits 1 without timing.

Timed regions (the same work on both sides):
- model rows: LeRobot's `predict_action_chunk(batch)` on the batch its preprocessor made (it scales the images to
  [-1, 1] itself, then prefill and --steps Euler steps) beside vlash's torch engine (eager) prefill + the same steps
  (constant schedule, the time given once per row as on both sides' serving paths) on the inputs vlash's processor
  made (images already scaled). Tokenizing, normalizing and
  unnormalizing are outside.
- pipeline rows (--pipeline): everything from the raw observation (uint8 images, state, task) to robot-unit actions:
  LeRobot's prepare_observation_for_inference + preprocessor + predict_action_chunk + postprocessor beside vlash's
  PolicyRuntime.run (the serving path without the network).
- bf16 rows (--bf16): the model rows with LeRobot's PI05Config(dtype="bfloat16") (its vision tower, projector and
  norms stay fp32) and vlash's torch engine at bf16, on the same fp32 checkpoint. When LeRobot cannot run it, its
  error is printed and there is no bf16 row.
--threads N sets torch's intra-op threads (both sides run in this process). Rounds interleave every row, the order
rotating (ABCD, BCDA, ...). Per row: chunk p50 / p99 and the per-round ratio to its LeRobot reference (median,
bootstrap 95% interval of the median). Progress on stderr, a markdown table on stdout (with the CPU and the load
average before and after), --json PATH gets the rows and samples (written atomically).
"""

from __future__ import annotations

import argparse
import functools
import platform
import sys
import tempfile
from importlib.metadata import version
from pathlib import Path

import numpy as np
import torch
from bench_vs_lerobot_build import TINY, Sizes, build_checkpoint, lerobot_config, real_widths, serve_tokenizer_offline
from bench_vs_lerobot_report import markdown, summarize
from bench_vs_lerobot_sides import LeRobotSide, VlashSide, random_observation, seed_noise
from paired_rounds import Disagreement, agreement, interleaved, load_average, write_json

from vlash.cli.preflight import non_negative_int, positive_int
from vlash.devices.host_rates import cpu_model

SEED = 0
OBS_SEED = 1234  # the observation's, and the noise's (as a request's seed)
TOLERANCES = {"model": 1e-4, "pipeline": 1e-2, "bf16": 0.1}  # max |diff|: normalized, robot units, normalized


def log(message: str) -> None:
    print(f"bench_vs_lerobot: {message}", file=sys.stderr, flush=True)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--smoke", action="store_true", help="tiny sizes, 1 round, no warm-up, every row (CI)")
    p.add_argument("--depth", type=positive_int, default=2, help="VLM and expert layers (real pi0.5: 18)")
    p.add_argument("--vision-depth", type=positive_int, default=3, help="SigLIP layers (real: 27)")
    p.add_argument("--cameras", type=positive_int, default=1, help="224x224 cameras (256 tokens each)")
    p.add_argument("--prompt-len", type=positive_int, default=64, help="tokenizer_max_length")
    p.add_argument("--horizon", type=positive_int, default=50, help="chunk_size (actions per chunk)")
    p.add_argument("--steps", type=positive_int, default=10, help="Euler steps per chunk")
    p.add_argument("--rounds", type=positive_int, default=10, help="timed rounds (one chunk per row each)")
    p.add_argument("--warmup", type=non_negative_int, default=2, help="untimed chunks per row first")
    p.add_argument("--threads", type=positive_int, default=2, help="torch intra-op threads (both sides)")
    p.add_argument("--pipeline", action="store_true", help="add the raw observation -> robot actions rows")
    p.add_argument("--bf16", action="store_true", help="add the bf16 rows")
    for kind, default in TOLERANCES.items():
        flag = "--tolerance" if kind == "model" else f"--{kind}-tolerance"
        p.add_argument(flag, dest=f"{kind}_tolerance", type=float, default=default, help=f"{kind} rows' max |diff|")
    p.add_argument("--json", type=Path, default=None, help="write the rows here (atomically)")
    args = p.parse_args(argv)
    if not all(getattr(args, f"{kind}_tolerance") > 0 for kind in TOLERANCES):
        p.error("tolerances must be > 0")
    if args.json is not None and args.json.is_dir():
        p.error(f"--json {args.json} is a directory")
    if args.smoke:
        args.rounds, args.warmup, args.horizon, args.pipeline, args.bf16 = 1, 0, 10, True, True
    args.sizes = TINY if args.smoke else real_widths(args.depth, args.vision_depth)
    return args


def build_rows(args: argparse.Namespace, checkpoint: Path) -> tuple[dict, dict, dict]:
    """({row: chunk}, {row: (its LeRobot reference, the tolerance kind)}, {row: its actions}); rows whose side
    could not be built are left out, with the reason under "errors" in the third dict."""
    obs = random_observation(args.cameras, 6, OBS_SEED)
    noise = seed_noise(OBS_SEED, args.horizon, 32)
    chunks, refs, actions = {}, {}, {"errors": {}}
    for dtype in ("fp32", "bf16") if args.bf16 else ("fp32",):
        log(f"loading both sides at {dtype}")
        try:
            lerobot = LeRobotSide(checkpoint, dtype)
            batch = lerobot.batch(obs)
            actions[f"lerobot {dtype}"] = lerobot.model_chunk(batch, noise)
        except Exception as exc:  # noqa: BLE001 - LeRobot at bf16 on a CPU: its error is the result
            if dtype == "fp32":
                raise
            actions["errors"][f"lerobot {dtype}"] = f"{type(exc).__name__}: {exc}"
            log(f"LeRobot cannot run {dtype} here: {type(exc).__name__}: {exc}")
            continue
        vlash = VlashSide(checkpoint, args.sizes.vlash_dict(), dtype)
        inputs = vlash.inputs(obs)
        chunks[f"lerobot {dtype}"] = functools.partial(lerobot.model_chunk, batch, noise)
        chunks[f"vlash torch {dtype}"] = functools.partial(vlash.model_chunk, inputs, noise)
        actions[f"vlash torch {dtype}"] = chunks[f"vlash torch {dtype}"]()
        kind = "model" if dtype == "fp32" else "bf16"
        refs[f"lerobot {dtype}"] = refs[f"vlash torch {dtype}"] = (f"lerobot {dtype}", kind)
        if args.pipeline and dtype == "fp32":
            chunks["lerobot pipeline fp32"] = functools.partial(lerobot.pipeline_chunk, obs, noise)
            chunks["vlash runtime fp32"] = functools.partial(vlash.pipeline_chunk, obs)
            for name in ("lerobot pipeline fp32", "vlash runtime fp32"):
                actions[name] = chunks[name]()
                refs[name] = ("lerobot pipeline fp32", "pipeline")
    return chunks, refs, actions


def check_agreement(args: argparse.Namespace, refs: dict, actions: dict) -> dict[str, float]:
    """Every row's max |diff| from its reference; Disagreement past the row kind's tolerance."""
    diffs = {}
    for reference, kind in sorted(set(refs.values())):
        group = {name: actions[name] for name, (ref, _) in refs.items() if ref == reference}
        diffs.update(agreement(group, reference, getattr(args, f"{kind}_tolerance")))
    return diffs


def bf16_drift(actions: dict) -> dict[str, float]:
    """How far each side's bf16 actions are from LeRobot's fp32 ones (max |diff|, normalized): the scale of the
    bf16 tolerance. Empty without both bf16 rows."""
    if "vlash torch bf16" not in actions:
        return {}
    ref = actions["lerobot fp32"].astype(np.float64)
    return {name: float(np.max(np.abs(actions[name] - ref))) for name in ("lerobot bf16", "vlash torch bf16")}


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    torch.set_num_threads(args.threads)
    load_before = load_average()
    with tempfile.TemporaryDirectory(prefix="vlash-vs-lerobot-") as tmp:
        serve_tokenizer_offline(Path(tmp) / "hub")
        checkpoint = Path(tmp) / "checkpoint"
        log(f"LeRobot writes a pi0.5 checkpoint: {_sizes_text(args.sizes)}")
        config = lerobot_config(args.cameras, args.horizon, args.prompt_len, args.steps)
        params = build_checkpoint(checkpoint, args.sizes, config, SEED)
        chunks, refs, actions = build_rows(args, checkpoint)
        errors = actions.pop("errors")
        try:
            diffs = check_agreement(args, refs, actions)
        except Disagreement as exc:
            log(str(exc))
            return 1
        log("max|diff|: " + ", ".join(f"{n} {d:.2g}" for n, d in diffs.items()))
        drift = bf16_drift(actions)
        if drift:
            log("bf16: " + ", ".join(f"{n} vs lerobot fp32 {d:.2g}" for n, d in drift.items()))
        times = interleaved(chunks, args.rounds, args.warmup, log=log)
    rows = summarize(times, refs, diffs)
    env = environment(args, params, load_before)
    print(header(env, errors, drift))
    print(markdown(rows))
    if args.json is not None:
        doc = {"environment": env, "sizes": args.sizes.vlash_dict(), "errors": errors, "rows": rows}
        write_json(args.json, doc | {"bf16_vs_lerobot_fp32": drift})
    return 0


def environment(args: argparse.Namespace, params: int, load_before: str) -> dict:
    versions = {name: version(name) for name in ("lerobot", "transformers", "vlash")}
    settings = ("cameras", "prompt_len", "horizon", "steps", "rounds", "warmup", "threads", "smoke")
    return {
        "cpu": cpu_model(),
        "params": params,
        "settings": {k: getattr(args, k) for k in settings},
        "tolerances": {kind: getattr(args, f"{kind}_tolerance") for kind in TOLERANCES},
        "versions": versions | {"torch": torch.__version__, "python": platform.python_version()},
        "load_before": load_before,
        "load_after": load_average(),
    }


def header(env: dict, errors: dict, drift: dict) -> str:
    s = env["settings"]
    lines = [
        f"<!-- {env['cpu']}; {env['params'] / 1e6:.1f}M params, {s['cameras']} camera(s), prompt {s['prompt_len']}, "
        f"horizon {s['horizon']}, {s['steps']} steps, batch 1; {s['rounds']} rounds; torch threads {s['threads']}; "
        f"load average {env['load_before']} before, {env['load_after']} after; "
        + ", ".join(f"{k} {v}" for k, v in env["versions"].items())
        + " -->"
    ]
    lines += [f"<!-- no {name} row: {error} -->" for name, error in errors.items()]
    lines += [f"<!-- {name} vs lerobot fp32: max abs diff {d:.2g} (normalized) -->" for name, d in drift.items()]
    return "\n".join(lines)


def _sizes_text(sizes: Sizes) -> str:
    return f"vision {sizes.vision}, vlm {sizes.vlm}, expert {sizes.expert}"


if __name__ == "__main__":
    sys.exit(main())
