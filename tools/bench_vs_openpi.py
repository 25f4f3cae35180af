"""vlash's engines beside openpi's own JAX pi0.5 on identical random weights, and against this host's floor.

    python tools/bench_vs_openpi.py --openpi /tmp/openpi --policy pi05-small --cameras 1 --prompt-len 64 \
        --rounds 10 --threads 2 --json vs_openpi.json
    python tools/bench_vs_openpi.py --policy pi05-tiny --rounds 2       # vlash's engines and the floor only

With --openpi PATH (an openpi source checkout, never copied here; needs `pip install 'vlash[bench-jax]'`) the tool
builds openpi's `Pi0` (pi05=True, fp32) at the vlash config's dimensions, initializes it randomly, re-randomizes
the leaves openpi initializes to constants (tests/fixtures/openpi_pi05_dummy/README.md, "Re-randomization") and
loads the very same numbers into vlash with `vlash.policies.formats.openpi_jax_params.convert_openpi_params`. Both then
sample one chunk (batch 1, fp32, --steps Euler steps, the constant schedule) from the same images, tokens, masks
and noise; when any engine's actions differ from the reference's by more than --tolerance (max |diff|) the tool
exits 1 without timing. The reference is openpi's `sample_actions` under `jax.jit` (openpi's own `module_jit`);
without --openpi it is vlash's eager torch engine.

Timing: after --warmup untimed chunks each, --rounds rounds in which every engine runs one chunk, the order
rotating from round to round (ABC, BCA, ...), so the machine's drift falls on all alike. Per engine: chunk p50 /
p99, the per-round ratio to the reference's chunk (median, bootstrap 95% interval of the median, min-max in the
JSON) and p50 / the roofline floor of the chunk (prefill + steps x step, `vlash.devices.model_floors` with this
host's measured fp32 GEMM rate and copy bandwidth, as `vlash bench` on a CPU; --profile-rates: the cpu profile's).
--threads N sets torch's intra-op threads, onnxruntime's and XLA's (XLA_FLAGS, set before jax is imported); JAX
runs with its defaults otherwise (jax_default_matmul_precision unset: fp32 matmuls are fp32 on a CPU).
Progress goes to stderr, one markdown table to stdout, --json PATH gets the rows (written atomically).
"""

from __future__ import annotations

import argparse
import functools
import importlib
import importlib.util
import os
import platform
import sys
import tempfile
import types
from dataclasses import asdict
from pathlib import Path

import numpy as np
import torch
from bench_config_args import add_config_arguments, config_from_args
from paired_rounds import SEED, Chunk, Disagreement, agreement, interleaved, median_interval, write_json

from vlash.bench import BenchSettings, roofline_ms
from vlash.cli.preflight import non_negative_int, positive_int
from vlash.devices import load_profile
from vlash.devices.host_rates import cached_host_rates, with_host_rates
from vlash.engines import create_engine
from vlash.policies.formats.openpi_jax_params import convert_openpi_params
from vlash.policies.pi05.config import Pi05Config
from vlash.policies.pi05.examples import random_inputs
from vlash.policies.pi05.model import Pi05Inputs, Pi05Model
from vlash.policies.pi05.weights import build_random
from vlash.sampling import FlowSampler, SamplerConfig

OPENPI = "openpi-jax"
ENGINES = ("torch", "torch-compile", "onnxruntime")  # vlash's engines this tool can time
TOLERANCE = 1e-3  # fp32 actions, max |diff| (the openpi fixture's suggested check)


def log(message: str) -> None:
    print(f"bench_vs_openpi: {message}", file=sys.stderr, flush=True)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--openpi", type=Path, default=None, help="an openpi source checkout (its root); default: none")
    add_config_arguments(p)
    p.add_argument("--engines", nargs="+", choices=ENGINES, default=list(ENGINES), help="vlash engines to time")
    p.add_argument("--steps", type=positive_int, default=10, help="Euler steps per chunk")
    p.add_argument("--rounds", type=positive_int, default=10, help="timed rounds (one chunk per engine each)")
    p.add_argument("--warmup", type=non_negative_int, default=2, help="untimed chunks per engine first")
    p.add_argument("--threads", type=positive_int, default=None, help="torch / onnxruntime / XLA threads")
    p.add_argument("--tolerance", type=float, default=TOLERANCE, help="max |diff| of the actions to allow")
    p.add_argument("--profile-rates", action="store_true", help="floor from the cpu profile, not measured rates")
    p.add_argument("--json", type=Path, default=None, help="write the rows here (atomically)")
    args = p.parse_args(argv)
    if not args.tolerance > 0:
        p.error(f"--tolerance must be > 0, got {args.tolerance}")
    if args.openpi is not None and not (args.openpi / "src" / "openpi" / "models" / "pi0.py").is_file():
        p.error(f"--openpi {args.openpi} is not an openpi checkout (no src/openpi/models/pi0.py)")
    if len(set(args.engines)) != len(args.engines):
        p.error(f"--engines names one twice: {args.engines}")
    if args.json is not None and args.json.is_dir():
        p.error(f"--json {args.json} is a directory")
    args.config = config_from_args(p, args)
    return args


# ---- openpi's JAX pi0.5 -------------------------------------------------------------------------------------------


def import_openpi(root: Path) -> types.SimpleNamespace:
    """openpi's model modules from the checkout at `root`, patched to build the vlash config's dimensions."""
    sys.path[:0] = [str(root / "src"), str(root / "packages" / "openpi-client" / "src")]
    # openpi.models.model imports augmax (training-time augmentation) and openpi's PyTorch port (transformers at a
    # pinned version) at module level; sampling uses neither, so both are stubbed when they would not import.
    if importlib.util.find_spec("augmax") is None:
        sys.modules["augmax"] = types.ModuleType("augmax")
    sys.modules.setdefault("openpi.models_pytorch.pi0_pytorch", types.ModuleType("openpi.models_pytorch.pi0_pytorch"))
    try:
        names = ("model", "gemma", "siglip", "pi0_config")
        mods = {n: importlib.import_module(f"openpi.models.{n}") for n in names}
        mods["nnx_utils"] = importlib.import_module("openpi.shared.nnx_utils")
        import flax.nnx as nnx
        import jax
        import jax.numpy as jnp
    except ImportError as exc:
        raise SystemExit(f"openpi's model code needs: pip install 'vlash[bench-jax]' ({exc})") from exc
    return types.SimpleNamespace(**mods, nnx=nnx, jax=jax, jnp=jnp)


def patch_dimensions(op: types.SimpleNamespace, config: Pi05Config) -> tuple[str, str]:
    """Point openpi's hard-coded sizes at `config` (the narrow way, module attributes openpi reads at build and call
    time); returns the Gemma variant names to put in Pi0Config. One config per process."""
    gemma, siglip, model = op.gemma, op.siglip, op.model
    variants = {"vlash-vlm": config.vlm, "vlash-expert": config.expert}
    get_config = gemma.get_config

    def get_gemma(variant: str):
        c = variants.get(variant)
        if c is None:
            return get_config(variant)
        return gemma.Config(c.width, c.depth, c.mlp_dim, c.num_heads, c.num_kv_heads, c.head_dim)

    v, size = config.vision, (config.vision.image_size, config.vision.image_size)
    gemma.get_config = get_gemma
    gemma.PALIGEMMA_VOCAB_SIZE = config.vocab_size  # the embedder's rows (openpi: PaliGemma's 257,152)
    # pi0.py asks siglip for "So400m/14"; the variant string decides width / depth / mlp / heads / patch
    siglip.decode_variant = lambda variant: {
        "width": v.width,
        "depth": v.depth,
        "mlp_dim": v.mlp_dim,
        "num_heads": v.num_heads,
        "patch_size": (v.patch_size, v.patch_size),
    }
    model.IMAGE_RESOLUTION = size  # fake_obs (lazy_init) sizes the learned position embedding from it
    # sample_actions resizes to, and requires, openpi's three cameras at 224 unless told the config's
    model.preprocess_observation = functools.partial(
        model.preprocess_observation, image_keys=config.camera_names, image_resolution=size
    )
    return tuple(variants)


def rerandomize(params: dict[str, np.ndarray], seed: int) -> dict[str, np.ndarray]:
    """The fixture's rule: every bias / scale leaf becomes init + 0.1 N(0, 1), every other constant leaf (adaRMS
    Dense, SigLIP head: zero-init) N(0, 1) / sqrt(fan_in); openpi's random kernels are kept."""
    rng = np.random.default_rng(seed)
    out = {}
    for path, a in params.items():
        if path.rsplit("/", 1)[-1] in ("bias", "scale"):
            a = a + 0.1 * rng.standard_normal(a.shape)
        elif a.size and np.all(a == a.flat[0]):
            a = rng.standard_normal(a.shape) / np.sqrt(a.shape[-2])
        out[path] = np.array(a, dtype=np.float32)  # a writable copy (jax's arrays view read-only memory)
    return out


def openpi_model(op: types.SimpleNamespace, config: Pi05Config, seed: int):
    """(openpi's Pi0 with re-randomized parameters, those parameters flattened to "/"-joined paths)."""
    vlm, expert = patch_dimensions(op, config)
    pi0 = op.pi0_config.Pi0Config(
        pi05=True,
        dtype="float32",
        paligemma_variant=vlm,
        action_expert_variant=expert,
        action_dim=config.action_dim,
        action_horizon=config.action_horizon,
        max_token_len=config.max_token_len,
    )
    model = pi0.create(op.jax.random.key(seed))
    state = op.nnx.state(model, op.nnx.Param)
    flat = {"/".join(map(str, k)): np.asarray(v.get_value()) for k, v in state.flat_state()}
    flat = rerandomize(flat, seed + 1)
    op.nnx.update(model, op.nnx.State.from_flat_path({tuple(k.split("/")): op.jnp.asarray(a) for k, a in flat.items()}))
    return model, flat


def openpi_chunk(op, model, config: Pi05Config, inputs: Pi05Inputs, noise: torch.Tensor, steps: int) -> Chunk:
    """One jitted `sample_actions` on device-resident inputs, blocked on; returns the actions."""
    jnp, cams = op.jnp, config.camera_names
    obs = op.model.Observation(
        images={c: jnp.asarray(inputs.images[:, i].permute(0, 2, 3, 1).numpy()) for i, c in enumerate(cams)},
        image_masks={c: jnp.asarray(inputs.image_masks[:, i].numpy()) for i, c in enumerate(cams)},
        state=jnp.zeros((inputs.tokens.shape[0], config.action_dim), jnp.float32),  # pi0.5 never reads it
        tokenized_prompt=jnp.asarray(inputs.tokens.numpy().astype(np.int32)),
        tokenized_prompt_mask=jnp.asarray(inputs.token_masks.numpy()),
    )
    sample = op.nnx_utils.module_jit(model.sample_actions)
    key, jnoise = op.jax.random.key(SEED), jnp.asarray(noise.numpy())
    return lambda: np.asarray(sample(key, obs, num_steps=steps, noise=jnoise).block_until_ready())


# ---- vlash ----------------------------------------------------------------------------------------------------------


def vlash_chunks(model: Pi05Model, names: list[str], inputs, noise, steps: int, threads, workdir: Path) -> dict:
    """{engine name: one chunk (prefill + `steps` Euler steps, constant schedule)} over the same weights."""
    sampler = FlowSampler(SamplerConfig(num_steps=steps, schedule="constant"))
    chunks = {}
    for name in names:
        log(f"building {name}")
        if name == "onnxruntime":
            from vlash.engines.onnx_export import export_onnx

            artifact = workdir / f"{model.config.name}-fp32"
            export_onnx(model, artifact, precision="fp32", policy=model.config.name)
            engine = create_engine("onnxruntime", artifact=artifact, threads=threads)
        else:
            engine = create_engine("torch", model=model, compile_mode="default" if name == "torch-compile" else None)
        chunks[name] = functools.partial(_vlash_chunk, engine, sampler, inputs, noise)
    return chunks


@torch.no_grad()
def _vlash_chunk(engine, sampler: FlowSampler, inputs: Pi05Inputs, noise: torch.Tensor) -> np.ndarray:
    cache = engine.prefill(inputs)
    step = lambda x, tau: engine.denoise_step(x, tau, cache)  # noqa: E731
    # one flow time per row, as the serving path gives it with the constant schedule (and openpi's sample_actions)
    result = sampler.sample(step, noise, synchronize=engine.synchronize, shared_time=True)
    return result.actions.numpy()


# ---- agreement, timing, report --------------------------------------------------------------------------------------


def summarize(times: dict[str, list[float]], reference: str, floor_ms: float, diffs: dict[str, float]) -> list[dict]:
    rows = []
    for name, ms in times.items():
        ratios = [a / b for a, b in zip(ms, times[reference], strict=True)]
        med, lo, hi = median_interval(ratios)
        p50 = float(np.median(ms))
        rows.append(
            {
                "engine": name,
                "chunk_p50_ms": p50,
                "chunk_p99_ms": float(np.percentile(ms, 99)),
                "rounds": len(ms),
                "vs_reference": {"median": med, "ci95": [lo, hi], "min": min(ratios), "max": max(ratios)},
                "vs_floor": p50 / floor_ms,
                "max_abs_diff": diffs[name],
                "samples_ms": ms,
            }
        )
    return rows


def markdown(rows: list[dict], reference: str, floor_ms: float) -> str:
    lines = [
        f"| engine | chunk p50 ms | chunk p99 ms | / {reference} (median [95% CI]) | / floor | max abs diff |",
        "|---|---|---|---|---|---|",
    ]
    for r in rows:
        ref = r["vs_reference"]
        lines.append(
            f"| {r['engine']} | {r['chunk_p50_ms']:.1f} | {r['chunk_p99_ms']:.1f} | {ref['median']:.2f}x "
            f"[{ref['ci95'][0]:.2f}, {ref['ci95'][1]:.2f}] | {r['vs_floor']:.1f}x | {r['max_abs_diff']:.2g} |"
        )
    lines.append(f"<!-- floor: chunk {floor_ms:.2f} ms (prefill + steps x step roofline) -->")
    return "\n".join(lines)


def chunk_floor_ms(config: Pi05Config, steps: int, threads: int, profile_rates: bool) -> tuple[float, dict]:
    """(the chunk's roofline floor in ms, the host rates it used: {} with --profile-rates)."""
    profile, rates = load_profile("cpu"), {}
    if not profile_rates:
        measured, _ = cached_host_rates(threads)
        profile, rates = with_host_rates(profile, measured), asdict(measured)
    return roofline_ms(config, profile, "fp32", BenchSettings(steps=steps))["chunk_ms"], rates


def xla_threads(threads: int) -> None:
    """Before jax is imported (read when it creates its CPU client): the XLA_FLAGS usually given for this, and NPROC,
    the variable XLA's CPU client sizes its intra-op thread pool from (jaxlib 0.10.2 on 2 cores, measured: the flags
    alone leave a 2048^3 jitted matmul on 2 threads, NPROC=1 puts it on 1)."""
    eigen = "true" if threads > 1 else "false"
    flags = f"--xla_cpu_multi_thread_eigen={eigen} intra_op_parallelism_threads={threads}"
    os.environ["XLA_FLAGS"] = f"{os.environ.get('XLA_FLAGS', '')} {flags}".strip()
    os.environ["NPROC"] = str(threads)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    config, threads = args.config, args.threads
    if threads:
        torch.set_num_threads(threads)
        if args.openpi is not None:
            xla_threads(threads)
    inputs = random_inputs(config, batch=1, seed=SEED + 3, valid_tokens=(config.max_token_len * 3 // 4 or 1,))
    noise = torch.randn(1, config.action_horizon, config.action_dim, generator=torch.Generator().manual_seed(SEED + 4))
    chunks: dict[str, Chunk] = {}
    if args.openpi is not None:
        log(f"building openpi's Pi0 (pi05, fp32) at {config.name}'s dimensions from {args.openpi}")
        op = import_openpi(args.openpi.resolve())
        jax_model, params = openpi_model(op, config, SEED)
        model = Pi05Model(config)
        model.load_state_dict(convert_openpi_params(params, config), strict=True)
        model.eval()
        chunks[OPENPI] = openpi_chunk(op, jax_model, config, inputs, noise, args.steps)
    else:
        model = build_random(config, seed=SEED)
    n_params = sum(p.numel() for p in model.parameters())
    with tempfile.TemporaryDirectory(prefix="vlash-vs-openpi-") as tmp:
        chunks.update(vlash_chunks(model, args.engines, inputs, noise, args.steps, threads, Path(tmp)))
        reference = next(iter(chunks))
        log("agreement run (includes jit / torch.compile)")
        try:
            diffs = agreement({n: c() for n, c in chunks.items()}, reference, args.tolerance)
        except Disagreement as exc:
            log(str(exc))
            return 1
        log("max|diff| vs " + reference + ": " + ", ".join(f"{n} {d:.2g}" for n, d in diffs.items()))
        times = interleaved(chunks, args.rounds, args.warmup, log=log)
    floor_ms, rates = chunk_floor_ms(config, args.steps, threads or torch.get_num_threads(), args.profile_rates)
    rows = summarize(times, reference, floor_ms, diffs)
    versions = {"torch": torch.__version__, "python": platform.python_version()}
    if args.openpi is not None:
        versions.update({m: importlib.import_module(m).__version__ for m in ("jax", "jaxlib", "flax")})
    print(
        f"<!-- {config.name}: {n_params / 1e6:.0f}M params, {config.num_cameras} camera(s), prompt "
        f"{config.max_token_len}, batch 1, fp32, {args.steps} steps; {args.rounds} rounds; threads "
        f"{threads or 'default'}; XLA_FLAGS={os.environ.get('XLA_FLAGS', '')!r} NPROC={os.environ.get('NPROC', '')!r}; "
        + ", ".join(f"{k} {v}" for k, v in versions.items())
        + " -->"
    )
    print(markdown(rows, reference, floor_ms))
    if args.json is not None:
        doc = {
            "policy": config.name,
            "config": config.to_dict(),
            "params": n_params,
            "reference": reference,
            "openpi": str(args.openpi) if args.openpi else None,
            "settings": {k: getattr(args, k) for k in ("steps", "rounds", "warmup", "threads", "tolerance")},
            "xla_env": {k: os.environ.get(k, "") for k in ("XLA_FLAGS", "NPROC")},
            "versions": versions,
            "floor_chunk_ms": floor_ms,
            "host_rates": rates,
            "rows": rows,
        }
        write_json(args.json, doc)
    return 0


if __name__ == "__main__":
    sys.exit(main())
