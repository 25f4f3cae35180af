"""A path that does not exist, a LeRobot / openpi checkpoint without a tokenizer, or an --out that is not the command's
to replace is reported before torch is imported (importing it alone takes seconds; loading a fine-tune's weights
first took minutes): every case runs in one interpreter where importing torch, safetensors, tokenizers or
onnxruntime raises, and each must end in one `vlash CMD: error:` line naming what is wrong."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.import_guard import BLOCK_HEAVY_IMPORTS

# Runs `vlash ARGV` for each ARGV of the JSON list in argv[1]; prints one JSON line per run: rc, stderr, and whether
# torch was imported by then.
RUN_ALL = BLOCK_HEAVY_IMPORTS + textwrap.dedent(
    """
    import contextlib, io, json
    from vlash.cli.main import main
    for argv in json.loads(sys.argv[1]):
        err = io.StringIO()
        with contextlib.redirect_stderr(err):
            try:
                code = main(argv)
            except SystemExit as exc:
                code = exc.code
            except BaseException as exc:  # a blocked heavy import, or a bug: the case fails with it
                code = repr(exc)
        print(json.dumps({"argv": argv, "rc": code, "err": err.getvalue(), "torch": "torch" in sys.modules}))
    """
)


def lerobot_without_tokenizer(root: Path) -> Path:
    """A LeRobot checkpoint as LeRobot < 0.6.2 saves it: no tokenizer (the weights are never read here)."""
    path = root / "lerobot"
    path.mkdir()
    (path / "config.json").write_text("{}")
    (path / "policy_preprocessor.json").write_text(json.dumps({"steps": [{"registry_name": "tokenizer_processor"}]}))
    (path / "model.safetensors").write_bytes(b"not read")
    return path


def openpi_without_tokenizer(root: Path) -> Path:
    path = root / "openpi"
    (path / "assets" / "droid").mkdir(parents=True)
    (path / "model.safetensors").write_bytes(b"not read")
    return path


def user_dir(root: Path) -> Path:
    path = root / "mine"
    path.mkdir()
    (path / "notes.txt").write_text("notes")
    return path


def cases(tmp: Path) -> list[tuple[list[str], str]]:
    """(argv, what its error line must say)."""
    nope, out = str(tmp / "nope"), str(tmp / "out")
    lerobot, openpi, mine = str(lerobot_without_tokenizer(tmp)), str(openpi_without_tokenizer(tmp)), str(user_dir(tmp))
    preset = ["--policy", "pi05-tiny", "--random-weights"]
    return [
        (["info", "--policy", nope], f"--policy {nope!r}: no such directory or file"),
        (["bench", "--artifact", nope], f"--artifact {nope!r}: no such directory"),
        (["bench", "--policy", nope], f"--policy {nope!r}: no such directory or file"),
        (["export", "--policy", nope, "--out", out], f"--policy {nope!r}: no such directory or file"),
        (["export", *preset, "--out", mine, "--overwrite"], "holds files vlash did not write (notes.txt)"),
        (["quantize", "--policy", nope, "--scheme", "torch-int8", "--out", out], f"--policy {nope!r}: no such"),
        (["quantize", *preset, "--scheme", "torch-int8", "--out", mine], "holds files vlash did not write"),
        (["train", "--policy", nope, "--out", out], f"--policy {nope!r}: no such directory or file"),
        (["eval", "--task", "reach", "--policy", nope], f"--policy {nope!r}: no such directory or file"),
        (["serve", "--checkpoint", nope], f"--checkpoint {nope!r}: no such directory or file"),
        (["serve", *preset, "--tokenizer", nope], f"--tokenizer {nope!r}: no such file or directory"),
        (["serve", "--checkpoint", lerobot], f"{lerobot} has no tokenizer (LeRobot saves one only from 0.6.2)"),
        (["serve", "--checkpoint", openpi], f"{openpi} has no tokenizer (openpi checkpoints do not include one)"),
        (["convert", "--from", "lerobot", nope, "--out", out], f"source {nope!r}: no such directory"),
        (["convert", "--from", "lerobot", lerobot, "--out", out], f"{lerobot} has no tokenizer"),
        (["convert", "--from", "openpi", openpi, "--out", mine], "holds files vlash did not write"),
        (["demo", "--checkpoint", nope], f"--checkpoint {nope!r} is not a directory"),
    ]


@pytest.mark.sim
def test_path_errors_come_before_torch_is_imported(tmp_path):
    expected = cases(tmp_path)
    run = subprocess.run(
        [sys.executable, "-c", RUN_ALL, json.dumps([argv for argv, _ in expected])],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    results = [json.loads(line) for line in run.stdout.splitlines()]
    assert len(results) == len(expected), run.stdout[-3000:]
    for (argv, says), result in zip(expected, results, strict=True):
        err = result["err"].strip()
        assert result["rc"] == 2 and not result["torch"], (argv, result)
        assert err.startswith(f"vlash {argv[0]}: error: ") and "\n" not in err, (argv, err)
        assert says in err, (argv, err)
