"""The machine tools/gpu_acceptance.py runs on: the wheels it was given, what it has and lacks, its device profile."""

from __future__ import annotations

import os
import platform
import subprocess
import sys
import tempfile
from pathlib import Path

from gpu_acceptance_rows import ROOT, say


def install_wheels(folder: Path) -> dict:
    """pip install folder/*.whl --no-index --no-deps into a temporary target, which goes first on sys.path and on the
    PYTHONPATH of every process this one starts."""
    target = Path(tempfile.gettempdir()) / "vlash-acceptance-site"
    wheels = sorted(str(w) for w in folder.glob("*.whl"))
    if not wheels:
        return {"error": f"no *.whl in {folder}"}
    pip = [sys.executable, "-m", "pip", "install", "-q", "--no-index", "--no-deps", "--no-compile", "--upgrade"]
    done = subprocess.run([*pip, "--target", str(target), *wheels], capture_output=True, text=True)
    sys.path.insert(0, str(target))
    os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (str(target), os.environ.get("PYTHONPATH")) if p)
    say(f"wheels: {len(wheels)} installed to {target} (pip exit {done.returncode})")
    return {"wheels": [Path(w).name for w in wheels], "returncode": done.returncode, "output": done.stderr[-2000:]}


def environment() -> tuple[dict, dict]:
    """(what this machine is, the engines it cannot run and why)."""
    import torch

    env = {
        "python": platform.python_version(),
        "cpus": os.cpu_count(),
        "torch": torch.__version__,
        "torch_cuda": torch.version.cuda,
        "cuda": {"available": torch.cuda.is_available()},
    }
    if torch.cuda.is_available():
        props = torch.cuda.get_device_properties(0)
        env["cuda"] |= {
            "gpu": props.name,
            "capability": ".".join(map(str, torch.cuda.get_device_capability(0))),
            "memory_gib": round(props.total_memory / 2**30, 1),
        }
    done = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True)
    env["commit"] = done.stdout.strip()
    unavailable = {}
    try:
        import onnxruntime

        if "CUDAExecutionProvider" not in onnxruntime.get_available_providers():
            unavailable["onnxruntime CUDA / TensorRT providers"] = "onnxruntime-gpu is not installed (CPU build only)"
    except ImportError:
        unavailable["onnxruntime"] = "not installed"
    try:
        from vlash.engines.tensorrt_build import import_tensorrt

        import_tensorrt()
    except Exception as exc:  # noqa: BLE001 - what is missing is the finding
        unavailable["TensorRT"] = f"{type(exc).__name__}: {str(exc)[:200]}"
    return env, unavailable


def choose_profile(device: str, gpu: str) -> tuple[str, str]:
    """(device profile, why): cpu on the CPU; on a GPU the profile its name holds (h100, h200, rtx-4090), else h100."""
    if device == "cpu":
        return "cpu", "device cpu"
    from vlash.devices import available_profiles

    for name in available_profiles():
        if name.replace("-", " ") in gpu.lower():
            return name, f"GPU name {gpu!r}"
    return "h100", f"no profile matches GPU {gpu!r}: h100's floors used"
