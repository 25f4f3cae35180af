"""`vlash eval` end to end on the simulation with the scripted-expert oracle (fast, few episodes)."""

from __future__ import annotations

import json

import numpy as np
import pytest
from PIL import Image

from vlash.cli.main import main


def test_eval_oracle_writes_table_json_and_plot(tmp_path, capsys):
    out_json, out_png = tmp_path / "r.json", tmp_path / "r.png"
    args = [
        "eval",
        "--task",
        "intercept",
        "--policy",
        "oracle",
        "--modes",
        "sync,naive,vlash,faster",
        "--delays",
        "0,4",
        "--episodes",
        "6",
        "--workers",
        "1",
        "--json",
        str(out_json),
        "--plot",
        str(out_png),
    ]
    assert main(args) == 0
    table = capsys.readouterr().out
    assert "faster" in table and "reaction ms" in table
    summary = json.loads(out_json.read_text())
    cells = {(c["mode"], c["delay"]): c for c in summary["cells"]}
    assert len(cells) == 8 and len(summary["episodes"]) == 48
    # the mechanism: a stale state makes naive jump at chunk boundaries, the future state does not
    assert cells[("naive", 4)]["boundary_jump"] > 3 * cells[("vlash", 4)]["boundary_jump"]
    # streaming the first actions after one denoise step reacts sooner than waiting for the chunk
    assert cells[("faster", 4)]["reaction_mean_s"] < cells[("sync", 4)]["reaction_mean_s"]
    image = np.asarray(Image.open(out_png))
    assert image.shape[0] > 200 and image.std() > 10


def test_eval_rejects_bad_arguments(capsys):
    assert main(["eval", "--task", "reach", "--policy", "/no/such/dir"]) == 2
    assert "no such directory" in capsys.readouterr().err
    assert (
        main(["eval", "--task", "reach", "--policy", "oracle", "--modes", "naive", "--delays", "12", "--episodes", "1"])
        == 2
    )
    assert "delay 12 > execution horizon 10" in capsys.readouterr().err
    assert main(["eval", "--task", "reach", "--policy", "oracle", "--modes", "sync,warp", "--episodes", "1"]) == 2
    err = capsys.readouterr().err
    assert "--modes: each mode must be one of" in err and "got 'warp'" in err and err.count("\n") == 1
    assert main(["eval", "--task", "reach", "--policy", "oracle", "--record", "r.rrd", "--record-episodes", "0"]) == 2
    assert capsys.readouterr().err.strip().endswith("--record-episodes must be >= 1, got 0")


def _reach(tmp_path, name: str, *extra: str) -> dict:
    out = tmp_path / f"{name}.json"
    args = ["eval", "--task", "reach", "--policy", "oracle", "--modes", "sync", "--delays", "2", "--episodes", "2",
            "--workers", "1", "--json", str(out), *extra]  # fmt: skip
    assert main(args) == 0
    return json.loads(out.read_text())


def test_the_report_split_runs_its_own_seeds(tmp_path, capsys):
    dev, report = _reach(tmp_path, "dev"), _reach(tmp_path, "report", "--split", "report")
    assert [e["seed"] for e in dev["episodes"]] == [0, 1]
    assert [e["seed"] for e in report["episodes"]] == [100_000, 100_001] and report["settings"]["seed"] == 100_000
    assert "seeds 100000-100001" in capsys.readouterr().out
    assert [e["seed"] for e in _reach(tmp_path, "own", "--split", "report", "--seed", "7")["episodes"]] == [7, 8]


def test_state_source_commanded_reaches_the_executor(tmp_path):
    observed, commanded = _reach(tmp_path, "observed"), _reach(tmp_path, "commanded", "--state-source", "commanded")
    assert observed["settings"]["executor"]["state_source"] == "observed"
    assert commanded["settings"]["executor"]["state_source"] == "commanded"
    jerk = lambda summary: [e["jerk"] for e in summary["episodes"]]  # noqa: E731
    assert jerk(commanded) != jerk(observed)  # sync re-plans from its last command, not the lagging arm


def test_faster_can_replan_every_step(capsys):
    args = ["eval", "--task", "reach", "--policy", "oracle", "--modes", "sync,faster", "--delays", "4",
            "--execution-horizon", "1", "--episodes", "1", "--workers", "1"]  # fmt: skip
    assert main(args) == 0, capsys.readouterr().err


def test_record_replays_the_first_episodes_the_sweep_measured(tmp_path, capsys):
    pytest.importorskip("rerun")  # the [viz] extra
    from robot_io.rerun_trace import read_recording

    summary = _reach(tmp_path, "rec", "--modes", "naive,vlash", "--record", str(tmp_path / "e.rrd"))
    recording = read_recording(tmp_path / "e.rrd")
    seed = summary["settings"]["seed"]
    for mode in ("naive", "vlash"):
        root = f"{mode}/d2/seed{seed}"
        measured = next(e for e in summary["episodes"] if e["mode"] == mode and e["seed"] == seed)
        replayed = json.loads(recording[f"{root}/summary"]["TextDocument:text"][0][0].strip("`json\n"))
        assert replayed.keys() == measured.keys()  # deterministic: the very episode the table counted
        for key, value in measured.items():
            assert replayed[key] == (value if isinstance(value, str | bool) else pytest.approx(value, rel=1e-6)), key
        steps = len(recording[f"{root}/held"]["step"])
        assert steps == measured["steps"] and len(recording[f"{root}/camera/base_0_rgb"]["step"]) == steps
        assert recording[f"{root}/chunks"]["TextLog:text"][0][0].startswith("chunk 1 (sync)")
    assert not any(key.endswith(f"seed{seed + 1}/held") for key in recording)  # --record-episodes 1
    assert f"wrote {tmp_path / 'e.rrd'}" in capsys.readouterr().out


def test_the_table_fits_100_columns_unless_wide_is_asked_for(capsys, monkeypatch):
    """On a terminal of 200 columns the table stays within 100; --wide prints every column (jerk, boundary jump)."""
    monkeypatch.setenv("COLUMNS", "200")
    args = ["eval", "--task", "reach", "--policy", "oracle", "--modes", "ensemble", "--delays", "2", "--episodes", "1",
            "--workers", "1"]  # fmt: skip
    assert main(args) == 0
    narrow = capsys.readouterr().out.splitlines()
    assert main([*args, "--wide"]) == 0
    wide = capsys.readouterr().out.splitlines()
    assert max(map(len, narrow)) <= 100 < max(map(len, wide))
    assert not any("jerk" in line for line in narrow if "│" in line or "┃" in line)
    assert any("jerk" in line and "boundary_jump" in line for line in wide if "┃" in line)
