"""`vlash keys`: the secret key file is owner-only (0600), also when it replaces an older world-readable one."""

from __future__ import annotations

import os
import stat

from vlash.cli.main import main


def test_keys_writes_the_secret_owner_only_whatever_the_umask(tmp_path, capsys):
    previous = os.umask(0o022)  # a usual umask: files 0644 unless created otherwise
    try:
        assert main(["keys", "--out", str(tmp_path), "--name", "arm1"]) == 0
        old_secret = tmp_path / "old.key_secret"
        old_secret.write_text("stale")
        old_secret.chmod(0o644)  # as vlash keys used to write it
        assert main(["keys", "--out", str(tmp_path), "--name", "old"]) == 2  # a key pair is not replaced unasked
        assert main(["keys", "--out", str(tmp_path), "--name", "old", "--overwrite"]) == 0
    finally:
        os.umask(previous)
    for name in ("arm1", "old"):
        assert stat.S_IMODE((tmp_path / f"{name}.key_secret").stat().st_mode) == 0o600
        assert stat.S_IMODE((tmp_path / f"{name}.key").stat().st_mode) == 0o644
    assert "0600" in capsys.readouterr().out
