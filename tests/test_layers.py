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


def test_nothing_imports_in_a_circle():
    """Not even inside a function: the import graph of vlash and robot_io as installed (grimp reads every import
    statement, wherever it is) has no cycle."""
    pytest.importorskip("grimp")
    assert lint_imports.import_cycles() == []


def test_every_in_function_import_names_the_extra_it_guards():
    """An import inside a function is there only to keep an optional extra optional: it says which one
    (`# extra: NAME`, on its line or the line above), and the extra exists."""
    known = lint_imports.extras() | {"dev"}
    lazy = lint_imports.lazy_imports()
    assert lazy, "no in-function import found: the scan itself is broken"
    unmarked = [f"{path.relative_to(ROOT)}:{line}: {stmt}" for path, line, stmt, marks in lazy if not marks]
    assert not unmarked, "\n".join(unmarked)
    unknown = [(str(path), marks) for path, _, _, marks in lazy if set(marks) - known]
    assert not unknown, unknown
