"""Every shipped policy lists the files vlash wrote (vlash_files.json, vlash.atomic): the documented recipes that
retrain into checkpoints/NAME with --overwrite replace it, and a file a user adds there makes it theirs (issue 42)."""

from __future__ import annotations

from pathlib import Path

import pytest

from vlash.atomic import FILE_LIST, check_replaceable, listed_entries
from vlash.errors import ConfigError

CHECKPOINTS = Path(__file__).resolve().parents[2] / "checkpoints"
SHIPPED = sorted(path for path in CHECKPOINTS.iterdir() if path.is_dir())


@pytest.mark.parametrize("policy", SHIPPED, ids=lambda path: path.name)
def test_a_shipped_policy_lists_exactly_its_files_and_may_be_replaced(policy):
    on_disk = {path.relative_to(policy).as_posix() for path in policy.rglob("*")}
    assert listed_entries(policy) == on_disk | {FILE_LIST}
    check_replaceable(policy, "--out")  # no ConfigError


def test_a_file_added_to_a_shipped_policy_makes_it_the_users(tmp_path):
    copy = tmp_path / "policy"
    copy.mkdir()
    for path in SHIPPED[0].iterdir():
        (copy / path.name).write_bytes(path.read_bytes())
    (copy / "notes.txt").write_text("mine")
    with pytest.raises(ConfigError, match="holds notes.txt, which vlash did not write"):
        check_replaceable(copy, "--out")
