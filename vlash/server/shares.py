"""Fair shares of the policy server's queue (vlash.server.jobs): between the transports requests arrive on, and
between the clients refused for want of a place.

Transports. A request comes in over ZeroMQ (a robot on the socket) or in process (an openpi websocket connection,
through vlash.server.local_client). A transport is active while one of its clients was heard from (sent a request,
accepted or not) in the last ACTIVE_CLIENT_S, or has a request pending. Each active transport is owed up to its
share of the queue's `max_pending` places, max_pending // (active transports), but no more than it has clients heard
from: a place owed and not taken is kept free for that transport. So a flood of websocket clients cannot take the
place of a ZeroMQ robot, and a robot alone holds back only the one place it uses; a transport with no other active
uses every place. The model thread serves the transports in turn (`batch`): while both are active, a batch takes one
transport's requests only, the one that did not lead the last batch, and no more of them than a batch that ends
within one control period of a single request (vlash.server.batching, `shared_size`); so a robot waits for at most
one short batch of the other transport's clients, however many of them are waiting, and then runs in a batch of its
own transport's requests.

Claims. A client refused BUSY keeps a claim to a place: while claims are open, a place that frees goes to the claimant
of the same transport refused first, not to a newcomer, and the claimant's request takes the turn of its first
refusal. A claim ends when its client's request is admitted, on its RESET, or once the client has not been heard
from for ACTIVE_CLIENT_S (it gave up). An openpi connection refused BUSY is closed (openpi's error reply), and its
claim with it: its robot comes back as a new client.

Not thread-safe: JobQueue calls it with its lock held. Its memory is bounded by the clients heard from in the last
ACTIVE_CLIENT_S (pruned, oldest first, on every request).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from itertools import chain
from typing import Protocol

ZEROMQ = "zeromq"  # a robot on the ZeroMQ socket
IN_PROCESS = "in_process"  # a client in the server's process: the openpi endpoint's connections
# A client that sent a request this recently is expected to send again (a robot asks for a chunk every few control
# steps, well under a second apart): a batch may wait for it, and its transport is owed a place.
ACTIVE_CLIENT_S = 2.0


class Queued(Protocol):
    """What the shares read of a job (vlash.server.jobs.Job)."""

    transport: str
    turn_ns: int


@dataclass
class _Heard:
    at_ns: int  # receipt of its latest request (the clock of Job.received_ns)
    transport: str


class Shares:
    def __init__(self, max_pending: int | None) -> None:
        """`max_pending`: the queue's places (None: no bound, nobody is refused)."""
        self.max_pending = max_pending
        self._heard: dict[bytes, _Heard] = {}  # clients heard from in the last ACTIVE_CLIENT_S, oldest first
        self._heard_per: Counter[str] = Counter()  # transport -> its clients in _heard
        self._claims: dict[bytes, tuple[int, str]] = {}  # claimant -> (first refusal, transport), oldest first
        self._lead: str | None = None  # the transport whose job led the last batch

    @property
    def heard(self) -> Iterable[bytes]:
        """The clients heard from in the last ACTIVE_CLIENT_S (as of the last `forget_quiet`), oldest first."""
        return self._heard.keys()

    def hear(self, client: bytes, transport: str, at_ns: int, now_ns: int) -> None:
        """`client` sent a request received at `at_ns`."""
        old = self._heard.pop(client, None)
        if old is not None:
            self._heard_per[old.transport] -= 1
        self._heard[client] = _Heard(at_ns, transport)
        self._heard_per[transport] += 1
        self.forget_quiet(now_ns)

    def forget_quiet(self, now_ns: int) -> None:
        """Drop the clients (and their claims) not heard from in the last ACTIVE_CLIENT_S: oldest first, so each entry
        is looked at once more than it is dropped."""
        oldest_kept = now_ns - int(ACTIVE_CLIENT_S * 1e9)
        while self._heard:
            client, heard = next(iter(self._heard.items()))
            if heard.at_ns >= oldest_kept:
                return
            del self._heard[client]
            self._heard_per[heard.transport] -= 1
            self._claims.pop(client, None)

    def admits(self, client: bytes, transport: str, pending: Counter[str]) -> bool:
        """Whether a request of `client` (heard, with no request pending) gets a place; `pending`: requests pending
        per transport. Its room: the free places less those owed to the other transports; it needs one more than
        the claims of its transport ahead of its own (see the module docstring)."""
        if self.max_pending is None:
            return True
        active = {t for t, n in chain(self._heard_per.items(), pending.items()) if n > 0}
        share = self.max_pending // max(1, len(active))  # the shares add up to max_pending at most: none blocks all
        owed = sum(max(0, min(share, self._heard_per[t]) - pending[t]) for t in active if t != transport)
        room = self.max_pending - sum(pending.values()) - owed
        return room > self._claims_ahead(client, transport)

    def _claims_ahead(self, client: bytes, transport: str) -> int:
        mine = self._claims.get(client)
        return sum(
            1
            for other, (claim_ns, kind) in self._claims.items()
            if kind == transport and other != client and (mine is None or claim_ns < mine[0])
        )

    def refused(self, client: bytes, transport: str, at_ns: int) -> None:
        """`client`'s request received at `at_ns` found no place: it keeps (or opens) its claim."""
        self._claims.setdefault(client, (at_ns, transport))

    def admitted(self, client: bytes, received_ns: int) -> int:
        """`client`'s request got a place: its claim ends; the turn it takes (its first refusal, or `received_ns`)."""
        claim = self._claims.pop(client, None)
        return received_ns if claim is None else min(claim[0], received_ns)

    def drop_claim(self, client: bytes) -> None:
        self._claims.pop(client, None)

    def clear(self) -> None:
        self._heard.clear()
        self._heard_per.clear()
        self._claims.clear()

    def batch(self, ready: list[Queued], max_jobs: int, shared_max: int) -> list[Queued]:
        """The jobs the next batch takes of `ready`, in serving order: the transports in turn, oldest turn first within
        a transport, the transport that led the last batch last. While more than one transport is active (a client
        heard from in the last ACTIVE_CLIENT_S, or a job ready), only the leading transport's, at most `shared_max`
        (see the module docstring); else up to `max_jobs`."""
        lanes: dict[str, list[Queued]] = {}
        for job in sorted(ready, key=lambda j: j.turn_ns):
            lanes.setdefault(job.transport, []).append(job)
        if not lanes:
            return []
        lead = min(lanes, key=lambda t: (t == self._lead, lanes[t][0].turn_ns))
        active = {t for t, n in self._heard_per.items() if n > 0} | lanes.keys()
        batch = lanes[lead][: min(max_jobs, shared_max) if len(active) > 1 else max_jobs]
        self._lead = lead
        return batch
