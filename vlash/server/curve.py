"""Optional CurveZMQ for the server socket: the key pair in `<keys>/server.key_secret` and an allow-list
directory of client public keys (`*.key`); unknown clients fail the handshake. Keys via
`robot_io.protocol.curve` (`vlash keys` writes them)."""

from __future__ import annotations

from pathlib import Path

import zmq

from robot_io.protocol.curve import CurveServerKeys
from vlash.errors import ConfigError

SERVER_KEY_NAME = "server"


class CurveServer:
    """No-op when `keys_dir` is None; else configures the ROUTER and runs the ZAP authenticator."""

    def __init__(self, context: zmq.Context, keys_dir: Path | None, allow_dir: Path | None) -> None:
        self._context = context
        self._keys: CurveServerKeys | None = None
        self._auth = None
        if keys_dir is None:
            return
        secret = Path(keys_dir) / f"{SERVER_KEY_NAME}.key_secret"
        if not secret.is_file():
            raise ConfigError(
                f"no server key pair at {secret}; create one with `vlash keys --out {keys_dir} --name server`"
            )
        if allow_dir is None or not any(Path(allow_dir).glob("*.key")):
            raise ConfigError(f"allow-list directory {allow_dir} holds no client public keys (*.key)")
        try:
            self._keys = CurveServerKeys.from_files(secret, allow_dir)
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
        if self._keys is not None and self._auth is None:
            self._auth = self._keys.start_authenticator(self._context)

    def configure(self, socket: zmq.Socket) -> None:
        """Call before bind()."""
        if self._keys is not None:
            self._keys.apply(socket)

    def stop(self) -> None:
        if self._auth is not None:
            self._auth.stop()
            self._auth = None
