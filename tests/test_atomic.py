"""vlash.atomic: all-or-nothing writes that leave ordinary permissions behind."""

from __future__ import annotations

import os
import stat

import pytest

from vlash.atomic import atomic_write, staged_directory


@pytest.fixture
def umask_027():
    old = os.umask(0o027)
    yield
    os.umask(old)


def _mode(path) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


def test_atomic_write_replaces_whole_and_follows_the_umask(tmp_path, umask_027):
    target = tmp_path / "sub" / "f.bin"
    atomic_write(target, lambda f: f.write(b"one"))
    atomic_write(target, lambda f: f.write(b"two"))
    assert target.read_bytes() == b"two"
    assert _mode(target) == 0o640  # what open() would give, not mkstemp's 0600
    assert [p.name for p in target.parent.iterdir()] == ["f.bin"]


def test_atomic_write_failure_keeps_the_old_file_and_no_temp(tmp_path):
    target = tmp_path / "f.bin"
    atomic_write(target, lambda f: f.write(b"old"))

    def broken(f):
        f.write(b"half")
        raise RuntimeError("disk full")

    with pytest.raises(RuntimeError):
        atomic_write(target, broken)
    assert target.read_bytes() == b"old"
    assert [p.name for p in tmp_path.iterdir()] == ["f.bin"]


def test_staged_directory_replaces_whole_with_umask_mode(tmp_path, umask_027):
    target = tmp_path / "policy"
    with staged_directory(target) as stage:
        (stage / "a").write_text("1")
    with staged_directory(target) as stage:
        (stage / "b").write_text("2")
    assert [p.name for p in target.iterdir()] == ["b"]
    assert _mode(target) == 0o750  # what mkdir() would give, not mkdtemp's 0700
    with pytest.raises(KeyboardInterrupt), staged_directory(target) as stage:
        (stage / "c").write_text("3")
        raise KeyboardInterrupt
    assert [p.name for p in target.iterdir()] == ["b"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["policy"]
