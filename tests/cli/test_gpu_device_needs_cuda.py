"""A GPU --device on a torch that cannot reach a GPU is one line naming the torch build found and the one needed,
before anything loads: before, `vlash serve --device rtx-4090` (h100, jetson-orin; `vlash bench` likewise) on a
CPU-only torch printed a 49-line traceback ending in "Torch not compiled with CUDA enabled"."""

from __future__ import annotations

import pytest
import torch

from vlash.cli.main import main
from vlash.devices import cuda_check
from vlash.devices import profile as profile_module
from vlash.policies.names.shipped import available_shipped

SHIPPED = "pi05-tiny-sim"
needs_shipped = pytest.mark.skipif(SHIPPED not in available_shipped(), reason="checkpoints/ not in this install")


def refuse(what: str):
    def called(*args, **kwargs):
        raise AssertionError(f"{what} ran before the device was checked")

    return called


@pytest.fixture
def nothing_loads(monkeypatch):
    import vlash.bench
    import vlash.cli.serve_run as serve_run

    monkeypatch.setattr(serve_run, "load_runtime", refuse("the policy load"))
    monkeypatch.setattr(vlash.bench, "make_engine", refuse("the engine build"))


@pytest.fixture
def cpu_only_torch(monkeypatch):
    """torch as a CPU-only build is (this machine's, where it has no CUDA; forced on a GPU machine)."""
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(torch.version, "cuda", None)
    monkeypatch.setattr(cuda_check, "TEGRA_RELEASE", cuda_check.TEGRA_RELEASE.with_name("no_such_tegra_release"))


def one_line_error(argv: list[str], capsys) -> str:
    code = main(argv)
    err = capsys.readouterr().err.strip()
    assert code == 2, err
    assert err.startswith(f"vlash {argv[0]}: error: ") and "\n" not in err and "Traceback" not in err, err
    return err


@needs_shipped
@pytest.mark.parametrize("device", ["rtx-4090", "h100", "cuda", "cuda:1"])
def test_a_gpu_device_on_a_cpu_only_torch_is_one_line(device, cpu_only_torch, nothing_loads, capsys):
    for argv in (
        ["serve", "--policy", SHIPPED, "--device", device],
        ["bench", "--policy", "pi05-tiny", "--device", device, "--iters", "1"],
    ):
        err = one_line_error(argv, capsys)
        assert f"--device {device} needs a CUDA GPU" in err, err
        assert f"torch {torch.__version__}" in err and "built without CUDA" in err, err  # the build found
        assert "a CUDA build of torch from pytorch.org" in err and "JetPack" not in err, err  # the one needed


@needs_shipped
def test_a_jetson_profile_asks_for_jetpacks_torch(cpu_only_torch, nothing_loads, monkeypatch, capsys):
    err = one_line_error(["serve", "--policy", SHIPPED, "--device", "jetson-orin"], capsys)
    assert "JetPack's torch wheel from NVIDIA" in err and "PyPI's aarch64 torch has no CUDA" in err, err
    # `--device jetson` on a Jetson (detected: Orin) whose torch came from PyPI
    monkeypatch.setattr(profile_module, "detect_jetson", lambda: "jetson-orin")
    err = one_line_error(["bench", "--policy", "pi05-tiny", "--device", "jetson", "--iters", "1"], capsys)
    assert "--device jetson needs a CUDA GPU" in err and "JetPack's torch wheel" in err, err


@needs_shipped
def test_a_cuda_build_that_sees_no_gpu_says_so(cpu_only_torch, nothing_loads, monkeypatch, capsys):
    monkeypatch.setattr(torch.version, "cuda", "12.4")
    err = one_line_error(["serve", "--policy", SHIPPED, "--device", "h100"], capsys)
    assert "(CUDA 12.4) sees none" in err and "nvidia-smi" in err, err


@needs_shipped
def test_cpu_and_auto_are_not_refused(cpu_only_torch, nothing_loads, capsys):
    """The check asks nothing of a CPU device: the load (refused here) is reached."""
    for device in ("cpu", "auto"):
        with pytest.raises(AssertionError, match="the policy load ran"):
            main(["serve", "--policy", SHIPPED, "--device", device])


@pytest.mark.skipif(torch.cuda.is_available(), reason="this torch sees a GPU")
def test_this_cpu_only_torch_in_a_fresh_process(tmp_path):
    """The real build, no patches: `vlash serve --device h100` exits 2 with one line and no traceback."""
    import subprocess
    import sys

    argv = ["serve", "--policy", "pi05-tiny", "--random-weights", "--device", "h100"]
    run = subprocess.run(
        [sys.executable, "-m", "vlash.cli.main", *argv], capture_output=True, text=True, timeout=120, cwd=tmp_path
    )
    err = run.stderr.strip()
    assert run.returncode == 2 and "\n" not in err and "Traceback" not in err, err
    assert f"torch {torch.__version__}" in err and "torch.version.cuda is None" in err, err
