"""Check the import layers (the [tool.importlinter] contracts in pyproject.toml) on the installed layout.

import-linter finds a package's modules by walking its folder, and engines/ and quant/ live beside vlash/ in
the repository but install as vlash.engines and vlash.quant (pyproject's package-dir). So this stages the
packages as they install (links, no copies of content) in a temporary folder and runs import-linter there.

    python tools/lint_imports.py          # exit 0 when every contract holds; tests/test_layers.py runs it

It also finds what the contracts cannot: import cycles (in-function imports included) and in-function imports that
do not name the optional extra they guard (`import_cycles`, `lazy_imports`; tests/test_layers.py checks both).
"""

from __future__ import annotations

import ast
import os
import re
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


# ---------------------------------------------------------------------------------------------------------------
# What import-linter's contracts cannot say: no import cycle anywhere, and no in-function import but for an extra.
EXTRA_MARK = re.compile(r"#\s*extra:\s*([\w\-]+(?:\s*,\s*[\w\-]+)*)")


def extras(pyproject: Path = ROOT / "pyproject.toml") -> set[str]:
    """The optional extras pyproject declares ([server], [sim], ...)."""
    return set(tomllib.loads(pyproject.read_text())["project"]["optional-dependencies"])


def lazy_imports() -> list[tuple[Path, int, str, list[str] | None]]:
    """Every import inside a function of the installed packages: (file, line, statement, the extras its
    `# extra: NAME[, NAME]` comment names, on its line or the line above; None when it names none)."""
    found = []
    for folder in package_dirs().values():
        for path in sorted(folder.rglob("*.py")):
            lines = path.read_text().splitlines()
            for function in ast.walk(ast.parse("\n".join(lines))):
                if not isinstance(function, ast.FunctionDef | ast.AsyncFunctionDef):
                    continue
                for node in ast.walk(function):
                    if isinstance(node, ast.Import | ast.ImportFrom):
                        marks = [EXTRA_MARK.search(lines[i]) for i in (node.lineno - 1, node.lineno - 2) if i >= 0]
                        named = next((m.group(1) for m in marks if m), None)
                        names = None if named is None else [n.strip() for n in named.split(",")]
                        found.append((path, node.lineno, lines[node.lineno - 1].strip(), names))
    return sorted(set((p, n, s, tuple(x) if x else None) for p, n, s, x in found))  # nested functions: once


def import_cycles() -> list[list[str]]:
    """The strongly connected components of vlash's and robot_io's import graph (in-function imports included), as
    installed; empty when nothing imports in a circle."""
    import grimp

    with tempfile.TemporaryDirectory(prefix="vlash-cycles-") as tmp:
        stage(Path(tmp))
        sys.path.insert(0, tmp)
        try:
            graph = grimp.build_graph("vlash", "robot_io", include_external_packages=False, cache_dir=None)
        finally:
            sys.path.remove(tmp)
    return [sorted(c) for c in strongly_connected(graph.modules, graph.find_modules_directly_imported_by) if len(c) > 1]


def strongly_connected(nodes, edges) -> list[list[str]]:
    """Tarjan's algorithm, iterative."""
    index, low, stack, on_stack, components, counter = {}, {}, [], set(), [], 0
    for root in sorted(nodes):
        if root in index:
            continue
        work = [(root, iter(sorted(edges(root))))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(edges(child)))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                components.append(component)
    return components


def main() -> int:
    result = lint(sys.argv[1:])
    sys.stdout.write(result.stdout)
    sys.stderr.write(result.stderr)
    cycles = import_cycles()
    known = extras() | {"dev"}
    unmarked = [f"{p.relative_to(ROOT)}:{n}: {s}" for p, n, s, x in lazy_imports() if not x or set(x) - known]
    for cycle in cycles:
        print("import cycle: " + " -> ".join(cycle))
    for line in unmarked:
        print("in-function import without '# extra: NAME': " + line)
    return result.returncode or int(bool(cycles or unmarked))


if __name__ == "__main__":
    sys.exit(main())
