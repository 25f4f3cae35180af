"""Every command checks its arguments, endpoints, ports, tasks and files before it loads anything heavy: a bad
argument is one line (`vlash CMD: error: ...`, rc 2), and the loader, patched here to fail the test, is never
called. Before, several of these errors came after a 10-34 s model load, or never (a worker pool traceback)."""

from __future__ import annotations

import socket
import sys

import pytest

from vlash.cli.main import main
from vlash.policies.names.shipped import available_shipped, shipped_policy_dir

SHIPPED = "pi05-tiny-sim"


def refuse(what: str):
    def called(*args, **kwargs):
        raise AssertionError(f"{what} ran before the arguments were checked")

    return called


def one_line_error(argv: list[str], capsys) -> str:
    """Run `vlash ARGV`; assert rc 2 and a single `vlash CMD: error:` line on stderr; return that line."""
    try:
        code = main(argv)
    except SystemExit as exc:  # argparse's own checks
        code = exc.code
    err = capsys.readouterr().err.strip()
    assert code == 2, err
    assert err.startswith(f"vlash {argv[0]}: error: ") and "\n" not in err, err
    return err


@pytest.fixture
def blocked(tmp_path):
    """A path whose folder cannot be created: a file is in the way."""
    (tmp_path / "file").write_text("")
    return tmp_path / "file" / "out"


@pytest.fixture
def busy_port():
    """A loopback TCP port another process (this test) is listening on."""
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        yield listener.getsockname()[1]


@pytest.fixture
def serve_cannot_load(monkeypatch):
    import vlash.cli.serve_run as serve_run

    monkeypatch.setattr(serve_run, "load_runtime", refuse("the policy load"))


def test_serve(serve_cannot_load, busy_port, tmp_path, capsys):
    preset = ["serve", "--policy", "pi05-tiny", "--random-weights"]
    err = one_line_error([*preset, "--bind", f"tcp://127.0.0.1:{busy_port}"], capsys)
    assert f"--bind tcp://127.0.0.1:{busy_port}: cannot listen there" in err
    err = one_line_error([*preset, "--openpi-port", str(busy_port)], capsys)
    assert f"--openpi-port {busy_port} on 127.0.0.1: cannot listen there" in err
    assert "no such file" in one_line_error([*preset, "--tokenizer", str(tmp_path / "nope.model")], capsys)
    assert "add --random-weights" in one_line_error(["serve", "--policy", "pi05-tiny"], capsys)
    assert "no such directory" in one_line_error(["serve", "--policy", "./no_such_policy"], capsys)
    assert "expected an integer >= 1" in one_line_error([*preset, "--threads", "0"], capsys)


@pytest.mark.skipif(SHIPPED not in available_shipped(), reason="checkpoints/ not in this install")
def test_serve_refuses_checkpoint_options_a_vlash_directory_does_not_take(serve_cannot_load, capsys):
    err = one_line_error(["serve", "--policy", SHIPPED, "--asset-id", "droid"], capsys)
    assert "is a shipped policy, which takes no options" in err


def test_bench(monkeypatch, capsys):
    import vlash.bench as bench

    monkeypatch.setattr(bench, "make_engine", refuse("the engine build"))
    assert "--steps must be an int >= 1, got 0" in one_line_error(
        ["bench", "--policy", "pi05-tiny", "--steps", "0"], capsys
    )
    err = one_line_error(["bench", "--policy", "pi05-tiny", "--engine", "onnxruntime", "--compile", "default"], capsys)
    assert "apply to the torch engine" in err
    if SHIPPED in available_shipped():
        err = one_line_error(["bench", "--policy", str(shipped_policy_dir(SHIPPED))], capsys)
        assert "is a policy directory (vlash); vlash bench takes a preset" in err and "--policy pi05-tiny-96" in err


def test_export(monkeypatch, blocked, tmp_path, capsys):
    import vlash.engines.export as export

    monkeypatch.setattr(export, "export_artifact", refuse("the export"))
    out = ["--out", str(tmp_path / "artifact")]
    assert "add --random-weights" in one_line_error(["export", "--policy", "pi05-tiny", *out], capsys)
    err = one_line_error(["export", "--policy", "pi05-tiny", "--random-weights", "--precision", "int8", *out], capsys)
    assert "--engine onnxruntime precision must be one of fp32, fp16" in err
    err = one_line_error(["export", "--policy", "pi05-tiny", "--random-weights", "--out", str(blocked)], capsys)
    assert "is a file, not a folder" in err


def test_quantize(monkeypatch, blocked, tmp_path, capsys):
    import vlash.policies.formats.loading as policy_dir
    import vlash.policies.formats.random_policy as random_policy

    monkeypatch.setattr(policy_dir, "load_policy", refuse("the policy load"))
    monkeypatch.setattr(random_policy, "write_random_policy", refuse("the random policy"))
    args = ["quantize", "--policy", "pi05-tiny", "--random-weights", "--scheme", "torch-int8"]
    out = ["--out", str(tmp_path / "q")]
    err = one_line_error([*args, *out, "--check", "--min-cosine", "2"], capsys)  # was found after quantizing
    assert "--min-cosine must be in [-1, 1], got 2.0" in err
    assert "is a file, not a folder" in one_line_error([*args, *out, "--json", str(blocked)], capsys)
    assert "add --random-weights" in one_line_error(
        ["quantize", "--policy", "pi05-tiny", "--scheme", "torch-int8", *out], capsys
    )


@pytest.mark.sim
def test_eval(monkeypatch, blocked, capsys):
    import vlash.eval.sweep as sweep

    monkeypatch.setattr(sweep, "ProcessPoolExecutor", refuse("a worker pool"))
    args = ["eval", "--episodes", "1", "--workers", "2"]
    err = one_line_error([*args, "--task", "fly", "--policy", "oracle"], capsys)  # was a BrokenProcessPool traceback
    assert "invalid choice: 'fly'" in err  # one of the tasks, checked by the parser
    monkeypatch.setattr(sweep, "load_chunk_policy", refuse("the policy load"))
    assert "is a preset" in one_line_error([*args, "--task", "reach", "--policy", "pi05-tiny"], capsys)
    err = one_line_error([*args, "--task", "reach", "--policy", "oracle", "--json", str(blocked)], capsys)
    assert "is a file, not a folder" in err


@pytest.mark.sim
def test_train(monkeypatch, blocked, tmp_path, capsys):
    import vlash.train.trainer as trainer

    monkeypatch.setattr(trainer, "train", refuse("training"))
    out = ["--out", str(tmp_path / "p")]
    assert "unknown task 'fly'" in one_line_error(["train", *out, "--tasks", "reach,fly"], capsys)
    assert "vlash train takes a preset" in one_line_error(["train", *out, "--policy", "oracle"], capsys)
    assert "is a file, not a folder" in one_line_error(["train", *out, "--dataset", str(blocked)], capsys)
    assert "no such directory" in one_line_error(["train", *out, "--init-from", str(tmp_path / "base")], capsys)


def test_convert(monkeypatch, tmp_path, capsys):
    import vlash.policies.formats.loading as policy_dir
    import vlash.policies.formats.openpi_jax as openpi_jax

    monkeypatch.setattr(policy_dir, "load_policy", refuse("the checkpoint load"))
    monkeypatch.setattr(openpi_jax, "convert_openpi_jax", refuse("the openpi conversion"))
    source = tmp_path / "lerobot"
    source.mkdir()
    (source / "policy_preprocessor.json").write_text("{}")
    args = ["convert", "--from", "lerobot", str(source)]
    err = one_line_error([*args, "--out", str(source / "vlash")], capsys)  # would be replaced by its own output
    assert "inside) the source" in err
    err = one_line_error([*args, "--out", str(tmp_path / "x"), "--tokenizer", str(tmp_path / "nope.model")], capsys)
    assert "--tokenizer" in err and "no such file" in err


def test_info(monkeypatch, capsys):
    import vlash.policies.pi05.model as model

    monkeypatch.setattr(model, "Pi05Model", refuse("building the model"))
    assert "no such directory" in one_line_error(["info", "--policy", "./no_such_policy"], capsys)
    assert "vlash info takes a preset" in one_line_error(["info", "--policy", "oracle"], capsys)


def test_every_command_with_a_model_is_covered_here():
    tested = {name[len("test_") :] for name in dir(sys.modules[__name__]) if name.startswith("test_")}
    assert {"serve", "bench", "export", "quantize", "eval", "train", "convert", "info"} <= tested
