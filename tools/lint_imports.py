"""Check the import layers (the [tool.importlinter] contracts in pyproject.toml) on the installed layout.

import-linter finds a package's modules by walking its folder, and engines/ and quant/ live beside vlash/ in
the repository but install as vlash.engines and vlash.quant (pyproject's package-dir). So this stages the
packages as they install (links, no copies of content) in a temporary folder and runs import-linter there.

    python tools/lint_imports.py          # exit 0 when every contract holds; tests/test_layers.py runs it
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def package_dirs(pyproject: Path = ROOT / "pyproject.toml") -> dict[str, Path]:
    """Import name -> folder of every top-level and remapped package, from pyproject's setuptools settings."""
    setuptools = tomllib.loads(pyproject.read_text())["tool"]["setuptools"]
    mapping = {name: ROOT / folder for name, folder in setuptools["package-dir"].items() if name}
    for name in setuptools["packages"]:
        if "." not in name:
            mapping.setdefault(name, ROOT / name)
    return mapping


def stage(target: Path) -> None:
    """Symlink each package folder to where it lands when installed (vlash.engines -> target/vlash/engines)."""
    for name, folder in sorted(package_dirs().items(), key=lambda item: item[0].count(".")):
        destination = target.joinpath(*name.split("."))
        if "." not in name:  # a top-level package: a real folder, so remapped children can be linked into it
            destination.mkdir(parents=True, exist_ok=True)
            for child in folder.iterdir():
                if child.name != "__pycache__" and not (destination / child.name).exists():
                    (destination / child.name).symlink_to(child)
        else:
            destination.symlink_to(folder, target_is_directory=True)


def lint(extra_args: list[str] | None = None) -> subprocess.CompletedProcess[str]:
    with tempfile.TemporaryDirectory(prefix="vlash-layers-") as tmp:
        staged = Path(tmp)
        stage(staged)
        env = {**os.environ, "PYTHONPATH": str(staged)}
        program = "import sys; from importlinter.cli import lint_imports_command; sys.exit(lint_imports_command())"
        command = [sys.executable, "-c", program, "--config", str(ROOT / "pyproject.toml"), "--no-cache"]
        command += extra_args or []
        return subprocess.run(command, cwd=staged, env=env, capture_output=True, text=True, timeout=300)


def main() -> int:
    result = lint(sys.argv[1:])
    sys.stdout.write(result.stdout)
    sys.stderr.write(result.stderr)
    return result.returncode


if __name__ == "__main__":
    sys.exit(main())
