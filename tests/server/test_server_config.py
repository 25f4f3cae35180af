"""ServerConfig checks the endpoint before anything loads: a port libzmq would silently wrap, a malformed address,
a non-loopback bind without CurveZMQ unless `insecure`; the openpi endpoint (no authentication) on a non-loopback
host, or beside CurveZMQ keys, unless `insecure` too."""

from __future__ import annotations

import pytest

from vlash.errors import ConfigError
from vlash.server.config import OpenpiConfig, ServerConfig


@pytest.mark.parametrize(
    "bind",
    ["tcp://127.0.0.1:5555", "tcp://127.0.0.1:0", "tcp://127.0.0.1:*", "tcp://localhost:65535", "tcp://[::1]:5555",
     "tcp://127.0.0.2:5555", "ipc:///tmp/vlash.sock", "inproc://vlash"],
)  # fmt: skip
def test_local_endpoints_are_accepted(bind):
    assert ServerConfig(bind=bind).is_local


@pytest.mark.parametrize(
    ("bind", "match"),
    [
        ("tcp://127.0.0.1:99999", "port 99999 is not in 0..65535"),  # libzmq would serve on 34463
        ("tcp://127.0.0.1:65536", "port 65536"),
        ("tcp://127.0.0.1:", "like tcp://"),
        ("tcp://127.0.0.1", "like tcp://"),
        ("tcp://127.0.0.1:-1", "like tcp://"),
        ("tcp://127.0.0.1:5555/x", "like tcp://"),
        ("tcp://::1:5555", "like tcp://"),  # IPv6 needs brackets
        ("tcp://[::zz]:5555", "like tcp://"),
        ("tcp://[1::2::3]:5555", "not an IPv6 address"),
        ("tcp://300.1.2.3:5555", "not an IPv4 address"),
        ("localhost:5555", "like tcp://"),
        ("udp://127.0.0.1:5555", "like tcp://"),
        ("ipc://", "names no path"),
    ],
)
def test_malformed_endpoints_are_refused_with_the_reason(bind, match):
    with pytest.raises(ConfigError, match=match):
        ServerConfig(bind=bind)


@pytest.mark.parametrize("bind", ["tcp://0.0.0.0:5555", "tcp://*:5555", "tcp://192.168.1.20:5555", "tcp://eth0:5555"])
def test_a_reachable_bind_needs_curve_keys_or_insecure(bind):
    with pytest.raises(ConfigError, match="--insecure") as refused:
        ServerConfig(bind=bind)
    assert "vlash keys" in str(refused.value) and "\n" not in str(refused.value)
    config = ServerConfig(bind=bind, insecure=True)
    assert not config.is_local and config.insecure


def test_a_reachable_bind_with_curve_keys_is_accepted(tmp_path):
    config = ServerConfig(bind="tcp://0.0.0.0:5555", curve_keys=tmp_path, allow_dir=tmp_path)
    assert not config.is_local and not config.insecure


@pytest.mark.parametrize(("field", "value"), [("max_consecutive_cancels", -1), ("max_consecutive_cancels", 1.5),
                                              ("insecure", "yes")])  # fmt: skip
def test_other_new_fields_are_checked(field, value):
    with pytest.raises(ConfigError, match=field):
        ServerConfig(**{field: value})


@pytest.mark.parametrize("host", ["0.0.0.0", "::", "192.168.1.20", "robot-server.lan"])
def test_a_reachable_openpi_host_needs_insecure(host):
    with pytest.raises(ConfigError, match="reachable from other machines without authentication") as refused:
        OpenpiConfig(host=host).check_access(ServerConfig())
    assert "--insecure" in str(refused.value) and "\n" not in str(refused.value)
    OpenpiConfig(host=host).check_access(ServerConfig(insecure=True))  # accepted


def test_the_openpi_endpoint_beside_curve_keys_needs_insecure_even_on_loopback(tmp_path):
    """With --curve-keys/--allow-dir, plaintext ZeroMQ is refused: an unauthenticated websocket would get past them."""
    keys = {"curve_keys": tmp_path, "allow_dir": tmp_path}
    with pytest.raises(ConfigError, match="has no authentication while --curve-keys/--allow-dir require it") as refused:
        OpenpiConfig().check_access(ServerConfig(**keys))
    assert "--insecure" in str(refused.value) and "\n" not in str(refused.value)
    OpenpiConfig().check_access(ServerConfig(**keys, insecure=True))  # accepted
    OpenpiConfig().check_access(ServerConfig())  # loopback, no keys: nothing to say
