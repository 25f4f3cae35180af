"""CurveZMQ: allow-listed clients are served, unknown ones never get through the handshake."""

from __future__ import annotations

import os
import shutil
import stat
from pathlib import Path

import pytest

from robot_io.client import PolicyClient
from robot_io.protocol.curve import CurveClientKeys, generate_keypair, load_keypair, load_public_key
from robot_io.protocol.errors import DeadlineExceeded
from tests.server.conftest import start_server
from vlash.errors import ConfigError
from vlash.server.curve import AllowedKeys


@pytest.fixture(scope="module")
def keys(tmp_path_factory):
    root = tmp_path_factory.mktemp("keys")
    server_dir, allow_dir, other_dir = root / "server", root / "allow", root / "other"
    generate_keypair(server_dir, "server")
    generate_keypair(allow_dir, "robot")  # public key in the allow-list; secret used by the known client
    generate_keypair(other_dir, "stranger")
    return server_dir, allow_dir, other_dir


def test_known_client_is_served_and_unknown_client_refused(policy_dir, keys):
    server_dir, allow_dir, other_dir = keys
    server = start_server(policy_dir, curve_keys=server_dir, allow_dir=allow_dir)
    try:
        known = CurveClientKeys.from_files(allow_dir / "robot.key_secret", server_dir / "server.key")
        with PolicyClient(server.endpoint, timeout_s=5.0, curve=known) as client:
            assert client.connect().action_dim == 2 and client.ping() > 0
        stranger = CurveClientKeys.from_files(other_dir / "stranger.key_secret", server_dir / "server.key")
        with PolicyClient(server.endpoint, timeout_s=1.0, curve=stranger) as client, pytest.raises(DeadlineExceeded):
            client.connect()
        with PolicyClient(server.endpoint, timeout_s=1.0) as plain, pytest.raises(DeadlineExceeded):
            plain.connect()  # no Curve at all
        assert server.counters()["hellos"] == 1
    finally:
        server.stop()


def test_curve_needs_a_server_key_and_an_allow_list(policy_dir, keys, tmp_path):
    server_dir, allow_dir, _ = keys
    with pytest.raises(ConfigError, match="server.key_secret"):
        start_server(policy_dir, curve_keys=tmp_path, allow_dir=allow_dir)
    with pytest.raises(ConfigError, match="no client public keys"):
        start_server(policy_dir, curve_keys=server_dir, allow_dir=tmp_path)
    with pytest.raises(ConfigError, match="go together"):
        start_server(policy_dir, curve_keys=server_dir)


def test_a_key_added_to_the_allow_list_is_honoured_and_a_removed_one_refused_without_a_restart(
    policy_dir, keys, tmp_path
):
    server_dir, allow_dir, _ = keys
    late_allow = tmp_path / "allow"
    late_allow.mkdir()
    shutil.copy(allow_dir / "robot.key", late_allow)
    newcomer_public, newcomer_secret = generate_keypair(tmp_path / "newcomer", "newcomer")
    newcomer = CurveClientKeys.from_files(newcomer_secret, server_dir / "server.key")
    server = start_server(policy_dir, curve_keys=server_dir, allow_dir=late_allow)
    try:
        with PolicyClient(server.endpoint, timeout_s=1.0, curve=newcomer) as client, pytest.raises(DeadlineExceeded):
            client.connect()  # not allowed yet
        shutil.copy(newcomer_public, late_allow)  # allowed while the server runs
        with PolicyClient(server.endpoint, timeout_s=5.0, curve=newcomer) as client:
            assert client.connect().action_dim == 2
        (late_allow / newcomer_public.name).unlink()  # and revoked
        with PolicyClient(server.endpoint, timeout_s=1.0, curve=newcomer) as client, pytest.raises(DeadlineExceeded):
            client.connect()
    finally:
        server.stop()


def test_a_key_file_rewritten_in_place_is_read_again_at_most_once_per_rescan_period(tmp_path):
    first, _ = generate_keypair(tmp_path / "a", "robot")
    second, _ = generate_keypair(tmp_path / "b", "robot")
    allow = tmp_path / "allow"
    allow.mkdir()
    shutil.copy(first, allow / "robot.key")
    now = [100.0]
    allowed = AllowedKeys(allow, rescan_s=1.0, clock=lambda: now[0])
    old_key, new_key = load_public_key(first), load_public_key(second)
    assert allowed.callback("*", old_key) and not allowed.callback("*", new_key)
    (allow / "robot.key").write_bytes(second.read_bytes())  # same file: the directory's mtime does not change
    now[0] += 0.5
    assert not allowed.callback("*", new_key)  # an unknown key re-reads the directory at most once a second
    now[0] += 1.0
    assert allowed.callback("*", new_key) and not allowed.callback("*", old_key)


def test_secret_key_files_are_owner_only_from_the_moment_they_exist(tmp_path, monkeypatch):
    modes_at_rename = {}
    replace = os.replace

    def recording_replace(src, dst):
        modes_at_rename[Path(dst).name] = stat.S_IMODE(os.stat(src).st_mode)
        replace(src, dst)

    monkeypatch.setattr(os, "replace", recording_replace)
    previous = os.umask(0)  # the most permissive umask: the mode must not depend on it
    try:
        public, secret = generate_keypair(tmp_path, "robot")
    finally:
        os.umask(previous)
    assert stat.S_IMODE(secret.stat().st_mode) == 0o600 and modes_at_rename["robot.key_secret"] == 0o600
    assert stat.S_IMODE(public.stat().st_mode) == 0o644
    assert load_keypair(secret)[0] == load_public_key(public)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["robot.key", "robot.key_secret"]  # no temporary left
