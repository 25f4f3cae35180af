"""`vlash train` on a saved synthetic dataset: summary, policy directory, clean config errors."""

from __future__ import annotations

import json
from pathlib import Path

from tests.train.synthetic import dot_episodes
from vlash.cli.main import main
from vlash.train.dataset import save_episodes

MICRO = str(Path(__file__).with_name("pi05-micro.yaml"))


def test_train_command_reuses_a_dataset(tmp_path, capsys):
    data = save_episodes(tmp_path / "data.npz", dot_episodes(4))
    out = tmp_path / "policy"
    args = ["train", "--policy", MICRO, "--dataset", str(data), "--out", str(out), "--steps", "3", "--batch-size", "4"]
    assert main([*args, "--no-progress", "--vision-aux-weight", "1"]) == 2  # its labels need simulator episodes
    assert "does not replay in vlash.sim" in capsys.readouterr().err and not out.exists()
    assert main([*args, "--no-progress", "--json", "--no-augment", "--d-max", "2"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["steps"] == 3 and summary["episodes"] == 4 and summary["out"] == str(out)
    assert (out / "model.safetensors").is_file() and (out / "train_log.json").is_file()


def test_bad_settings_are_clean_errors(tmp_path, capsys):
    assert main(["train", "--out", str(tmp_path / "p"), "--steps", "0"]) == 2
    assert "--steps must be an int >= 1, got 0" in capsys.readouterr().err
    assert main(["train", "--out", str(tmp_path / "p"), "--d-max", "60", "--policy", MICRO]) == 2
    assert "d_max must be an int in [0, horizon=50)" in capsys.readouterr().err
    assert main(["train", "--out", str(tmp_path / "p"), "--ema-decay", "1"]) == 2
    assert "--ema-decay must be in [0, 1), got 1.0" in capsys.readouterr().err


def test_head_and_probe_flags_reach_the_config(tmp_path):
    from vlash.cli.main import parse_args
    from vlash.cli.train_cmd import config_from_args

    flags = ["--grounding-steps", "3", "--target-aux-weight", "1", "--target-aux-layer", "2"]
    flags += ["--expert-target-aux-weight", "0.5", "--expert-target-aux-layer", "1", "--vision-probe-every", "7"]
    config = config_from_args(parse_args(["train", "--out", str(tmp_path / "p"), "--steps", "10", *flags]))
    assert (config.grounding_steps, config.target_aux_weight, config.target_aux_layer) == (3, 1.0, 2)
    assert (config.expert_target_aux_weight, config.expert_target_aux_layer, config.vision_probe_every) == (0.5, 1, 7)
    assert config.vision_aux_weight == 0.0  # unset flags keep TrainConfig's defaults
    assert config.label_tail and not config_from_args(parse_args(["train", "--out", "p", "--no-label-tail"])).label_tail
    assert config.init_from is None
    assert config_from_args(parse_args(["train", "--out", "p", "--init-from", "base"])).init_from == "base"
    assert not (config.task_space or config.compile or config.ema_decay)
    chosen = config_from_args(parse_args(["train", "--out", "p", "--task-space", "--compile", "--ema-decay", "0.99"]))
    assert chosen.task_space and chosen.compile and chosen.ema_decay == 0.99
    mixed = config_from_args(parse_args(["train", "--out", "p", "--mix-prob", "0.25"]))
    assert config.mix_prob == 0.5 and mixed.mix_prob == 0.25
    planned = config_from_args(parse_args(["train", "--out", "p", "--plan-labels", "--moving-share", "0.5"]))
    assert planned.plan_labels and planned.moving_share == 0.5
    assert not config.plan_labels and config.moving_share == 0.0
    assert planned.sample_spec(50).moving_share == 0.5


def test_policy_takes_a_preset_or_a_policy_to_start_from(tmp_path, capsys):
    """--policy is resolved as in every command: a preset is the architecture, a vlash policy directory (or a shipped
    policy) is where training starts (--init-from), with the preset it was built from."""
    from vlash.cli.main import parse_args
    from vlash.cli.train_cmd import config_from_args
    from vlash.policies.names.shipped import shipped_policy_dir

    base = shipped_policy_dir("pi05-tiny-sim")
    for value in ("pi05-tiny-sim", str(base)):
        config = config_from_args(parse_args(["train", "--out", "p", "--policy", value]))
        assert (config.policy, config.init_from) == ("pi05-tiny-96", str(base))
    assert main(["train", "--out", "p", "--policy", str(base), "--init-from", str(base)]) == 2
    assert "drop --init-from" in capsys.readouterr().err
    assert main(["train", "--out", "p", "--policy", "oracle"]) == 2
    assert "vlash train takes a preset" in capsys.readouterr().err


def test_ctrl_c_keeps_the_steps_done_beside_out_never_over_it(tmp_path, capsys, monkeypatch):
    """The issue: Ctrl-C threw all progress away. The steps done go to OUT.interrupted; --out is left as it was."""
    from vlash.train import trainer

    data = save_episodes(tmp_path / "data.npz", dot_episodes(4))
    out = tmp_path / "policy"
    args = ["train", "--policy", MICRO, "--dataset", str(data), "--out", str(out), "--steps", "5", "--batch-size", "4"]
    args += ["--no-progress", "--no-augment", "--d-max", "2", "--num-threads", "1"]
    real_step, calls = trainer.flow_step, []

    def interrupted(*a, **kw):  # Ctrl-C in the 4th step's forward pass: 3 steps are done
        calls.append(1)
        if len(calls) == 4:
            raise KeyboardInterrupt
        return real_step(*a, **kw)

    monkeypatch.setattr(trainer, "flow_step", interrupted)
    assert main(args) == 130
    err = capsys.readouterr().err
    kept = tmp_path / "policy.interrupted"
    assert err == (
        f"vlash train: interrupted at step 3/5: {out} was not replaced; the policy as of step 3 is in {kept} (serve "
        f"or evaluate it as it is, or train on from it: vlash train --init-from {kept} ...)\n"
    )
    assert not out.exists() and json.loads((kept / "train_log.json").read_text())["step"] == 3
    (kept / "notes.txt").write_text("mine")  # OUT.interrupted is vlash's to replace, and only while it is
    calls.clear()
    assert main(args) == 2
    assert "holds notes.txt, which vlash did not write" in capsys.readouterr().err and len(calls) == 0
