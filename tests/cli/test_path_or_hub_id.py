"""`owner/name` is a Hugging Face repo id only where no local folder explains it better: a mistyped local path is
"no such directory" with the closest existing folder, never a download. Before, `vlash serve --checkpoint
checkpoints/pi05-tiny-simm` started "downloading checkpoints/pi05-tiny-simm from the Hugging Face Hub". The Hub is
faked and online (tests/cli/fake_hub.py), so a lookup that should not happen would be recorded."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.cli.fake_hub import FakeHub
from vlash.cli.main import main
from vlash.errors import CheckpointError
from vlash.policies.names.local_paths import closest_existing, local_reason
from vlash.policies.names.source import PolicyKind, resolve_policy

CHECKPOINT_FILES = sorted(
    (Path(__file__).resolve().parents[2] / "examples/lerobot_pi05_tiny/pretrained_model").iterdir()
)


@pytest.fixture
def here(tmp_path, monkeypatch) -> Path:
    """A working directory holding checkpoints/pi05-tiny-sim/ and tok/tokenizer.json."""
    (tmp_path / "checkpoints" / "pi05-tiny-sim").mkdir(parents=True)
    (tmp_path / "tok").mkdir()
    (tmp_path / "tok" / "tokenizer.json").write_text("{}")
    monkeypatch.chdir(tmp_path)
    return tmp_path


@pytest.fixture
def hub(monkeypatch, tmp_path) -> FakeHub:
    return FakeHub(monkeypatch, tmp_path / "hub-cache")


@pytest.mark.parametrize(
    ("value", "why"),
    [
        ("checkpoints/pi05-tiny-simm", "checkpoints/ exists here"),  # an existing parent folder
        ("checkpont/pi05-tiny-sim", "checkpont/ is a near miss of checkpoints/"),  # a near miss of a folder here
    ],
)
def test_a_mistyped_local_path_is_a_path_with_the_closest_folder(here, hub, value, why):
    with pytest.raises(CheckpointError) as refused:
        resolve_policy(value, flag="--checkpoint")
    text = str(refused.value)
    assert text.startswith(f"--checkpoint {value!r}: no such directory or file"), text
    assert why in text and "not a Hugging Face repo id" in text, text
    assert text.endswith("did you mean 'checkpoints/pi05-tiny-sim'?"), text
    assert hub.downloads == [] and hub.listed == []


def test_serve_says_it_in_one_line_without_downloading(here, hub, capsys):
    assert main(["serve", "--checkpoint", "checkpoints/pi05-tiny-simm"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "downloading" not in err and "'checkpoints/pi05-tiny-sim'?" in err, err
    assert hub.downloads == [] and hub.listed == []


def test_a_mistyped_tokenizer_path_names_the_file_it_missed(here, hub, capsys):
    argv = ["serve", "--policy", "pi05-tiny", "--random-weights", "--tokenizer", "tok/tokenizer.jsn"]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "--tokenizer 'tok/tokenizer.jsn': no such file or directory; did you mean 'tok/tokenizer.json'?" in err
    assert hub.downloads == [], err


def test_a_repo_id_no_local_folder_explains_is_looked_up(here, hub):
    hub.add("lerobot/pi05_tiny", CHECKPOINT_FILES)
    source = resolve_policy("lerobot/pi05_tiny", flag="--checkpoint")
    assert (source.kind, source.hub_id, hub.downloads) == (
        PolicyKind.DIRECTORY,
        "lerobot/pi05_tiny",
        ["lerobot/pi05_tiny"],
    )


def test_a_cached_repo_is_found_even_beside_a_folder_of_its_owners_name(here, hub):
    """A clone of lerobot/ in the working directory does not hide `lerobot/pi05_tiny` once it is in the cache."""
    (here / "lerobot").mkdir()
    with pytest.raises(CheckpointError, match="lerobot/ exists here"):
        resolve_policy("lerobot/pi05_tiny")
    hub.add("lerobot/pi05_tiny", CHECKPOINT_FILES, cached=True)
    assert resolve_policy("lerobot/pi05_tiny").hub_id == "lerobot/pi05_tiny" and hub.downloads == []


def test_closest_existing_walks_down_from_the_deepest_existing_folder(here):
    assert closest_existing("checkpoints/pi05-tiny-simm") == "checkpoints/pi05-tiny-sim"
    assert closest_existing("checkpoint/pi05-tiny-sm") == "checkpoints/pi05-tiny-sim"
    assert closest_existing(str(here / "checkpoints" / "pi05-tny-sim")) == str(here / "checkpoints" / "pi05-tiny-sim")
    assert closest_existing("tok/tokenizer.jsn") is None  # folders only, unless files are asked for
    assert closest_existing("tok/tokenizer.jsn", dirs_only=False) == "tok/tokenizer.json"
    assert closest_existing("elsewhere/x") is None and local_reason("elsewhere/x") is None
