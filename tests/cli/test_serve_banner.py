"""The server banner and the clients' metadata name a Hub checkpoint by its repo id and a directory by its path as
the user wrote it. Before, a Hub checkpoint was named by its snapshot's commit hash (`0123456789abcdef...`) and a
LeRobot fine-tune by its last folder, "pretrained_model"."""

from __future__ import annotations

import shutil
from dataclasses import replace
from pathlib import Path

import pytest
import torch

import vlash.cli.serve_cmd as serve_cmd
import vlash.cli.serve_run as serve_run
import vlash.runtime.loading as loading
from tests.policies.hub_cache import write_hub_repo
from tests.server.conftest import MICRO
from vlash.cli.main import parse_args
from vlash.policies.names.source import PolicyKind

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "lerobot_pi05_tiny"
OPTIONS = ["--tokenizer", str(EXAMPLE / "tokenizer" / "tokenizer.json")]
OPTIONS += ["--model-config", str(EXAMPLE / "model_config.yaml")]


class StoppedServer:
    """The PolicyServer interface `serve` uses, asking to stop as soon as it starts; keeps the metadata it got."""

    metadata: dict = {}

    def __init__(self, runtime, metadata, config, on_failure):
        StoppedServer.metadata = metadata
        self.on_failure, self.failure, self.warm_up_s, self.jobs = on_failure, None, 0.0, []
        self.stats = type("Stats", (), {"line": lambda self, pending=0: "served 0"})()

    def start(self):
        self.on_failure(None)  # stops the serving loop at once
        return "tcp://127.0.0.1:1"

    def stop(self):
        pass


@pytest.fixture
def banner(monkeypatch, capsys):
    """Run `vlash serve ARGV` with the micro policy's runtime standing in for the load (named as load_runtime names
    a directory: its resolved folder name) and a server that stops at once; returns (the banner, the metadata)."""
    micro = loading.load_runtime(str(MICRO), random_weights=True)
    monkeypatch.setattr(serve_run, "PolicyServer", StoppedServer)
    monkeypatch.setattr(serve_run, "policy_metadata", lambda runtime, model_id, *rest: {"model_id": model_id})

    def load(plan, args):
        if plan.source.kind is PolicyKind.PRESET:
            return micro
        return replace(micro, model_id=plan.source.path.resolve().name)

    monkeypatch.setattr(serve_run, "load", load)
    threads = torch.get_num_threads()

    def run(argv: list[str]) -> tuple[str, dict]:
        try:
            assert serve_cmd.run(parse_args(["serve", *argv, "--stats-every", "0", "--threads", "1"])) == 0
        finally:
            torch.set_num_threads(threads)
        line = next(line for line in capsys.readouterr().out.splitlines() if "serving on" in line)
        return line, StoppedServer.metadata

    run.loaded_name = micro.model_id
    return run


def test_a_hub_checkpoint_is_named_by_its_repo_id(banner, tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    snapshot = write_hub_repo(tmp_path / "hub", "lerobot/pi05_tiny", sorted((EXAMPLE / "pretrained_model").iterdir()))
    line, metadata = banner(["--checkpoint", "lerobot/pi05_tiny", *OPTIONS])
    assert line.startswith("vlash serve: lerobot/pi05_tiny (") and snapshot.name not in line, line
    assert metadata["model_id"] == "lerobot/pi05_tiny"


def test_a_lerobot_directory_is_named_as_written(banner, tmp_path, monkeypatch):
    run = tmp_path / "outputs" / "so101" / "checkpoints" / "005000"
    shutil.copytree(EXAMPLE / "pretrained_model", run / "pretrained_model")
    monkeypatch.chdir(tmp_path)
    written = "outputs/so101/checkpoints/005000/pretrained_model"
    line, metadata = banner(["--checkpoint", written, *OPTIONS])
    assert line.startswith(f"vlash serve: {written} ("), line
    assert metadata["model_id"] == written


def test_random_weights_keep_the_name_the_load_gives(banner):
    line, metadata = banner(["--policy", str(MICRO), "--random-weights"])
    assert line.startswith(f"vlash serve: {banner.loaded_name} (") and metadata["model_id"] == banner.loaded_name, line
