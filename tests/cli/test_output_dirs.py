"""Nothing a user owns is deleted: `vlash train`, `export`, `quantize` and `convert` write a missing or empty --out,
replace one that holds the kind of output they write only with --overwrite, and refuse anything else (the user's
files, another kind of vlash output) even with it, in one line before anything loads."""

from __future__ import annotations

import importlib
import json
import os
import stat
from pathlib import Path

import pytest
import yaml

from tests.cli.test_fail_fast import one_line_error, refuse
from vlash.atomic import FILE_LIST, staged_directory
from vlash.cli.main import main
from vlash.output_kinds import (
    ARTIFACT_FORMAT,
    ARTIFACT_MANIFEST,
    POLICY_FORMAT,
    QUANT_MANIFEST,
    TRAIN_LOG,
    OutputKind,
    output_kind,
)

MICRO = str(Path(__file__).parents[1] / "train" / "pi05-micro.yaml")  # ~0.1M parameters


def fake_output(directory: Path, kind: OutputKind) -> Path:
    """A directory vlash wrote (vlash.atomic.staged_directory: with its file list) that holds `kind`'s marker files
    and a stale file its replacement must not keep."""
    with staged_directory(directory) as staging:
        if kind is OutputKind.ENGINE_ARTIFACT:
            (staging / ARTIFACT_MANIFEST).write_text(json.dumps({"format": ARTIFACT_FORMAT}))
        else:
            (staging / "config.yaml").write_text(yaml.safe_dump({"format": POLICY_FORMAT}))
        extra = {OutputKind.TRAINING_RUN: TRAIN_LOG, OutputKind.QUANTIZED_POLICY: QUANT_MANIFEST}.get(kind)
        if extra:
            (staging / extra).write_text("{}")
        (staging / "stale.bin").write_text("from the previous run")
    return directory


def user_files(directory: Path) -> Path:
    directory.mkdir(parents=True)
    (directory / "notes.txt").write_text("notes")
    return directory


def lerobot_source(tmp_path: Path) -> Path:
    """Enough of a LeRobot directory for convert's argument checks (the load is patched away)."""
    source = tmp_path / "lerobot"
    source.mkdir(parents=True, exist_ok=True)
    for name in ("policy_preprocessor.json", "tokenizer.json"):
        (source / name).write_text("{}")
    return source


# command -> (its arguments but --out, the kind of output it writes)
COMMANDS = {
    "export": (["export", "--policy", MICRO, "--random-weights"], OutputKind.ENGINE_ARTIFACT),
    "quantize": (
        ["quantize", "--policy", MICRO, "--random-weights", "--scheme", "torch-int8"],
        OutputKind.QUANTIZED_POLICY,
    ),
    "convert": (["convert", "--from", "lerobot", "SOURCE"], OutputKind.POLICY),
    "train": (["train", "--policy", MICRO, "--tasks", "reach"], OutputKind.TRAINING_RUN),
}
OTHER_KIND = {
    OutputKind.ENGINE_ARTIFACT: OutputKind.QUANTIZED_POLICY,
    OutputKind.QUANTIZED_POLICY: OutputKind.ENGINE_ARTIFACT,
    OutputKind.POLICY: OutputKind.TRAINING_RUN,  # a trained policy is not replaced by a conversion
    OutputKind.TRAINING_RUN: OutputKind.POLICY,  # nor a converted one by a training run
}


# command -> (module, function): its first heavy step, patched to fail the test (each command only its own: a module
# imported while another command's step is patched would keep the patched function)
HEAVY_STEP = {
    "export": ("vlash.engines.export", "export_artifact"),
    "quantize": ("vlash.policies.formats.random_policy", "write_random_policy"),
    "convert": ("vlash.policies.formats.loading", "load_policy"),
    "train": ("vlash.train.trainer", "train"),
}


def nothing_loads(monkeypatch, command: str) -> None:
    """`command`'s heavy step fails the test: a refusal has to come from the argument check."""
    module, name = HEAVY_STEP[command]
    monkeypatch.setattr(importlib.import_module(module), name, refuse(name))


def argv(command: str, tmp_path: Path, out: Path, *extra: str) -> list[str]:
    head, _ = COMMANDS[command]
    head = [str(lerobot_source(tmp_path)) if a == "SOURCE" else a for a in head]
    return [*head, "--out", str(out), *extra]


@pytest.mark.sim
@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_user_files_are_refused_even_with_overwrite(command, monkeypatch, tmp_path, capsys):
    nothing_loads(monkeypatch, command)
    out = user_files(tmp_path / "out")
    for extra in ((), ("--overwrite",)):
        err = one_line_error(argv(command, tmp_path / str(len(extra)), out, *extra), capsys)
        assert "holds files vlash did not write (notes.txt)" in err and "even with --overwrite" in err, err
    assert (out / "notes.txt").read_text() == "notes" and [p.name for p in out.iterdir()] == ["notes.txt"]


@pytest.mark.sim
@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_another_kind_of_output_is_refused_even_with_overwrite(command, monkeypatch, tmp_path, capsys):
    nothing_loads(monkeypatch, command)
    other = OTHER_KIND[COMMANDS[command][1]]
    out = fake_output(tmp_path / "out", other)
    err = one_line_error(argv(command, tmp_path, out, "--overwrite"), capsys)
    assert f"holds {other.value}, not {COMMANDS[command][1].value}" in err and "even with --overwrite" in err, err
    assert (out / "stale.bin").is_file()


@pytest.mark.sim
@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_its_own_kind_needs_overwrite(command, monkeypatch, tmp_path, capsys):
    nothing_loads(monkeypatch, command)
    out = fake_output(tmp_path / "out", COMMANDS[command][1])
    err = one_line_error(argv(command, tmp_path, out), capsys)
    assert f"already holds {COMMANDS[command][1].value}; pass --overwrite to replace it" in err, err
    with pytest.raises(AssertionError, match="ran before the arguments were checked"):  # with it, the work starts
        main(argv(command, tmp_path / "again", out, "--overwrite"))
    assert (out / "stale.bin").is_file()


@pytest.mark.sim
@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_its_own_kind_with_a_user_s_file_in_it_is_refused_even_with_overwrite(command, monkeypatch, tmp_path, capsys):
    """--overwrite replaces what vlash wrote (the files its file list names); a file or folder of the user's among
    them, hidden ones too, makes the directory theirs: refused, naming the first such entry."""
    nothing_loads(monkeypatch, command)
    out = fake_output(tmp_path / "out", COMMANDS[command][1])
    (out / "my_logs").mkdir()
    (out / "my_logs" / "run.log").write_text("mine")
    (out / "MY_NOTES.txt").write_text("notes")
    for extra in ((), ("--overwrite",)):
        err = one_line_error(argv(command, tmp_path / str(len(extra)), out, *extra), capsys)
        assert f"--out '{out}' holds MY_NOTES.txt, which vlash did not write" in err and "--overwrite" in err, err
    (out / "MY_NOTES.txt").unlink()
    (out / ".DS_Store").write_text("")
    err = one_line_error(argv(command, tmp_path, out, "--overwrite"), capsys)
    assert "holds .DS_Store, which vlash did not write" in err, err
    assert (out / "my_logs" / "run.log").read_text() == "mine" and (out / "stale.bin").is_file()


@pytest.mark.sim
@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_an_output_of_an_older_vlash_without_a_file_list_is_refused(command, monkeypatch, tmp_path, capsys):
    nothing_loads(monkeypatch, command)
    out = fake_output(tmp_path / "out", COMMANDS[command][1])
    (out / FILE_LIST).unlink()
    err = one_line_error(argv(command, tmp_path, out, "--overwrite"), capsys)
    assert f"--out '{out}' has no {FILE_LIST}" in err and "remove it yourself or give a new --out" in err, err
    assert (out / "stale.bin").is_file()


def test_several_schemes_apply_the_rule_to_each_schemes_directory(monkeypatch, tmp_path, capsys):
    nothing_loads(monkeypatch, "quantize")
    out = user_files(tmp_path / "variants")  # the parent is written into, never replaced: the user's files may stay
    head = [
        "quantize",
        "--policy",
        MICRO,
        "--random-weights",
        "--scheme",
        "torch-int8",
        "--scheme",
        "onnx-int8-dynamic",
    ]
    fake_output(out / "onnx-int8-dynamic", OutputKind.QUANTIZED_POLICY)
    err = one_line_error([*head, "--out", str(out), "--overwrite"], capsys)
    assert f"{out / 'onnx-int8-dynamic'}' holds {OutputKind.QUANTIZED_POLICY.value}, not an engine artifact" in err
    user_files(out / "torch-int8")
    err = one_line_error([*head, "--out", str(out), "--overwrite"], capsys)
    assert f"{out / 'torch-int8'}' holds files vlash did not write" in err


def test_the_marker_names_are_the_writers(tmp_path):
    from vlash.engines import artifact
    from vlash.policies.formats import vlash_dir
    from vlash.policies.quantized.manifest import MANIFEST_NAME
    from vlash.train.output import TRAIN_LOG as WRITTEN_LOG

    assert (ARTIFACT_MANIFEST, ARTIFACT_FORMAT) == (artifact.MANIFEST, artifact.FORMAT)
    assert (POLICY_FORMAT, QUANT_MANIFEST, TRAIN_LOG) == (vlash_dir.FORMAT, MANIFEST_NAME, WRITTEN_LOG)
    assert output_kind(tmp_path / "missing") is None and output_kind(user_files(tmp_path / "u")) is None
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "config.yaml").write_text("format: [unclosed")
    assert output_kind(broken) is None


def replaced(out: Path, kind: OutputKind) -> bool:
    """`out` is a whole new output of `kind`: the previous one's stale file is gone; every file in it has the mode
    open() gives (model.safetensors too: safetensors' save_file alone makes it 0600, unreadable to another user)."""
    umask = os.umask(0)
    os.umask(umask)
    modes = {p.name: stat.S_IMODE(p.stat().st_mode) for p in out.rglob("*") if p.is_file()}
    assert modes["model.safetensors"] == 0o666 & ~umask and set(modes.values()) == {0o666 & ~umask}, modes
    return output_kind(out) is kind and not (out / "stale.bin").exists() and (out / "stale.bin").parent.is_dir()


def test_export_replaces_an_engine_artifact_with_overwrite(tmp_path):
    pytest.importorskip("onnx")
    out = fake_output(tmp_path / "artifact", OutputKind.ENGINE_ARTIFACT)
    assert main([*COMMANDS["export"][0], "--out", str(out), "--overwrite"]) == 0
    assert replaced(out, OutputKind.ENGINE_ARTIFACT) and (out / "prefill.onnx").is_file()


def test_quantize_replaces_a_quantized_policy_with_overwrite(tmp_path):
    out = fake_output(tmp_path / "int8", OutputKind.QUANTIZED_POLICY)
    assert main([*COMMANDS["quantize"][0], "--out", str(out), "--overwrite", "--threads", "1"]) == 0
    assert replaced(out, OutputKind.QUANTIZED_POLICY) and (out / "model.safetensors").is_file()


def test_convert_replaces_a_policy_directory_with_overwrite(tmp_path):
    from tests.checkpoints.layouts import Stats, write_openpi_pytorch
    from tests.policies.builders import train_wordlevel_tokenizer
    from vlash.policies.pi05 import load_preset
    from vlash.policies.pi05.weights import build_random

    source = write_openpi_pytorch(tmp_path / "openpi", build_random(load_preset(MICRO), seed=1), Stats.random(4, 4))
    out = fake_output(tmp_path / "converted", OutputKind.POLICY)
    tokenizer = train_wordlevel_tokenizer(tmp_path / "tok")
    args = ["convert", "--from", "openpi", str(source), "--out", str(out), "--tokenizer", str(tokenizer)]
    assert main([*args, "--model-config", MICRO, "--overwrite"]) == 0
    assert replaced(out, OutputKind.POLICY) and (out / "model.safetensors").is_file()


def test_train_replaces_a_training_run_with_overwrite(tmp_path, capsys):
    from tests.train.synthetic import dot_episodes
    from vlash.train.dataset import save_episodes

    data = save_episodes(tmp_path / "data.npz", dot_episodes(4))
    out = fake_output(tmp_path / "run", OutputKind.TRAINING_RUN)
    args = ["train", "--policy", MICRO, "--dataset", str(data), "--out", str(out), "--steps", "1", "--batch-size", "4"]
    assert main([*args, "--no-progress", "--no-augment", "--d-max", "2", "--num-threads", "1", "--overwrite"]) == 0
    assert replaced(out, OutputKind.TRAINING_RUN) and (out / "model.safetensors").is_file()
