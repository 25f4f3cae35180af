"""Settings of the policy server: `vlash serve`'s flags are made from these fields (vlash.cli.flags)."""

from __future__ import annotations

import ipaddress
import math
import re
from dataclasses import dataclass, field
from pathlib import Path

from robot_io.protocol.endpoints import DEFAULT_ENDPOINT
from vlash.errors import ConfigError
from vlash.sampling import Schedule
from vlash.sampling.guidance_weight_bounds import DEFAULT_GUIDANCE_WEIGHT, check_guidance_weight
from vlash.server.openpi_mapping import PROFILES, load_map

# tcp://HOST:PORT as libzmq binds it. HOST: "*" (every interface), an IPv4 address, a bracketed IPv6 address, or
# a host / interface name; PORT: 0..65535, or "*" or 0 for a free one. libzmq itself reads a port of 99999 as
# 34463 (mod 2^16) and serves there without a word, hence the check here, before a model loads.
TCP_ENDPOINT = re.compile(
    r"tcp://(?P<host>\*|\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?):(?P<port>\*|\d{1,5})"
)
LOCAL_TRANSPORTS = ("ipc://", "inproc://")  # never reachable from another machine
MAX_BATCH = 64  # largest max_batch (bounds the STATS histogram of batch sizes)
SCHEDULES = tuple(s.value for s in Schedule)  # the flow schedules a server may default to


@dataclass
class ServerConfig:
    """How `PolicyServer` listens and serves."""

    bind: str = DEFAULT_ENDPOINT  # ZeroMQ endpoint (tcp://host:port, ipc://path); localhost by default
    # the flow schedule of a request that names none
    schedule: str = field(default="constant", metadata={"choices": SCHEDULES})
    steps: int | None = None  # denoise steps; None: the policy's default
    # rtc: the largest guidance weight (beta, the paper's clip; LeRobot's max_guidance_weight). Lower pulls a new
    # chunk less toward the previous one (docs/METHODS.md, "rtc": on learned hold 0.5 kept 84% at d = 0, 5 kept 9)
    guidance_weight: float = DEFAULT_GUIDANCE_WEIGHT
    inject_latency_ms: float = 0.0  # extra time per batch, spread over prefill + steps (emulates a slower GPU)
    control_rate_hz: float | None = None  # hint in Metadata; None: the policy's metadata or 50 Hz
    curve_keys: Path | None = None  # directory with server.key / server.key_secret: CurveZMQ on
    allow_dir: Path | None = None  # directory of allowed client public keys (*.key); required with curve_keys
    # serve unauthenticated clients where that needs saying: a non-loopback bind without curve_keys, an openpi
    # endpoint on a non-loopback host or beside curve_keys (anyone who reaches it can drive the robot). Off: those
    # are refused
    insecure: bool = False
    # times in a row a client's newer request may cancel its running one (newest wins); after that the running
    # one finishes and the newest waits (vlash.server.jobs). 0: a running request is never cancelled by a newer one
    max_consecutive_cancels: int = 1
    # requests the model runs together in one batch (one per client); capped by the engine's fixed batch (an
    # exported artifact's static batch). 1: one request at a time
    max_batch: int = 8
    # longest wait for more requests while fewer than max_batch are pending, from the oldest one's receipt; the
    # wait also ends once it would cost that request a control step (vlash.server.batching). 0: never wait
    batch_wait_ms: float = 5.0
    # requests allowed to wait; past that a client without a pending request gets ERROR BUSY (vlash.server.jobs)
    max_pending: int = 64
    poll_ms: int = 50  # socket poll period: bounds how long stop() takes to be noticed
    latency_window: int = 1000  # served requests kept for the latency percentiles in STATS
    # full requests the model thread runs before serving (`start()` waits for them). Warm up here, not in the
    # caller's thread: on CPU, torch work in a second thread left every served chunk ~2.3x slower
    # (docs/BENCHMARKS.md, "one thread for the model")
    warm_up_runs: int = 0

    def __post_init__(self) -> None:
        check_bind(self.bind)
        try:
            self.schedule = Schedule(self.schedule).value
        except ValueError:
            raise ConfigError(f"schedule must be one of {[s.value for s in Schedule]}, got {self.schedule!r}") from None
        if self.steps is not None and (not isinstance(self.steps, int) or self.steps < 1):
            raise ConfigError(f"steps must be None or an int >= 1, got {self.steps!r}")
        check_guidance_weight(self.guidance_weight)
        lat = self.inject_latency_ms
        if not (isinstance(lat, int | float) and math.isfinite(lat) and 0 <= lat <= 60_000):
            raise ConfigError(f"inject_latency_ms must be in [0, 60000], got {lat!r}")
        rate = self.control_rate_hz
        if rate is not None and not (math.isfinite(rate) and rate > 0):
            raise ConfigError(f"control_rate_hz must be None or > 0, got {rate!r}")
        if (self.curve_keys is None) != (self.allow_dir is None):
            raise ConfigError(
                f"curve_keys and allow_dir go together (got curve_keys={self.curve_keys}, allow_dir={self.allow_dir})"
            )
        for name in ("curve_keys", "allow_dir"):
            value = getattr(self, name)
            if value is not None:
                setattr(self, name, Path(value))
                if not Path(value).is_dir():
                    raise ConfigError(f"{name} must be an existing directory, got {str(value)!r}")
        if not isinstance(self.poll_ms, int) or not 1 <= self.poll_ms <= 1000:
            raise ConfigError(f"poll_ms must be an int in [1, 1000], got {self.poll_ms!r}")
        if not isinstance(self.warm_up_runs, int) or self.warm_up_runs < 0:
            raise ConfigError(f"warm_up_runs must be an int >= 0, got {self.warm_up_runs!r}")
        if not isinstance(self.latency_window, int) or self.latency_window < 1:
            raise ConfigError(f"latency_window must be an int >= 1, got {self.latency_window!r}")
        cancels = self.max_consecutive_cancels
        if type(cancels) is not int or cancels < 0:
            raise ConfigError(f"max_consecutive_cancels must be an int >= 0, got {cancels!r}")
        if type(self.max_batch) is not int or not 1 <= self.max_batch <= MAX_BATCH:
            raise ConfigError(f"max_batch must be an int in [1, {MAX_BATCH}], got {self.max_batch!r}")
        wait = self.batch_wait_ms
        if isinstance(wait, bool) or not (isinstance(wait, int | float) and math.isfinite(wait) and 0 <= wait <= 1000):
            raise ConfigError(f"batch_wait_ms must be in [0, 1000], got {wait!r}")
        if type(self.max_pending) is not int or self.max_pending < 1:
            raise ConfigError(f"max_pending must be an int >= 1, got {self.max_pending!r}")
        if type(self.insecure) is not bool:
            raise ConfigError(f"insecure must be a bool, got {self.insecure!r}")
        if self.curve_keys is None:
            fix = "create keys with `vlash keys` and pass --curve-keys/--allow-dir"
            check_unauthenticated(f"bind {self.bind}", not self.is_local, False, self.insecure, fix)

    @property
    def is_local(self) -> bool:
        """True when the endpoint is only reachable from this machine: ipc://, inproc://, or tcp:// on localhost
        or a loopback address. Host and interface names other than localhost count as reachable."""
        if self.bind.startswith(LOCAL_TRANSPORTS):
            return True
        return is_loopback_host(TCP_ENDPOINT.fullmatch(self.bind)["host"].strip("[]"))


def is_loopback_host(host: str) -> bool:
    """True for localhost and loopback addresses (only this machine reaches them); any other name or address,
    "0.0.0.0" and "*" included, counts as reachable from other machines."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def check_unauthenticated(endpoint: str, reachable: bool, server_has_keys: bool, insecure: bool, fix: str) -> None:
    """The one rule for an endpoint that serves clients without authentication (a ZeroMQ bind without CurveZMQ keys;
    openpi's websocket, always): it needs `insecure` (`vlash serve --insecure`) when other machines reach it, or when
    the server has CurveZMQ keys (its ZeroMQ clients must authenticate; this endpoint would let anyone past them).
    Else a one-line ConfigError that says why and offers `fix` or --insecure."""
    if insecure:
        return
    if reachable:
        raise ConfigError(
            f"{endpoint} is reachable from other machines without authentication, so anyone who reaches it could "
            f"drive the robot: {fix}, or pass --insecure to serve it unauthenticated"
        )
    if server_has_keys:
        raise ConfigError(
            f"{endpoint} has no authentication while --curve-keys/--allow-dir require it of ZeroMQ clients, so any "
            f"process on this machine could drive the robot past the allow-list: {fix}, or pass --insecure to serve "
            "it anyway"
        )


def check_bind(bind: object) -> None:
    """Raise ConfigError unless `bind` is an endpoint the server can bind as written (see TCP_ENDPOINT)."""
    example = f"{DEFAULT_ENDPOINT} (port 0 or * for a free one), or ipc:///path"
    if not isinstance(bind, str):
        raise ConfigError(f"bind must be a ZeroMQ endpoint like {example}, got {bind!r}")
    if bind.startswith(LOCAL_TRANSPORTS):
        if bind.partition("://")[2]:
            return
        raise ConfigError(f"bind {bind!r} names no path")
    match = TCP_ENDPOINT.fullmatch(bind)
    if match is None:
        raise ConfigError(f"bind must be a ZeroMQ endpoint like {example}, got {bind!r}")
    port, host = match["port"], match["host"]
    if port != "*" and int(port) > 65535:
        raise ConfigError(f"bind {bind!r}: port {port} is not in 0..65535 (0 or * picks a free one)")
    if host.startswith("["):
        try:
            ipaddress.IPv6Address(host[1:-1])
        except ValueError:
            raise ConfigError(f"bind {bind!r}: {host} is not an IPv6 address") from None
    elif host[0].isdigit() and host.replace(".", "").isdigit():  # looks like IPv4: must be one
        try:
            ipaddress.IPv4Address(host)
        except ValueError:
            raise ConfigError(f"bind {bind!r}: {host} is not an IPv4 address") from None


@dataclass
class OpenpiConfig:
    """The openpi websocket endpoint (`vlash serve --openpi-port`), an adapter in front of `PolicyServer`."""

    host: str = "127.0.0.1"  # interface to listen on; loopback unless another one is asked for
    port: int = 8000  # TCP port (openpi's default); 0 picks a free one
    # observation keys: a profile, or auto (detects droid, libero, aloha or vlash-native)
    profile: str = field(default="auto", metadata={"choices": tuple(PROFILES)})
    map_file: Path | None = None  # YAML observation map for other robots (configs/openpi/), instead of a profile
    default_prompt: str | None = None  # instruction for observations without a prompt
    infer_timeout_s: float = 30.0  # longest wait for one chunk from the policy server; then an error reply
    max_message_bytes: int = 64 * 1024 * 1024  # largest observation frame accepted (openpi sets no limit)
    # connections open at once; past it a new one is refused in its handshake (HTTP 503) and counted. Each open one
    # holds three threads, idle or not; 64 is the policy server's queue (--max-pending): more robots than that
    # could only wait BUSY
    max_connections: int = 64
    # a refused connection or request gets its refusal this many seconds late (its thread waits, using no CPU; at
    # most max_connections wait at once), so a client that retries at once costs the server one refusal a second,
    # not hundreds: refusing a 16 MiB frame takes ~16 ms of CPU the robots share. 0: at once
    refusal_delay_s: float = 1.0

    def __post_init__(self) -> None:
        if not isinstance(self.host, str) or not self.host:
            raise ConfigError(f"OpenpiConfig.host must be a host name or address, got {self.host!r}")
        if type(self.port) is not int or not 0 <= self.port <= 65535:
            raise ConfigError(f"OpenpiConfig.port must be an int in [0, 65535], got {self.port!r}")
        if self.profile not in PROFILES:
            raise ConfigError(f"OpenpiConfig.profile must be one of {list(PROFILES)}, got {self.profile!r}")
        if self.map_file is not None:
            self.map_file = Path(self.map_file)
            if self.profile != "auto":
                raise ConfigError(
                    f"give OpenpiConfig.map_file or OpenpiConfig.profile, not both (got {self.profile!r})"
                )
            if not self.map_file.is_file():
                raise ConfigError(f"OpenpiConfig.map_file {str(self.map_file)!r} does not exist")
            load_map(self.map_file)  # fail at setup, before a policy loads
        timeout = self.infer_timeout_s
        if not (isinstance(timeout, int | float) and math.isfinite(timeout) and timeout > 0):
            raise ConfigError(f"infer_timeout_s must be > 0, got {timeout!r}")
        if type(self.max_message_bytes) is not int or self.max_message_bytes < 1024:
            raise ConfigError(f"max_message_bytes must be an int >= 1024, got {self.max_message_bytes!r}")
        if type(self.max_connections) is not int or self.max_connections < 1:
            raise ConfigError(f"max_connections must be an int >= 1, got {self.max_connections!r}")
        delay = self.refusal_delay_s
        if not (isinstance(delay, int | float) and math.isfinite(delay) and 0 <= delay <= 60):
            raise ConfigError(f"refusal_delay_s must be in [0, 60] seconds, got {delay!r}")

    @property
    def is_local(self) -> bool:
        """True when the endpoint is only reachable from this machine."""
        return is_loopback_host(self.host)

    def check_access(self, server: ServerConfig) -> None:
        """ConfigError unless this unauthenticated endpoint may serve beside `server` (`check_unauthenticated`:
        a reachable host, or a server with CurveZMQ keys, needs server.insecure, `vlash serve --insecure`)."""
        keys = server.curve_keys is not None
        fix = "leave --openpi-port out" if keys else "listen on 127.0.0.1 (--openpi-host)"
        endpoint = f"openpi endpoint {self.host}:{self.port}"
        check_unauthenticated(endpoint, not self.is_local, keys, server.insecure, fix)
