"""A Hub checkpoint without a tokenizer of its own has pi0.5's tokenizer found before its weights download, and the
error when that tokenizer cannot be had says one thing. Before, a user online downloaded a whole checkpoint, then
read "downloading google/paligemma-3b-pt-224" followed by "vlash never downloads one". The Hub is faked
(tests/cli/fake_hub.py): nothing reaches the network."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.cli.fake_hub import FakeHub
from vlash.cli.checkpoint_args import check_checkpoint_files
from vlash.cli.main import main, parse_args
from vlash.cli.serve_args import check_args
from vlash.errors import ConfigError
from vlash.policies.names.hub import PALIGEMMA_TOKENIZER

ROOT = Path(__file__).resolve().parents[2]
SHIPPED = ROOT / "examples" / "lerobot_pi05_tiny"
CHECKPOINT_FILES = sorted((SHIPPED / "pretrained_model").iterdir())  # LeRobot 0.6.1: no tokenizer
TOKENIZER_FILES = sorted((SHIPPED / "tokenizer").iterdir())
REPO = "someone/pi05_finetune"


@pytest.fixture
def hub(monkeypatch, tmp_path) -> FakeHub:
    return FakeHub(monkeypatch, tmp_path / "hub")


def error_lines(argv: list[str], capsys) -> tuple[str, str]:
    """(the `vlash serve: error:` line, everything vlash printed to stderr) of a run that must end in rc 2."""
    code = main(argv)
    err = capsys.readouterr().err
    assert code == 2, err
    errors = [line for line in err.splitlines() if line.startswith("vlash serve: error: ")]
    assert len(errors) == 1, err
    return errors[0], err


@pytest.mark.parametrize(
    ("argv", "repo"), [(["--checkpoint", REPO], REPO), (["--policy", "pi05"], "lerobot/pi05_base")]
)
def test_a_gated_tokenizer_is_said_before_the_checkpoint_downloads(hub, capsys, argv, repo):
    hub.add(repo, CHECKPOINT_FILES)
    hub.gated.add(PALIGEMMA_TOKENIZER)
    line, err = error_lines(["serve", *argv], capsys)
    assert hub.downloads == [PALIGEMMA_TOKENIZER]  # the checkpoint's weights never started downloading
    assert f"the Hugging Face checkpoint {repo} has no tokenizer" in line, line
    assert f"{PALIGEMMA_TOKENIZER}, is gated: accept its license" in line and "`hf auth login`" in line, line
    assert "or pass --tokenizer PATH" in line, line
    assert "never downloads" not in err and "Traceback" not in err, err  # one thing said, nothing contradicting it


def test_the_tokenizer_comes_first_then_the_checkpoint(hub):
    hub.add(REPO, CHECKPOINT_FILES)
    hub.add(PALIGEMMA_TOKENIZER, TOKENIZER_FILES)
    args = parse_args(["serve", "--checkpoint", REPO])
    checked = check_args(args)
    assert hub.downloads == [PALIGEMMA_TOKENIZER, REPO]
    assert checked.source.hub_id == REPO and checked.source.layout == "lerobot"
    assert args.tokenizer == hub.cached[PALIGEMMA_TOKENIZER]


def test_a_checkpoint_with_its_own_tokenizer_needs_no_other(hub):
    hub.add(REPO, [*CHECKPOINT_FILES, SHIPPED / "tokenizer" / "tokenizer.json"])
    hub.gated.add(PALIGEMMA_TOKENIZER)  # never asked for
    args = parse_args(["serve", "--checkpoint", REPO])
    check_args(args)
    assert hub.downloads == [REPO] and hub.listed == [REPO] and args.tokenizer is None


def test_a_local_checkpoint_without_a_tokenizer_says_one_thing_offline(tmp_path):
    """No network (HF_HUB_OFFLINE, as tests/conftest.py sets): what the checkpoint lacks and the two ways to give it,
    never "vlash never downloads one" beside the Hub repo it would have downloaded."""
    path = tmp_path / "lerobot"
    path.mkdir()
    (path / "config.json").write_text("{}")
    (path / "policy_preprocessor.json").write_text(json.dumps({"steps": [{"registry_name": "tokenizer_processor"}]}))
    args = parse_args(["serve", "--checkpoint", str(path)])
    with pytest.raises(ConfigError) as refused:
        check_checkpoint_files(args, path, "lerobot")
    text = str(refused.value)
    assert text.startswith(f"{path} has no tokenizer (LeRobot saves one only from 0.6.2); pi0.5's tokenizer"), text
    assert "HF_HUB_OFFLINE is set" in text and f"`hf download {PALIGEMMA_TOKENIZER}`" in text, text
    assert "or pass --tokenizer PATH" in text and "never downloads" not in text and "\n" not in text, text
