"""openpi's websocket protocol in front of `PolicyServer`, so unchanged openpi robot scripts
(`openpi_client.WebsocketClientPolicy`, `ActionChunkBroker`) drive a vlash policy.

A protocol adapter, not a second server: each websocket connection (one thread, websockets' threaded server)
gets its own `LocalClient` (server.local_client): an observation frame is decoded (openpi_codec), mapped onto the
policy's cameras, state and prompt (openpi_mapping), submitted to the server in process as an INFER (never encoded)
and the final ACTIONS are returned in openpi's reply. Validation, newest-request-wins per client, the model, stats
and ERRORs stay the server's; a refused request reaches the robot as openpi's error reply and never stops the server.

The protocol (openpi's `serving/websocket_policy_server.py`):
- on connect the server sends one binary frame: metadata (plain msgpack: the policy's Metadata fields);
- per inference one binary frame each way; the reply is {"actions": float32 [H, action_dim],
  "policy_timing": {"infer_ms" (the policy's time), vlash's breakdown}, "server_timing": {"infer_ms",
  "prev_total_ms" (the previous request's recv -> send, from the second request on)}};
- an error is a TEXT frame with the message, then close code 1011 (openpi's client raises RuntimeError);
- `reset()` sends nothing; `GET /healthz` on the same port answers 200 "OK\\n" (503 once the policy server
  stopped); compression off, frames up to OpenpiConfig.max_message_bytes, their structure bounded before they are
  decoded (openpi_codec): one out of bounds gets the error reply, like any refused frame.
- at most OpenpiConfig.max_connections connections open at once: past it a new one is refused in its handshake
  (HTTP 503) and counted ("refused"); every refusal (that 503, an error reply) goes out OpenpiConfig.refusal_delay_s
  late, so a client retrying at once cannot make refusing cost the robots; a connection whose robot stopped
  answering (keepalive) is logged in one line (openpi_connections).
No authentication: `start()` refuses a reachable host, or a server with CurveZMQ keys, unless the server's config
says insecure (OpenpiConfig.check_access).
"""

from __future__ import annotations

import itertools
import logging
import threading
import time
from http import HTTPStatus

from websockets.exceptions import ConnectionClosed
from websockets.http11 import Request, Response
from websockets.sync.server import Server, ServerConnection, serve

from vlash.errors import ConfigError
from vlash.server.config import OpenpiConfig
from vlash.server.openpi_codec import packb
from vlash.server.openpi_connections import ConnectionCap, ConnectionLog, RefusalPace
from vlash.server.openpi_frames import (
    ERROR_CLOSE_CODE,
    ERROR_CLOSE_REASON,
    REQUEST_ERRORS,
    error_text,
    metadata_frame,
    observation_infer,
    reply_frame,
)
from vlash.server.openpi_mapping import PROFILES, ObservationMap, load_map
from vlash.server.server import PolicyServer

log = logging.getLogger(__name__)
# websockets' keepalive, its defaults written out: a ping every PING_INTERVAL_S; a connection whose pong is not back
# within PING_TIMEOUT_S is closed, and one whose close is not answered within CLOSE_TIMEOUT_S is dropped
PING_INTERVAL_S, PING_TIMEOUT_S, CLOSE_TIMEOUT_S = 20.0, 20.0, 10.0


class OpenpiEndpoint:
    """Serve openpi's websocket protocol for `server` (already started). `start()` returns the ws:// URL."""

    def __init__(self, server: PolicyServer, config: OpenpiConfig | None = None) -> None:
        self.server = server
        self.config = config or OpenpiConfig()
        # the observation map; None: `auto`, chosen per observation by its keys
        self.map: ObservationMap | None = (
            load_map(self.config.map_file) if self.config.map_file else PROFILES[self.config.profile]
        )
        self.url: str | None = None  # ws://host:port once started (port resolved)
        # connections served, requests served, error replies sent, connections refused at max_connections
        self.counters = {"connections": 0, "requests": 0, "errors": 0, "refused": 0}
        self._cap = ConnectionCap(self.config.max_connections)
        self._pace = RefusalPace(self.config.refusal_delay_s, self.config.max_connections)
        self._lock = threading.Lock()
        self._ws: Server | None = None
        self._thread: threading.Thread | None = None

    def start(self) -> str:
        host, port = self.config.host, self.config.port
        self.config.check_access(self.server.config)  # ConfigError unless the server's config says insecure
        if not self.config.is_local:
            log.warning("openpi endpoint on %s:%d: reachable from other machines, without authentication", host, port)
        elif self.server.config.curve_keys is not None:
            log.warning("openpi endpoint on %s:%d: without authentication, beside CurveZMQ for ZeroMQ", host, port)
        try:
            self._ws = serve(
                self._serve_connection,
                host,
                port,
                compression=None,  # as openpi: images do not deflate, and it costs latency
                max_size=self.config.max_message_bytes,
                process_request=self._admit,
                ping_interval=PING_INTERVAL_S,
                ping_timeout=PING_TIMEOUT_S,
                close_timeout=CLOSE_TIMEOUT_S,
                logger=ConnectionLog(logging.getLogger("websockets.server")),
            )
        except OSError as exc:
            raise ConfigError(f"cannot listen on {host}:{port} for openpi clients: {exc}") from exc
        bound_host, bound_port = self._ws.socket.getsockname()[:2]
        self.url = f"ws://[{bound_host}]:{bound_port}" if ":" in bound_host else f"ws://{bound_host}:{bound_port}"
        self._thread = threading.Thread(target=self._ws.serve_forever, name="vlash-openpi", daemon=True)
        self._thread.start()
        return self.url

    @property
    def map_name(self) -> str:
        """The observation map's name ("auto": chosen per observation)."""
        return self.map.name if self.map is not None else "auto"

    @property
    def port(self) -> int:
        assert self._ws is not None, "start() first"
        return self._ws.socket.getsockname()[1]

    def stop(self, timeout_s: float = 5.0) -> None:
        """Stop listening, close connections (1001) and wait for their threads: each finishes its current request,
        bounded by OpenpiConfig.infer_timeout_s. Call before `PolicyServer.stop()`."""
        if self._ws is None:
            return
        self._pace.stop()
        self._ws.shutdown()
        if self._thread is not None:
            self._thread.join(timeout_s)
        self._ws = None

    def __enter__(self) -> OpenpiEndpoint:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # --- one thread per connection -------------------------------------------------------------------
    def _admit(self, connection: ServerConnection, request: Request) -> Response | None:
        """The handshake's answer: /healthz, a 503 past max_connections, or None (the websocket opens)."""
        if request.path == "/healthz":  # answered at the cap too
            if self.server.running:
                return connection.respond(HTTPStatus.OK, "OK\n")
            return connection.respond(HTTPStatus.SERVICE_UNAVAILABLE, "policy server stopped\n")
        if self._cap.admit(connection):
            return None
        refused = self._count("refused")
        if refused == 1 or refused % 100 == 0:  # a line for the first and every 100th
            log.warning(
                "openpi endpoint: %d connections open, its --openpi-max-connections: refused a new one (%d so far)",
                self._cap.limit,
                refused,
            )
        text = f"too many openpi connections ({self._cap.limit} open); try again later\n"
        self._pace.wait()
        return connection.respond(HTTPStatus.SERVICE_UNAVAILABLE, text)

    def _serve_connection(self, conn: ServerConnection) -> None:
        self._count("connections")
        try:
            peer = ":".join(str(part) for part in conn.remote_address[:2])
        except OSError:  # reset right after the handshake: its socket has no peer left
            log.debug("openpi connection reset before it was served")
            self._cap.release(conn)
            return
        client = self.server.local_client(self.config.infer_timeout_s, f"openpi {peer}")
        try:
            metadata = client.connect()
            conn.send(packb(metadata_frame(metadata, self.map_name)))
            prev_total_ms: float | None = None
            for request_id in itertools.count():
                start = time.monotonic()
                frame = conn.recv()
                received = time.monotonic()
                infer = observation_infer(frame, metadata, self.map, self.config.default_prompt, request_id)
                result = client.infer(infer)  # RemoteError when the server refuses it
                self._count("requests")
                infer_ms = (time.monotonic() - received) * 1e3
                conn.send(packb(reply_frame(result.actions, result.timing_ms, infer_ms, prev_total_ms)))
                prev_total_ms = (time.monotonic() - start) * 1e3
        except (ConnectionClosed, ConnectionError):
            pass  # the robot left (or reset the connection, or stopped answering), or stop() closed it
        except Exception as exc:  # a refused request (REQUEST_ERRORS) or a bug: an error reply; the server serves on
            if not isinstance(exc, REQUEST_ERRORS):
                log.exception("openpi connection %s failed", peer)
            self._fail(conn, peer, error_text(exc))
        finally:
            client.close()
            self._cap.release(conn)

    def _fail(self, conn: ServerConnection, peer: str, message: str) -> None:
        self._count("errors")
        log.info("openpi request from %s refused: %s", peer, message)
        self._pace.wait()
        try:
            conn.send(message)  # a text frame: openpi's client raises RuntimeError with it
            conn.close(ERROR_CLOSE_CODE, ERROR_CLOSE_REASON)
        except ConnectionClosed:
            pass

    def _count(self, name: str) -> int:
        with self._lock:
            self.counters[name] += 1
            return self.counters[name]
