"""CurveZMQ keys for the policy link: key files in zmq.auth's format, shared by client and server.

`generate_keypair(dir, name)` writes `name.key` (public, safe to copy to the other end) and
`name.key_secret` (keep private). The server allows clients whose public key files sit in a directory.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import zmq
import zmq.auth


def _require_curve() -> None:
    if not zmq.has("curve"):
        raise RuntimeError("this libzmq was built without CURVE support; install pyzmq wheels (bundled libsodium)")


def generate_keypair(directory: str | Path, name: str) -> tuple[Path, Path]:
    """Write `<directory>/<name>.key` and `<name>.key_secret`; return (public file, secret file)."""
    _require_curve()
    Path(directory).mkdir(parents=True, exist_ok=True)
    public, secret = zmq.auth.create_certificates(str(directory), name)
    return Path(public), Path(secret)


def load_public_key(path: str | Path) -> bytes:
    """The z85 public key from a `.key` or `.key_secret` file."""
    public, _ = zmq.auth.load_certificate(str(path))
    return public


def load_keypair(secret_path: str | Path) -> tuple[bytes, bytes]:
    """(public, secret) z85 keys from a `.key_secret` file."""
    public, secret = zmq.auth.load_certificate(str(secret_path))
    if secret is None:
        raise ValueError(f"{secret_path}: has no secret key (pass the .key_secret file)")
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
        from zmq.auth.thread import ThreadAuthenticator

        auth = ThreadAuthenticator(context)
        auth.start()
        if self.allowed_clients_dir is None:
            auth.configure_curve(domain="*", location=zmq.auth.CURVE_ALLOW_ANY)
        else:
            auth.configure_curve(domain="*", location=str(self.allowed_clients_dir))
        return auth
