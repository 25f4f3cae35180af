"""The refusal path's cost and its duplicate-key rule (robot_io/protocol/refusals.py, issue 42): a refused header is
refused from the decoder's own error, never decoded whole again, so refusing it builds no object per item of its
containers; and a key given twice in the header or body map is BAD_MESSAGE. Costs are measured in bytes allocated
(tracemalloc), not in time: the same on any machine."""

from __future__ import annotations

import tracemalloc

import msgpack
import numpy as np
import pytest

from robot_io.protocol import PROTOCOL_VERSION, Actions, ErrorCode, Infer, MessageError, Ping, decode, encode

P = msgpack.packb
PING_BODY = [("sent_ns", P(1)), ("server_ns", P(None))]


def packed_map(items: list[tuple[str, bytes]]) -> bytes:
    """A msgpack map16 of `items` (key, packed value) in this order, duplicates kept."""
    return b"\xde" + len(items).to_bytes(2, "big") + b"".join(P(key) + value for key, value in items)


def header(mtype: str, body: list[tuple[str, bytes]], arrays: bytes = b"\x90", extra: tuple = ()) -> bytes:
    fields = [("v", P(PROTOCOL_VERSION)), ("type", P(mtype)), ("body", packed_map(body)), ("arrays", arrays)]
    return packed_map([*fields, *extra])


def body_of(message) -> list[tuple[str, bytes]]:
    return [(key, P(value)) for key, value in msgpack.unpackb(bytes(encode(message)[0]))["body"].items()]


def msgpack_items(packed: bytes) -> list[tuple[str, bytes]]:
    return [(key, P(value)) for key, value in msgpack.unpackb(packed).items()]


def empty_lists(n: int) -> bytes:
    """A list of n empty lists: n + 5 bytes, n objects to an untyped decoder."""
    return b"\xdd" + n.to_bytes(4, "big") + b"\x90" * n


def timing_entries(n: int) -> bytes:
    """A map of n // 3 entries "k": 0 (3 bytes each)."""
    return b"\xdf" + (n // 3).to_bytes(4, "big") + b"\xa1k\x00" * (n // 3)


ACTIONS_BODY = body_of(Actions(1, 0, np.ones((1, 2), np.float32), True, 1, 0))
HOSTILE = {  # a header with a container of about n items, each one byte; the refusal it gets
    "the issue's repro: a list": (empty_lists, "BAD_MESSAGE: header: expected map, got list"),
    "an extra key, first": (
        lambda n: packed_map([("x", empty_lists(n)), *msgpack_items(header("PING", PING_BODY))]),
        "BAD_MESSAGE: header: 5 entries, expected 4 (a key unknown or given twice)",
    ),
    "a body value, first": (
        lambda n: header("PING", [("sent_ns", empty_lists(n)), ("server_ns", P(None))]),
        "BAD_MESSAGE: PING.body.sent_ns: expected int, got list",
    ),
    "the descriptors": (
        lambda n: header("PING", PING_BODY, empty_lists(n)),
        "BAD_MESSAGE: header.arrays: expected list of length <= 31",
    ),
    "timing_ms": (
        lambda n: header("ACTIONS", [(k, timing_entries(n) if k == "timing_ms" else v) for k, v in ACTIONS_BODY]),
        "BAD_VALUE: ACTIONS.body.timing_ms: expected map of length <= 256",
    ),
}


def refusal_peak(frame: bytes) -> tuple[MessageError, int]:
    """The refusal of `frame` and the most bytes allocated at once while decode refused it."""
    tracemalloc.start()
    try:
        with pytest.raises(MessageError) as refused:
            decode([frame])
        return refused.value, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


@pytest.mark.parametrize("name", list(HOSTILE))
def test_a_refusal_builds_nothing_per_item_of_a_container(name):
    """Before issue 42 the refused header was decoded again, untyped (65,531 empty lists: 3.8 MB, 20 ms, 120 ms on a
    server); now the memory a refusal takes is at most a few copies of the frame, however many items it holds."""
    build, text = HOSTILE[name]
    refusal_peak(build(100))  # the types built on first use
    peaks = {}
    for n in (1_000, 60_000):
        frame = build(n)
        refused, peaks[n] = refusal_peak(frame)
        assert str(refused) == text
        assert peaks[n] < 3 * len(frame) + 16 * 1024, (n, peaks[n])  # an object per item: 56 bytes each
    assert peaks[60_000] - peaks[1_000] < 3 * 59_000 + 4 * 1024  # grows with the bytes copied, not with the items


def test_the_issues_repro_is_refused_at_its_first_byte():
    refused, peak = refusal_peak(b"\xdd" + (65531).to_bytes(4, "big") + b"\x90" * 65531)
    assert str(refused) == "BAD_MESSAGE: header: expected map, got list" and peak < 16 * 1024


TWICE = "a key unknown or given twice"


@pytest.mark.parametrize(
    ("frame", "text"),
    [
        (header("PING", PING_BODY, extra=[("type", P("PING"))]), "header: 5 entries, expected 4"),
        (header("PING", PING_BODY, extra=[("type", P("RESET"))]), "header: 5 entries, expected 4"),
        (header("PING", PING_BODY, extra=[("arrays", P([]))]), "header: 5 entries, expected 4"),
        (header("PING", [*PING_BODY, ("sent_ns", P(2))]), "PING.body: 3 entries, expected 2"),
        (header("PING", [("sent_ns", P("x")), *PING_BODY]), "PING.body: 3 entries, expected 2"),
        (header("PING", [("sent_ns", P(-1)), ("server_ns", P(None))], extra=[("v", P(2))]), "header: 5 entries"),
        (header("PING", [("sent_ns", P(-1)), ("server_ns", P(None)), ("server_ns", P(None))]), "PING.body: 3"),
    ],
    ids=[
        "type twice, equal (msgspec kept it)",
        "type twice, differing (msgspec refused it)",
        "arrays twice",
        "a body key twice, both valid (msgspec kept the last)",
        "a body key twice, the first invalid",
        "v twice and a bad body value",
        "a body key twice and a bad value before it",
    ],
)
def test_a_key_twice_in_the_header_or_body_map_is_a_bad_message_before_its_values(frame, text):
    """Before issue 42 the typed decode kept the last of a key given twice (accepted), refused a second differing type
    (then "refused by the decoder, not by a check"), and the re-check read the last: now one rule on every path, read
    from the map's first bytes before any value."""
    with pytest.raises(MessageError) as refused:
        decode([frame])
    assert (
        refused.value.code is ErrorCode.BAD_MESSAGE and f"{text}" in str(refused.value) and TWICE in str(refused.value)
    )


def test_the_version_is_read_as_the_decoder_reads_it_before_the_keys():
    """`v` twice: the last one is the version (checked first, whatever the rest holds); a supported one, the keys'."""
    with pytest.raises(MessageError) as refused:
        decode([header("PING", PING_BODY, extra=[("v", P(PROTOCOL_VERSION + 1))])])
    assert refused.value.code is ErrorCode.BAD_VERSION
    with pytest.raises(MessageError, match="header: 5 entries, expected 4"):
        decode([packed_map([("v", P(PROTOCOL_VERSION + 1)), *msgpack_items(header("PING", PING_BODY))])])


def test_maps_packed_longer_than_needed_still_decode():
    """A map16 (or map32) of 4 entries is as valid as a fixmap: the duplicate check reads the count, not one byte."""
    assert decode([header("PING", PING_BODY)]) == Ping(1)
    map32 = b"\xdf" + (4).to_bytes(4, "big") + header("PING", PING_BODY)[3:]
    assert decode([map32]) == Ping(1)


def test_a_key_twice_inside_a_descriptor_or_timing_ms_is_read_as_msgspec_reads_it():
    """Maps inside the body or a descriptor: every value is checked, the last one kept, on both paths."""
    state = np.arange(2, dtype=np.float32)
    frames = [bytes(f) for f in encode(Infer(1, 0, 0, "p", {}, state))]
    body_items = body_of(Infer(1, 0, 0, "p", {}, state))
    twice = [("name", P("state")), ("dtype", P("float32")), ("shape", P([7])), ("shape", P([2]))]
    decoded = decode([header("INFER", body_items, b"\x91" + packed_map(twice)), frames[1]])
    assert decoded.state.tolist() == [0.0, 1.0]
    first_bad = [("name", P("state")), ("dtype", P("float64")), ("dtype", P("float32")), ("shape", P([2]))]
    with pytest.raises(MessageError, match=r"header.arrays\[0\].dtype: invalid enum value 'float64'") as refused:
        decode([header("INFER", body_items, b"\x91" + packed_map(first_bad)), frames[1]])
    assert refused.value.code is ErrorCode.BAD_VALUE
    timing = packed_map([("total_ms", P(1.0)), ("total_ms", P(2.0))])
    actions_body = [(k, timing if k == "timing_ms" else v) for k, v in ACTIONS_BODY]
    descriptor = P([{"name": "actions", "dtype": "float32", "shape": [1, 2]}])
    rows = np.ones((1, 2), np.float32).tobytes()
    assert decode([header("ACTIONS", actions_body, descriptor), rows]).timing_ms == {"total_ms": 2.0}
