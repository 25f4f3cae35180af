"""A flag and its config field have one name: every command's old spelling of a renamed flag is refused in one line
that names the new one, and every `vlash` command the docs show parses with today's flags (test_readme_commands.py
runs the README's; this only parses, so it covers every doc and stays fast)."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

from vlash.cli.main import COMMANDS, command_of, parse_args

ROOT = Path(__file__).resolve().parents[2]
RENAMED = [(name, old, new) for name in sorted(COMMANDS) for old, new in command_of(name).renamed.items()]


@pytest.fixture(autouse=True)
def keep_the_thread_wait_policy(monkeypatch):
    monkeypatch.setenv("OMP_WAIT_POLICY", "ACTIVE")  # parsing `vlash serve` would set it for this whole process


def options(name: str) -> set[str]:
    """The options `vlash NAME --help` lists."""
    return set(command_of(name).spellings())


@pytest.mark.parametrize(("name", "old", "new"), RENAMED)
def test_an_old_spelling_is_refused_naming_the_new_one(name, old, new, capsys):
    with pytest.raises(SystemExit) as exited:
        parse_args([name, old, "1"])
    err = capsys.readouterr().err.strip()
    assert exited.value.code == 2 and err.startswith(f"vlash {name}: error: {old} is now {new} ") and "\n" not in err
    assert new in options(name) and old not in options(name)  # the new one is an option; --help lists no old one


def test_the_renames_cover_the_commands_that_renamed_flags():
    assert {name for name, _, _ in RENAMED} == {"run", "demo", "serve", "train", "eval"}


def doc_commands() -> list[tuple[str, list[str]]]:
    """(file, argv) of every `vlash COMMAND ...` line in the bash blocks of README.md and docs/ (not the dated logs
    of docs/history, which quote the commands of their day), with `\\` continuations joined, `# comments`,
    `[optional]` parts and `...` dropped."""
    found = []
    docs = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    for path in docs:
        for block in re.findall(r"```(?:bash|sh|shell)?\n(.*?)```", path.read_text(), re.S):
            for line in block.replace("\\\n", " ").splitlines():
                line = re.sub(r"\s#.*$", "", line).strip()
                for part in line.split("&&"):
                    part = re.sub(r"\[[^\]]*\]", "", part).replace(" ... ", " ").strip()
                    if re.match(r"vlash [a-z]+", part) and part.split()[1] in COMMANDS:
                        found.append((path.name, shlex.split(part)[1:]))
    return found


def test_the_docs_show_commands():
    assert {argv[0] for _, argv in doc_commands()} >= {"run", "serve", "train", "eval", "bench", "demo"}


@pytest.mark.parametrize(("doc", "argv"), doc_commands(), ids=lambda value: " ".join(value)[:60])
def test_every_command_in_the_docs_parses(doc, argv, capsys):
    try:
        parse_args(argv)
    except SystemExit:
        err = capsys.readouterr().err.strip()
        if not re.search(r"arguments? .* (is|are) required", err):  # the doc left out what `...` stands for
            pytest.fail(f"{doc}: vlash {shlex.join(argv)}: {err}")
