"""A GPU `--device` on a torch that cannot reach a GPU, said in one line before anything loads: which torch build
this is and which one the device needs (a CUDA build from pytorch.org; on Jetson, JetPack's wheel from NVIDIA).
Without it a GPU profile on a CPU-only torch ended in a 49-line traceback ("Torch not compiled with CUDA enabled")
from the model's first move to the GPU, after the weights had loaded.

`wants_cuda` reads the device name and profile only (no torch); `check_cuda` imports torch."""

from __future__ import annotations

from vlash.devices.jetson import TEGRA_RELEASE
from vlash.devices.profile import is_profile_name, load_profile
from vlash.errors import ConfigError

CUDA_TORCH = "a CUDA build of torch from pytorch.org (https://pytorch.org/get-started/locally/)"
JETSON_TORCH = (
    "JetPack's torch wheel from NVIDIA (https://docs.nvidia.com/deeplearning/frameworks/install-pytorch-jetson-platform/"
    "; PyPI's aarch64 torch has no CUDA)"
)


def wants_cuda(name: str) -> bool:
    """True when the --device value `name` runs on a GPU: cuda, cuda:N, or a device profile whose device is cuda
    (jetson included). Unknown names are left to the device's own parsing."""
    if is_profile_name(name):
        return load_profile(name).device == "cuda"
    return name.partition(":")[0] == "cuda"


def check_cuda(name: str, flag: str = "--device", on_jetson: bool | None = None) -> None:
    """Nothing when torch sees a CUDA GPU; otherwise ConfigError in one line naming the torch build found and the
    one `name` needs. `on_jetson` (None: a jetson profile, or this machine's L4T release file) picks JetPack's
    wheel as the fix."""
    import torch  # extra: server

    if torch.cuda.is_available():
        return
    if on_jetson is None:
        on_jetson = name.startswith("jetson") or TEGRA_RELEASE.is_file()
    need = JETSON_TORCH if on_jetson else CUDA_TORCH
    found = f"torch {torch.__version__}"
    if torch.version.cuda is None:
        raise ConfigError(
            f"{flag} {name} needs a CUDA GPU, but this {found} is built without CUDA (torch.version.cuda is None): "
            f"install {need}"
        )
    fix = f"install {need}" if on_jetson else "check `nvidia-smi` and CUDA_VISIBLE_DEVICES"
    raise ConfigError(f"{flag} {name} needs a CUDA GPU, but {found} (CUDA {torch.version.cuda}) sees none: {fix}")
