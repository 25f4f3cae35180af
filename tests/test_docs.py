"""The docs a user reads are self-contained: no reference to design notes outside the repository, and every
relative link of README.md and docs/ (files and #anchors) resolves inside the checkout."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
OUTSIDE = re.compile(r"\.\./shared|ALGORITHMS\.md|DESIGN\.md")


def user_docs() -> list[Path]:
    """README.md and docs/**/*.md; the dated logs under docs/history quote the old notes on purpose."""
    docs = sorted((ROOT / "docs").rglob("*.md"))
    return [ROOT / "README.md", *(p for p in docs if "history" not in p.relative_to(ROOT).parts)]


def all_docs() -> list[Path]:
    return [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"[`*_]", "", heading.strip().lower())
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(path: Path) -> set[str]:
    text = re.sub(r"```.*?```", "", path.read_text(), flags=re.S)
    return {slug(m.group(1)) for m in re.finditer(r"^#{1,6}\s+(.*)$", text, re.M)}


@pytest.mark.parametrize("path", user_docs(), ids=lambda p: str(p.relative_to(ROOT)))
def test_no_reference_outside_the_repository(path: Path):
    hits = [line for line in path.read_text().splitlines() if OUTSIDE.search(line)]
    assert not hits, f"{path.relative_to(ROOT)} cites notes outside the repository: {hits}"


@pytest.mark.parametrize("path", all_docs(), ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_resolves(path: Path):
    text = re.sub(r"```.*?```", "", path.read_text(), flags=re.S)
    broken = []
    for target in LINK.findall(text):
        if re.match(r"[a-z]+://", target) or target.startswith("mailto:"):
            continue
        file_part, _, anchor = target.partition("#")
        resolved = (path.parent / file_part).resolve() if file_part else path
        if not resolved.exists() or anchor and resolved.suffix == ".md" and anchor not in anchors(resolved):
            broken.append(target)
    assert not broken, f"{path.relative_to(ROOT)}: broken links {broken}"


# What the README's commands write in a checkout (vlash demo, keys, export, quantize, eval, train) and builds.
GENERATED = [
    "demo.png",
    "demo.rrd",
    "run.rrd",
    "keys/server.key",
    "artifacts/tiny-int8/manifest.json",
    "out.json",
    "out.png",
    "checkpoints/reach/config.yaml",
    "build/lib/x.py",
    ".venv/bin/python",
    "venv/bin/python",
]


def _git(*args: str):
    import shutil
    import subprocess

    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("needs a git checkout")
    return subprocess.run(["git", "-C", str(ROOT), *args], capture_output=True, text=True)


@pytest.mark.parametrize("path", GENERATED)
def test_generated_files_are_ignored(path: str):
    assert _git("check-ignore", "-q", "--no-index", path).returncode == 0, f"{path} is not in .gitignore"


def test_no_tracked_file_is_ignored():
    assert _git("ls-files", "-ci", "--exclude-standard").stdout == ""


def test_every_row_of_the_run_summary_is_defined_in_one_section():
    """`vlash run`'s summary and `vlash demo`'s table point to docs/METHODS.md "Run summary": every field is there,
    by its printed name and its JSON key."""
    from robot_io.run_summary import LABELS, SUMMARY_DOC

    assert SUMMARY_DOC == 'docs/METHODS.md, "Run summary"'
    text = (ROOT / "docs" / "METHODS.md").read_text()
    section = text.split("\n## Run summary\n", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith("| ")]
    for name, label in LABELS.items():
        row = next((r for r in rows if f"`{name}`" in r), None)
        assert row is not None, f"{name} ({label!r}) is not defined in {SUMMARY_DOC}"
        stem = re.sub(r"( p50| p99)? ms$", "", label)  # one row defines "chunk latency p50 / p99 ms"
        assert stem in row.split("|")[1], f"{SUMMARY_DOC} names {name} otherwise than {label!r}: {row}"
