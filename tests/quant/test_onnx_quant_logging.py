"""onnxruntime's quantization advice ("Please consider to run pre-processing before quantization"), logged through the
root logger, no longer reaches `vlash quantize`'s output as "WARNING root:" lines: it goes to vlash.quant.onnx_quant
at DEBUG (`vlash -v`), and the root logger's other records pass untouched."""

from __future__ import annotations

import logging

import pytest

pytest.importorskip("onnxruntime")

from vlash.cli.main import main  # noqa: E402
from vlash.quant import onnx_quant  # noqa: E402
from vlash.quant.api import quantize  # noqa: E402
from vlash.quant.calibration import FrameSpec  # noqa: E402

CALIBRATION = FrameSpec(tasks=("reach",), episodes=1, frames_per_episode=1)


def root_warnings(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "root" and r.levelno >= logging.WARNING]


def test_quantize_prints_no_root_warnings(micro_policy_dir, tmp_path, caplog, capfd):
    caplog.set_level(logging.DEBUG, logger=onnx_quant.__name__)
    argv = [
        "quantize",
        "--policy",
        str(micro_policy_dir),
        "--scheme",
        "onnx-int8-dynamic",
        "--out",
        str(tmp_path / "q"),
    ]
    assert main(argv) == 0
    assert root_warnings(caplog) == [] and "WARNING root" not in capfd.readouterr().err
    advice = [r.getMessage() for r in caplog.records if r.name == onnx_quant.__name__ and r.levelno == logging.DEBUG]
    assert len(advice) == 2 and all("pre-processing" in text for text in advice), advice  # one per graph, kept


@pytest.mark.sim
def test_static_quantization_is_quiet_too(micro_policy_dir, tmp_path, caplog):
    quantize(micro_policy_dir, tmp_path / "static", "onnx-int8-static", calibration=CALIBRATION)
    assert root_warnings(caplog) == []


def test_only_onnxruntimes_advice_is_demoted(caplog):
    with onnx_quant.root_advice_to_debug():
        logging.warning("the user's own warning")  # from this file, not onnxruntime's
    assert root_warnings(caplog) == ["the user's own warning"]
