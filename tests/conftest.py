"""Suite-wide fixtures and skips. Imports without torch or the simulator, so the robot side's tests also run in
an environment that has only `pip install vlash` (tests/packaging does that): tests that need what is missing
there are skipped by their markers (`gpu`, `sim`) or by `pytest.importorskip`."""

from __future__ import annotations

import importlib.util
import os
import signal
import tempfile
from pathlib import Path

import pytest

FIXTURES = Path(__file__).parent / "fixtures"
HAS_TORCH = importlib.util.find_spec("torch") is not None
HAS_SIM = all(importlib.util.find_spec(name) is not None for name in ("gymnasium", "cv2"))


def pytest_configure(config):
    # vlash's user cache (the host rates `vlash bench` measures) goes to a fresh directory per test session, also for
    # the vlash commands tests start as subprocesses: tests never read or write the user's ~/.cache/vlash
    os.environ.setdefault("VLASH_CACHE_DIR", tempfile.mkdtemp(prefix="vlash-test-cache-"))
    # nothing reaches the Hugging Face Hub, and the user's hub cache is not read: a test that needs a cached repo
    # builds one (tests/policies/hub_cache.py)
    os.environ["HF_HUB_OFFLINE"] = "1"
    os.environ["HF_HUB_CACHE"] = tempfile.mkdtemp(prefix="vlash-test-hf-cache-")


@pytest.fixture(autouse=True)
def _single_thread_determinism():
    if HAS_TORCH:
        import torch

        torch.manual_seed(0)
    yield


STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


def _stop_handlers() -> dict[int, object]:
    return {sig: signal.getsignal(sig) for sig in STOP_SIGNALS}


def _check_stop_handlers(before: dict[int, object], what: str) -> None:
    """A command run in-process that installs its own SIGINT / SIGTERM handler and keeps it leaves pytest unable to be
    stopped (Ctrl-C, a CI runner's SIGTERM only set that command's dead event): every test and module must put
    back the handlers it found."""
    changed = [signal.Signals(sig).name for sig, handler in _stop_handlers().items() if handler != before[sig]]
    assert not changed, f"{what} left its own {' and '.join(changed)} handler in the pytest process: restore it"


@pytest.fixture(autouse=True)
def _stop_handlers_restored_by_each_test(request):
    before = _stop_handlers()
    yield
    _check_stop_handlers(before, request.node.nodeid)


@pytest.fixture(autouse=True, scope="module")
def _stop_handlers_restored_by_each_module(request):
    """Module fixtures too (one that starts Ray in this process: ray.init installs a SIGTERM handler)."""
    before = _stop_handlers()
    yield
    _check_stop_handlers(before, f"{request.node.nodeid} (a module-scoped fixture)")


def _has_cuda() -> bool:
    if not HAS_TORCH:
        return False
    import torch

    return torch.cuda.is_available()


def pytest_collection_modifyitems(config, items):
    skips = {
        "gpu": (not _has_cuda(), "needs a CUDA GPU"),
        "sim": (not HAS_SIM, "needs the simulator: pip install 'vlash[sim]'"),
    }
    for item in items:
        for marker, (skip, reason) in skips.items():
            if skip and marker in item.keywords:
                item.add_marker(pytest.mark.skip(reason=reason))


@pytest.fixture(scope="module")
def one_ray_at_a_time(tmp_path_factory):
    """Held by a module that starts Ray: two Ray clusters at once (the suite's two xdist workers) starve each other's
    start-up on CI's 2 cores, so those modules take turns. The lock file sits beside the workers' temp folders."""
    from filelock import FileLock  # with huggingface_hub and torch (the server extra)

    with FileLock(str(tmp_path_factory.getbasetemp().parent / "vlash-ray.lock")):
        yield
