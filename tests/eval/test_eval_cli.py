"""`vlash eval` end to end on the simulation with the scripted-expert oracle (fast, few episodes)."""

from __future__ import annotations

import json

import numpy as np
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
