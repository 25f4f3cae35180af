"""CurveZMQ keys for the policy link: key files in zmq.auth's format, shared by client and server, and what a client
sets on its socket (`CurveClientKeys`).

`generate_keypair(dir, name)` writes `name.key` (public, safe to copy to the other end) and
`name.key_secret` (keep private: owner-only, mode 0600). The server's side, its key pair on the socket and the
allow-list of client keys, is vlash.server.curve.
"""

from __future__ import annotations

import logging
import os
import secrets
from dataclasses import dataclass
from pathlib import Path

import zmq
import zmq.auth

log = logging.getLogger(__name__)
SECRET_BANNER = (
    "#   ZeroMQ CURVE **Secret** Certificate\n"
    "#   DO NOT PROVIDE THIS FILE TO OTHER USERS nor change its permissions.\n\n"
)
PUBLIC_BANNER = (
    "#   ZeroMQ CURVE Public Certificate\n"
    "#   Copy it to the other end (a client's: into the server's allow-list directory).\n\n"
)


def require_curve() -> None:
    if not zmq.has("curve"):
        raise RuntimeError("this libzmq was built without CURVE support; install pyzmq wheels (bundled libsodium)")


def generate_keypair(directory: str | Path, name: str) -> tuple[Path, Path]:
    """Write `<directory>/<name>.key` and `<name>.key_secret` (replacing existing ones); return (public file, secret
    file). The secret file is created with mode 0600 before the key is written into it, whatever the umask."""
    require_curve()
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
        require_curve()
        socket.curve_publickey, socket.curve_secretkey = self.public, self.secret
        socket.curve_serverkey = self.server_public
