"""CurveZMQ keys for the policy link: key files in zmq.auth's format, shared by client and server.

`generate_keypair(dir, name)` writes `name.key` (public, safe to copy to the other end) and
`name.key_secret` (keep private: owner-only, mode 0600). The server allows clients whose public key files sit
in a directory (`AllowedKeys`), re-read when that directory changes: a key added is honoured, a key removed
refused, at the next handshake, without a restart.
"""

from __future__ import annotations

import logging
import math
import os
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import zmq
import zmq.auth
from zmq.auth.thread import ThreadAuthenticator

log = logging.getLogger(__name__)
RESCAN_S = 1.0  # an unknown client key re-reads the allow-list directory at most this often
SECRET_BANNER = (
    "#   ZeroMQ CURVE **Secret** Certificate\n"
    "#   DO NOT PROVIDE THIS FILE TO OTHER USERS nor change its permissions.\n\n"
)
PUBLIC_BANNER = (
    "#   ZeroMQ CURVE Public Certificate\n"
    "#   Copy it to the other end (a client's: into the server's allow-list directory).\n\n"
)


def _require_curve() -> None:
    if not zmq.has("curve"):
        raise RuntimeError("this libzmq was built without CURVE support; install pyzmq wheels (bundled libsodium)")


def generate_keypair(directory: str | Path, name: str) -> tuple[Path, Path]:
    """Write `<directory>/<name>.key` and `<name>.key_secret` (replacing existing ones); return (public file, secret
    file). The secret file is created with mode 0600 before the key is written into it, whatever the umask."""
    _require_curve()
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    public, secret = zmq.curve_keypair()
    public_file, secret_file = directory / f"{name}.key", directory / f"{name}.key_secret"
    _write_key_file(secret_file, SECRET_BANNER, public, secret, mode=0o600)
    _write_key_file(public_file, PUBLIC_BANNER, public, None, mode=0o644)
    return public_file, secret_file


def _write_key_file(path: Path, banner: str, public: bytes, secret: bytes | None, mode: int) -> None:
    """Write a certificate in zmq.auth's format to a new file created with `mode` (never wider; the umask may
    narrow it), then rename it over `path`: the key is at no moment in a file with wider permissions."""
    text = f'{banner}metadata\ncurve\n    public-key = "{public.decode()}"\n'
    if secret is not None:
        text += f'    secret-key = "{secret.decode()}"\n'
    temporary = path.with_name(f".{path.name}.{secrets.token_hex(4)}.tmp")
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        os.replace(temporary, path)
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise


def load_public_key(path: str | Path) -> bytes:
    """The z85 public key from a `.key` or `.key_secret` file."""
    public, _ = zmq.auth.load_certificate(str(path))
    return public


def load_keypair(secret_path: str | Path) -> tuple[bytes, bytes]:
    """(public, secret) z85 keys from a `.key_secret` file."""
    public, secret = zmq.auth.load_certificate(str(secret_path))
    if secret is None:
        raise ValueError(f"{secret_path}: has no secret key (pass the .key_secret file)")
    if os.stat(secret_path).st_mode & 0o077:
        log.warning("%s can be read by other users: `chmod 600` it (vlash keys writes it so)", secret_path)
    return public, secret


@dataclass(frozen=True)
class CurveClientKeys:
    """What a client needs: its own key pair and the server's public key (z85 bytes)."""

    public: bytes  # client public key
    secret: bytes  # client secret key
    server_public: bytes  # server public key

    def __post_init__(self) -> None:
        for name in ("public", "secret", "server_public"):
            if len(getattr(self, name)) != 40:
                raise ValueError(f"CurveClientKeys.{name}: expected a 40-char z85 key, got {len(getattr(self, name))}")

    @classmethod
    def from_files(cls, client_secret_file: str | Path, server_public_file: str | Path) -> CurveClientKeys:
        public, secret = load_keypair(client_secret_file)
        return cls(public, secret, load_public_key(server_public_file))

    def apply(self, socket: zmq.Socket) -> None:
        """Configure a socket before connect()."""
        _require_curve()
        socket.curve_publickey, socket.curve_secretkey = self.public, self.secret
        socket.curve_serverkey = self.server_public


@dataclass(frozen=True)
class CurveServerKeys:
    """What a server needs: its key pair and the directory of allowed client public keys (None: any client
    that knows the server key, i.e. encryption without client authentication)."""

    public: bytes
    secret: bytes
    allowed_clients_dir: Path | None = None

    @classmethod
    def from_files(cls, server_secret_file: str | Path, allowed_clients_dir: str | Path | None) -> CurveServerKeys:
        public, secret = load_keypair(server_secret_file)
        return cls(public, secret, None if allowed_clients_dir is None else Path(allowed_clients_dir))

    def apply(self, socket: zmq.Socket) -> None:
        """Configure a socket before bind()."""
        _require_curve()
        socket.curve_secretkey, socket.curve_publickey = self.secret, self.public
        socket.curve_server = True

    def start_authenticator(self, context: zmq.Context):
        """Start the ZAP handler that enforces the allow-list (call before bind; stop() it on shutdown)."""
        auth = ThreadAuthenticator(context)
        auth.start()
        if self.allowed_clients_dir is None:
            auth.configure_curve(domain="*", location=zmq.auth.CURVE_ALLOW_ANY)
        else:
            auth.configure_curve_callback(domain="*", credentials_provider=AllowedKeys(self.allowed_clients_dir))
        return auth


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
