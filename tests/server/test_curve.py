"""CurveZMQ: allow-listed clients are served, unknown ones never get through the handshake."""

from __future__ import annotations

import pytest

from robot_io.client import PolicyClient
from robot_io.errors import DeadlineExceeded
from robot_io.protocol.curve import CurveClientKeys, generate_keypair
from tests.server.conftest import start_server
from vlash.errors import ConfigError


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
