"""Optional CurveZMQ for the server socket: the key pair in `<keys>/server.key_secret` and an allow-list directory of
client public keys (`*.key`); unknown clients fail the handshake. The key files are `robot_io.protocol.curve`'s
(`vlash keys` writes them); authenticating clients is the server's alone, so it lives here, not on the robot side.

The allow-list (`AllowedKeys`) is re-read when its directory changes: a key added is honoured, a key removed refused,
at the next handshake, without a restart.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable
from pathlib import Path

import zmq
import zmq.auth
from zmq.auth.thread import ThreadAuthenticator

from robot_io.protocol.curve import load_keypair, load_public_key, require_curve
from vlash.errors import ConfigError

log = logging.getLogger(__name__)
SERVER_KEY_NAME = "server"
RESCAN_S = 1.0  # an unknown client key re-reads the allow-list directory at most this often


class CurveServer:
    """No-op when `keys_dir` is None; else configures the ROUTER and runs the ZAP authenticator (pyzmq's) that lets
    only the clients whose public keys are in `allow_dir` through the handshake."""

    def __init__(self, context: zmq.Context, keys_dir: Path | None, allow_dir: Path | None) -> None:
        self._context = context
        self._keys: tuple[bytes, bytes] | None = None  # the server's (public, secret) z85 keys
        self._allow_dir = None if allow_dir is None else Path(allow_dir)
        self._auth: ThreadAuthenticator | None = None
        if keys_dir is None:
            return
        secret = Path(keys_dir) / f"{SERVER_KEY_NAME}.key_secret"
        if not secret.is_file():
            raise ConfigError(
                f"no server key pair at {secret}; create one with `vlash keys --out {keys_dir} --name server`"
            )
        if self._allow_dir is None or not any(self._allow_dir.glob("*.key")):
            raise ConfigError(f"allow-list directory {allow_dir} holds no client public keys (*.key)")
        require_curve()
        try:
            self._keys = load_keypair(secret)
        except (ValueError, OSError) as exc:
            raise ConfigError(f"cannot load {secret}: {exc}") from exc

    @property
    def enabled(self) -> bool:
        return self._keys is not None

    @property
    def note(self) -> str:
        return (
            " (CurveZMQ on, clients allow-listed)"
            if self.enabled
            else " without CurveZMQ: pass --curve-keys/--allow-dir"
        )

    def start(self) -> None:
        """Start the authenticator (before the socket binds; `stop()` it on shutdown)."""
        if self._keys is not None and self._auth is None:
            self._auth = ThreadAuthenticator(self._context)
            self._auth.start()
            self._auth.configure_curve_callback(domain="*", credentials_provider=AllowedKeys(self._allow_dir))

    def configure(self, socket: zmq.Socket) -> None:
        """Call before bind()."""
        if self._keys is not None:
            socket.curve_publickey, socket.curve_secretkey = self._keys
            socket.curve_server = True

    def stop(self) -> None:
        if self._auth is not None:
            self._auth.stop()
            self._auth = None


class AllowedKeys:
    """The client public keys in the `*.key` files of a directory, for the ZAP handler (`callback`).

    Re-read at a handshake when the directory's mtime changed (a file added, removed or renamed into it: a key
    copied in is honoured, a key deleted refused), and when an unknown key knocks and the last read is RESCAN_S
    old (a file rewritten in place, or still being written at the last read). A file that cannot be read as a
    key is skipped with a warning. The directory's stat on each handshake is the only steady cost.
    """

    def __init__(self, directory: str | Path, rescan_s: float = RESCAN_S, clock: Callable[[], float] = time.monotonic):
        self.directory, self._rescan_s, self._clock = Path(directory), rescan_s, clock
        self.keys: frozenset[bytes] = frozenset()
        self._mtime_ns: int | None = None
        self._read_at = -math.inf
        self.reload()

    def reload(self) -> None:
        self._mtime_ns, self._read_at = self._directory_mtime_ns(), self._clock()
        keys = set()
        for path in sorted(self.directory.glob("*.key")):
            try:
                key = load_public_key(path)
            except (OSError, ValueError) as exc:
                log.warning("allow-list: skipping %s: %s", path, exc)
                continue
            if len(key) == 40:
                keys.add(key)
            else:
                log.warning("allow-list: skipping %s: not a 40-char z85 public key", path)
        self.keys = frozenset(keys)

    def callback(self, domain: str, key: bytes) -> bool:
        """pyzmq's credentials-provider hook: True lets the client (z85 `key`) through the handshake."""
        changed = self._directory_mtime_ns() != self._mtime_ns
        if changed or (key not in self.keys and self._clock() - self._read_at >= self._rescan_s):
            self.reload()
        return key in self.keys

    def _directory_mtime_ns(self) -> int | None:
        try:
            return self.directory.stat().st_mtime_ns
        except OSError:  # the directory went away: no key is allowed until it is back
            return None
