"""The fleet's ingress: openpi's websocket protocol (as vlash.server.openpi_endpoint speaks it) in front of the
model deployment, reached through a DeploymentHandle, so Ray spreads requests over the model replicas and their
`@serve.batch` gathers them.

Per connection: the metadata frame, then one binary frame each way per inference; an error is a text frame,
then close 1011 (openpi's client raises RuntimeError). `GET /healthz` answers 200 "OK\\n" while a model replica
answers, 503 otherwise. A model replica that dies mid-request is not the robot's problem: the call is retried
(Ray routes it to a live replica) within `infer_timeout_s`, so the robot sees a slower reply; at most MAX_RETRIES
times, since a request may be what kills them (then the robot gets the error reply, and other replicas live on).
"""

# no `from __future__ import annotations`: FastAPI reads the route parameters' annotations (WebSocket) at runtime,
# and Serve's class-based routes do not resolve string annotations (the websocket would be refused with 1008)
import asyncio
import itertools
import logging
import time

from fastapi import FastAPI, WebSocket, WebSocketDisconnect
from fastapi.responses import PlainTextResponse
from ray import serve
from ray.exceptions import RayActorError
from ray.serve.handle import DeploymentHandle

from robot_io.protocol import Infer, Metadata
from robot_io.protocol.errors import DeadlineExceeded
from vlash.fleet.batch import RequestFailed
from vlash.fleet.config import FleetConfig
from vlash.fleet.openpi_requests import chunk_request
from vlash.runtime.policy_runtime import ChunkResult
from vlash.server.openpi_codec import packb
from vlash.server.openpi_frames import (
    ERROR_CLOSE_CODE,
    ERROR_CLOSE_REASON,
    REQUEST_ERRORS,
    error_text,
    metadata_frame,
    reply_frame,
)

log = logging.getLogger("ray.serve")  # Serve's logger: lines land in the replica's log, tagged with its id
app = FastAPI()
HEALTH_TIMEOUT_S = 5.0  # /healthz: longest wait for a model replica's answer
MAX_RETRY_WAIT_S = 1.0  # longest pause between retries on a dead replica
MAX_RETRIES = 2  # calls of one request repeated at most after its replica died (a request may kill each one)


class ReplicaFailed(Exception):
    """The model replicas serving one request died MAX_RETRIES + 1 times: it is not sent to another."""


# defined before the class: serve.ingress freezes the app (and the globals its routes use) when the class is made
async def _fail(ws: WebSocket, peer: str, message: str) -> None:
    """openpi's error reply: the message as a text frame, then close 1011."""
    log.info("openpi request from %s refused: %s", peer, message)
    try:
        await ws.send_text(message)
        await ws.close(ERROR_CLOSE_CODE, ERROR_CLOSE_REASON)
    except (WebSocketDisconnect, RuntimeError):
        pass  # the robot is gone already


@serve.deployment(name="OpenpiIngress")
@serve.ingress(app)
class OpenpiIngress:
    def __init__(self, model: DeploymentHandle, config: FleetConfig) -> None:
        self.model = model
        self.config = config
        self.map_name = config.observation_map.name if config.observation_map is not None else "auto"
        self.retries = 0  # calls repeated because a model replica died or could not be reached
        self._metadata: Metadata | None = None

    @app.get("/healthz")
    async def healthz(self) -> PlainTextResponse:
        try:
            ok = await asyncio.wait_for(self.model.ping.remote(), HEALTH_TIMEOUT_S)
        except Exception:  # noqa: BLE001 - no replica, none in time, or a dying one: unhealthy either way
            ok = False
        if ok:
            return PlainTextResponse("OK\n")
        return PlainTextResponse("no healthy model replica\n", status_code=503)

    @app.websocket("/")
    async def openpi(self, ws: WebSocket) -> None:
        await ws.accept()
        peer = f"{ws.client.host}:{ws.client.port}" if ws.client else "?"
        try:
            metadata = await self._policy_metadata()
            await ws.send_bytes(packb(metadata_frame(metadata, self.map_name)))
            prev_total_ms: float | None = None
            for request_id in itertools.count():
                start = time.monotonic()
                message = await ws.receive()
                if message["type"] == "websocket.disconnect":
                    return
                received = time.monotonic()
                frame = message.get("bytes")
                config = self.config
                request = chunk_request(frame, metadata, config.observation_map, config.default_prompt, request_id)
                result = await self._infer(request)
                if isinstance(result, RequestFailed):
                    await _fail(ws, peer, result.message)
                    return
                actions, infer_ms = result.actions[: result.final_rows], (time.monotonic() - received) * 1e3
                await ws.send_bytes(packb(reply_frame(actions, result.timing_ms, infer_ms, prev_total_ms)))
                prev_total_ms = (time.monotonic() - start) * 1e3
        except WebSocketDisconnect:
            pass  # the robot left
        except RayActorError as exc:  # the websocket's own proxy died (the fleet stops): no reply can reach the robot
            log.info("openpi connection %s ended: %s", peer, type(exc).__name__)
        except Exception as exc:  # a refused request (REQUEST_ERRORS) or a bug: an error reply; the ingress serves on
            if not isinstance(exc, REQUEST_ERRORS):
                log.exception("openpi connection %s failed", peer)
            await _fail(ws, peer, error_text(exc))

    def counters(self) -> dict[str, int]:
        """This ingress replica's counters (through a DeploymentHandle): "retries", calls repeated on a live
        replica after theirs died."""
        return {"retries": self.retries}

    async def _policy_metadata(self) -> Metadata:
        if self._metadata is None:  # the same on every replica: asked once
            self._metadata = await self._call("metadata", None)
        return self._metadata

    async def _infer(self, request: Infer) -> ChunkResult | RequestFailed:
        try:
            return await self._call("infer", request)
        except ReplicaFailed as exc:  # this robot's error reply; the replicas left are not risked on it
            log.error("%s", exc)
            return RequestFailed(str(exc), internal=True)

    async def _call(self, method: str, request: Infer | None):
        """The model deployment's `method`, called again while the replica serving it dies (MAX_RETRIES times at
        most, then ReplicaFailed), within infer_timeout_s (then DeadlineExceeded)."""
        timeout_s = self.config.infer_timeout_s
        deadline = time.monotonic() + timeout_s
        pause = 0.05
        for calls in itertools.count(1):
            call = getattr(self.model, method)
            response = call.remote() if request is None else call.remote(request)
            try:
                return await asyncio.wait_for(response, max(deadline - time.monotonic(), 1e-3))
            except TimeoutError:
                response.cancel()
                raise DeadlineExceeded(f"no reply from the policy within {timeout_s} s") from None
            except RayActorError as exc:  # the replica died or is unreachable: Ray routes the retry to another
                if calls > MAX_RETRIES:
                    raise ReplicaFailed(
                        f"the model replica serving this request failed {calls} times ({type(exc).__name__}); "
                        "it is not sent to another"
                    ) from None
                if time.monotonic() + pause >= deadline:
                    raise DeadlineExceeded(f"no live model replica answered within {timeout_s} s") from None
                self.retries += 1
                log.warning("model replica failed (%s); retrying on another", type(exc).__name__)
            await asyncio.sleep(pause)
            pause = min(2 * pause, MAX_RETRY_WAIT_S)
