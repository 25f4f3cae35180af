"""ServerStats remembers a bounded number of clients: idle ones are forgotten (simulated clock)."""

from __future__ import annotations

from vlash.server.stats import MAX_CLIENTS, ServerStats


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_thousands_of_short_connections_do_not_grow_the_client_table():
    stats = ServerStats()
    for i in range(2 * MAX_CLIENTS):
        stats.client(i.to_bytes(5, "big"))
    assert stats.snapshot()["clients"] == MAX_CLIENTS
    assert len(stats._clients) == MAX_CLIENTS


def test_idle_clients_are_forgotten_and_active_ones_kept():
    clock = FakeClock()
    stats = ServerStats(client_idle_s=60.0, max_clients=10, clock=clock)
    stats.client(b"robot")
    for i in range(5):
        stats.client(b"short-%d" % i)
    clock.now += 50.0
    stats.client(b"robot")  # still talking
    clock.now += 20.0  # the short-lived clients are now 70 s idle, the robot 20 s
    assert stats.snapshot()["clients"] == 1 and list(stats._clients) == [b"robot"]


def test_past_the_cap_the_least_recently_heard_client_goes_first():
    clock = FakeClock()
    stats = ServerStats(client_idle_s=1e9, max_clients=3, clock=clock)
    for name in (b"a", b"b", b"c"):
        stats.client(name)
        clock.now += 1.0
    stats.client(b"a")  # heard again: now the most recent
    stats.client(b"d")
    assert list(stats._clients) == [b"c", b"a", b"d"]
