"""The README's install lines for a robot computer with LeRobot, read as a user reads them. CI cannot install LeRobot
(its torch < 2.12 is PyPI's CUDA build, gigabytes), so this checks what the lines ask for: the `[lerobot]` extra,
which brings LeRobot's Feetech driver that the shipped SO-101 config needs, and no `-c constraints-dev.txt`, whose
torch==2.13 LeRobot cannot use."""

from __future__ import annotations

import re
import shlex
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def install_section() -> str:
    text = (ROOT / "README.md").read_text()
    start = text.index("## Install")
    return text[start : text.index("\n## ", start + 1)]


def lerobot_install_lines() -> list[str]:
    """Every `pip install ...` of the Install section that installs vlash's lerobot extra (table cells, code)."""
    section = install_section()
    commands = re.findall(r"`(pip install [^`]+)`", section) + re.findall(r"^(pip install .+)$", section, re.M)
    return [c for c in commands if "[lerobot]" in c]


def test_the_lerobot_install_lines_take_the_extra_and_never_the_dev_constraints():
    lines = lerobot_install_lines()
    assert sorted(lines) == ['pip install ".[lerobot]"', 'pip install "vlash[lerobot]"'], lines  # index, checkout
    for line in lines:
        argv = shlex.split(line)
        assert "-c" not in argv and "--constraint" not in argv and "constraints-dev.txt" not in line, line
        assert argv[-1] in ("vlash[lerobot]", ".[lerobot]"), line


def test_the_lerobot_extra_brings_the_driver_the_docs_promise():
    extra = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]["lerobot"]
    lerobot = [r for r in extra if re.match(r"lerobot\b", r)]
    assert len(lerobot) == 1 and re.fullmatch(r"lerobot\[([\w,-]+)\]>=0\.4", lerobot[0]), extra
    assert "feetech" in re.search(r"\[(.*)\]", lerobot[0]).group(1).split(",")
    row = next(line for line in install_section().splitlines() if '`pip install "vlash[lerobot]"`' in line)
    assert "`lerobot[feetech]`" in row and "SO-101" in row  # the shipped configs/robots/so101.yaml: a Feetech arm
    assert '`"lerobot[dynamixel]"`' in row and "Koch" in row  # the arms the extra does not cover: what they add
    assert "Python 3.12" in row
    assert "never with `-c constraints-dev.txt`" in install_section()
