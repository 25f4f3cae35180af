"""The `vlash` entry point imports a command's module only when that command runs: `vlash run` (the robot
computer's command) must work without torch, `vlash --help` lists every command without importing any, and no
command's module imports torch before the command checked its arguments."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from tests.import_guard import BLOCK_HEAVY_IMPORTS
from vlash.cli.main import COMMANDS, command_of

BLOCKED = BLOCK_HEAVY_IMPORTS + textwrap.dedent(
    """
    from vlash.cli.main import COMMANDS, main
    try:
        main(sys.argv[1:])
    except SystemExit as exc:
        assert exc.code == 0, exc.code
    loaded = sorted(m for m in sys.modules if m in {module for module, _ in COMMANDS.values()})
    print("loaded", loaded)
    """
)


def run_blocked(*argv: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", BLOCKED, *argv], capture_output=True, text=True, timeout=60)


def test_run_help_works_with_torch_blocked():
    out = run_blocked("run", "--help")
    assert out.returncode == 0, out.stderr[-2000:]
    assert "--server" in out.stdout and "usage: vlash run" in out.stdout
    assert "loaded ['vlash.cli.run_cmd']" in out.stdout


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_every_commands_help_works_with_torch_blocked(name):
    """A command's module imports no torch: its arguments (paths above all) are checked before torch loads."""
    out = run_blocked(name, "--help")
    assert out.returncode == 0, out.stderr[-2000:]
    assert f"usage: vlash {name}" in out.stdout and f"'{COMMANDS[name][0]}'" in out.stdout.splitlines()[-1]


def test_top_level_help_lists_every_command_without_importing_one():
    out = run_blocked("--help")
    assert out.returncode == 0, out.stderr[-2000:]
    for name in COMMANDS:
        assert f"\n    {name} " in out.stdout, name
    assert "loaded []" in out.stdout


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_table_help_matches_the_commands_own_parser(name):
    command = command_of(name)
    assert (command.name, command.help) == (name, COMMANDS[name][1])
