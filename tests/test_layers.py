"""The import layers of pyproject's [tool.importlinter] contracts hold (tools/lint_imports.py), and the package
list setuptools installs matches the folders, so nothing is left out of a wheel."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))
import lint_imports  # noqa: E402


def test_every_import_contract_holds():
    pytest.importorskip("importlinter")
    result = lint_imports.lint(["--no-logo"])
    assert result.returncode == 0, result.stdout + result.stderr
    assert "0 broken" in result.stdout


def test_the_contracts_see_the_remapped_packages(tmp_path):
    lint_imports.stage(tmp_path)
    assert (tmp_path / "vlash" / "engines" / "base.py").is_file()
    assert (tmp_path / "vlash" / "quant" / "api.py").is_file()
    assert not (tmp_path / "engines").exists() and not (tmp_path / "quant").exists()


def test_setuptools_lists_every_package_folder():
    import tomllib

    setuptools = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    listed, data = set(setuptools["packages"]), set(setuptools["package-data"]) - {"vlash"}
    found = set()
    for name, folder in lint_imports.package_dirs().items():
        for init in folder.rglob("__init__.py"):
            parts = init.parent.relative_to(folder).parts
            found.add(".".join((name, *parts)))
    assert listed - data == found
    for package in data:  # data-only folders (presets, device profiles): listed, with their files
        assert package in listed and list((ROOT / package.removeprefix("vlash.").replace(".", "/")).glob("*.yaml"))
