"""vlash.atomic: all-or-nothing writes that leave ordinary permissions behind, and replace only what vlash wrote."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest

from vlash.atomic import FILE_LIST, atomic_save, atomic_write, check_replaceable, staged_directory
from vlash.errors import ConfigError


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
    assert sorted(p.name for p in target.iterdir()) == ["b", FILE_LIST]
    assert _mode(target) == 0o750  # what mkdir() would give, not mkdtemp's 0700
    with pytest.raises(KeyboardInterrupt), staged_directory(target) as stage:
        (stage / "c").write_text("3")
        raise KeyboardInterrupt
    assert sorted(p.name for p in target.iterdir()) == ["b", FILE_LIST]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["policy"]


def test_atomic_save_gives_a_path_writer_s_file_the_umask_mode(tmp_path, umask_027):
    import torch
    from safetensors.torch import save_file

    target = atomic_save(tmp_path / "model.safetensors", lambda tmp: save_file({"w": torch.zeros(2)}, tmp))
    assert _mode(target) == 0o640  # save_file alone writes 0600
    assert [p.name for p in tmp_path.iterdir()] == ["model.safetensors"]

    def broken(tmp):
        Path(tmp).write_bytes(b"half")
        raise RuntimeError("disk full")

    with pytest.raises(RuntimeError):
        atomic_save(target, broken)
    assert [p.name for p in tmp_path.iterdir()] == ["model.safetensors"] and target.read_bytes() != b"half"


def _written(target, *names):
    with staged_directory(target) as stage:
        for name in names:
            (stage / name).parent.mkdir(parents=True, exist_ok=True)
            (stage / name).write_text(name)
    return target


def test_the_file_list_names_every_entry_written(tmp_path):
    target = _written(tmp_path / "art", "manifest.json", "policy/config.yaml", "policy/model.safetensors")
    listed = json.loads((target / FILE_LIST).read_text())["files"]
    assert listed == ["manifest.json", "policy/", "policy/config.yaml", "policy/model.safetensors"]
    check_replaceable(target, "--out")  # only what vlash wrote
    _written(target, "other.json")
    assert sorted(p.name for p in target.iterdir()) == ["other.json", FILE_LIST]


@pytest.mark.parametrize("entry", ["MY_NOTES.txt", "my_logs/", ".hidden", "policy/notes.txt", "link"])
def test_a_user_s_entry_makes_the_directory_theirs(tmp_path, entry):
    target = _written(tmp_path / "art", "manifest.json", "policy/config.yaml")
    if entry == "link":
        (target / entry).symlink_to(tmp_path)
    elif entry.endswith("/"):
        (target / entry).mkdir()
        (target / entry / "run.log").write_text("mine")
    else:
        (target / entry).write_text("mine")
    (target / "zz_later.txt").write_text("mine too")  # not the first in sorted order
    with pytest.raises(ConfigError, match=rf"^--out '{target}' holds {entry}, which vlash did not write"):
        check_replaceable(target, "--out")
    with pytest.raises(ConfigError, match=rf"holds {entry}, .* kept in '{target}.new'$"):
        _written(target, "manifest.json")  # the check is made again when the new output is ready
    assert (target / "zz_later.txt").read_text() == "mine too" and (tmp_path / "art.new" / "manifest.json").is_file()
    assert (target / "policy" / "config.yaml").is_file()


def test_a_directory_without_a_file_list_is_never_replaced(tmp_path):
    older = tmp_path / "older"
    older.mkdir()
    (older / "config.yaml").write_text("format: vlash.policy/1\n")
    with pytest.raises(ConfigError, match=rf"^--out '{older}' has no {FILE_LIST}: .* remove it yourself or give a new"):
        check_replaceable(older, "--out")
    (older / FILE_LIST).write_text("[]")  # not a file list vlash writes
    with pytest.raises(ConfigError, match="has no"):
        check_replaceable(older, "--out")
    (tmp_path / "empty").mkdir()
    check_replaceable(tmp_path / "empty")
    check_replaceable(tmp_path / "missing")


def test_a_link_to_a_directory_replaces_the_directory_and_keeps_the_link(tmp_path):
    real = _written(tmp_path / "real", "a")
    (tmp_path / "link").symlink_to(real)
    _written(tmp_path / "link", "b")
    assert (tmp_path / "link").is_symlink() and sorted(p.name for p in real.iterdir()) == ["b", FILE_LIST]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["link", "real"]
