"""openpi's msgpack-numpy wire format (vlash.server.openpi_codec): byte-exact with openpi, strict on receipt."""

from __future__ import annotations

import msgpack
import numpy as np
import pytest

from vlash.server.openpi_codec import CodecError, packb, unpackb

# packb({"actions": np.zeros(2, np.float32)}) as openpi_client.msgpack_numpy packs it (verified against
# openpi-client 0.1.2): binary marker keys in the order __ndarray__, data, dtype, shape; dtype a str.
OPENPI_ACTIONS_HEX = (
    "81 a7 616374696f6e73"  # {"actions":
    " 84 c40b 5f5f6e6461727261795f5f c3"  # {b"__ndarray__": True,
    " c404 64617461 c408 0000000000000000"  # b"data": 8 zero bytes,
    " c405 6474797065 a3 3c6634"  # b"dtype": "<f4",
    " c405 7368617065 91 02"  # b"shape": [2]}}
)


def _openpi_array_map(data: bytes, dtype: str, shape: list) -> dict:
    return {b"__ndarray__": True, b"data": data, b"dtype": dtype, b"shape": shape}


def test_arrays_are_packed_byte_for_byte_as_openpi_packs_them():
    assert packb({"actions": np.zeros(2, np.float32)}) == bytes.fromhex(OPENPI_ACTIONS_HEX)


def test_an_openpi_frame_decodes_to_a_read_only_array():
    decoded = unpackb(bytes.fromhex(OPENPI_ACTIONS_HEX))
    assert list(decoded) == ["actions"]
    actions = decoded["actions"]
    assert actions.dtype == np.float32 and actions.shape == (2,) and not actions.any()
    assert not actions.flags.writeable


@pytest.mark.parametrize(
    "array",
    [
        np.arange(2 * 4 * 3, dtype=np.uint8).reshape(2, 4, 3),  # an HWC image
        np.linspace(-1, 1, 14, dtype=np.float32),
        np.array([1.5, -2.0], np.float16),
        np.array([1.5, 2.25], ">f8"),  # byte order kept
        np.array([[True, False]]),
        np.array([-(2**40), 7], np.int64),
        np.array(["pick", "place"]),
        np.array(3.0, np.float64),  # 0-d: shape []
        np.zeros((0, 3), np.float32),
        np.arange(12, dtype=np.int32).reshape(3, 4)[:, ::2],  # not contiguous: sent in C order
    ],
    ids=lambda a: f"{a.dtype.str}{list(a.shape)}",
)
def test_round_trip_keeps_dtype_shape_and_values(array):
    out = unpackb(packb({"x": array, "nested": {"y": [array]}}))
    for got in (out["x"], out["nested"]["y"][0]):
        assert got.dtype == array.dtype and got.shape == array.shape
        np.testing.assert_array_equal(got, array)


def test_numpy_scalars_and_plain_values_round_trip():
    obj = {"f": np.float32(0.25), "u": np.uint8(200), "b": np.bool_(True), "s": "text", "n": None, "l": [1, 2.5]}
    out = unpackb(packb(obj))
    assert type(out["f"]) is np.float32 and out["f"] == np.float32(0.25)
    assert type(out["u"]) is np.uint8 and out["u"] == 200
    assert type(out["b"]) is np.bool_ and out["b"]
    assert (out["s"], out["n"], out["l"]) == ("text", None, [1, 2.5])


@pytest.mark.parametrize("array", [np.zeros(2, np.complex64), np.array([object()]), np.zeros(2, "V4")])
def test_packing_refuses_complex_object_and_void(array):
    with pytest.raises(CodecError, match="unsupported dtype"):
        packb({"x": array})


@pytest.mark.parametrize(
    ("fields", "match"),
    [
        ((b"\0" * 8, "<c8", [1]), "unsupported dtype"),
        ((b"\0" * 8, "|O", [1]), "unsupported dtype"),
        ((b"\0" * 4, "|V4", [1]), "unsupported dtype"),
        ((b"\0" * 8, "<M8[s]", [1]), "unsupported dtype"),
        ((b"\0" * 8, "not-a-dtype", [2]), "dtype"),
        ((b"\0" * 8, 5, [2]), "dtype must be a str"),
        ((b"\0" * 7, "<f4", [2]), "needs 8 bytes, got 7"),
        ((b"\0" * 8, "<f4", [-2]), "shape"),
        ((b"\0" * 8, "<f4", [True, 2]), "shape"),
        ((b"\0" * 8, "<f4", "2"), "shape"),
        (("text", "<f4", [2]), "data must be bytes"),
        # a zero dim makes the product 0 (and the data empty): every other dim is still bounded
        ((b"", "<f4", [0, 2**64 - 1]), r"describe over 67108864 bytes"),
        ((b"", "|u1", [0, 2**26, 2]), r"describe over 67108864 bytes"),
        ((b"", "<f4", [2**26, 0]), r"describe over 67108864 bytes"),
    ],
)
def test_unpacking_refuses_bad_array_maps(fields, match):
    frame = msgpack.packb({"x": _openpi_array_map(*fields)}, use_bin_type=True)
    with pytest.raises(CodecError, match=match):
        unpackb(frame)


def test_an_empty_array_keeps_any_bounded_shape():
    """A zero dim with the others within the frame's bound: an empty array of that shape, as numpy makes it."""
    frame = msgpack.packb({"x": _openpi_array_map(b"", "<f4", [0, 2**24])}, use_bin_type=True)
    assert unpackb(frame)["x"].shape == (0, 2**24)


@pytest.mark.parametrize(
    "frame",
    [b"", b"\xc1", bytes.fromhex(OPENPI_ACTIONS_HEX)[:-3], bytes.fromhex(OPENPI_ACTIONS_HEX) + b"\x00"],
    ids=["empty", "reserved-byte", "truncated", "trailing-data"],
)
def test_frames_that_are_not_msgpack_raise_codec_error_only(frame):
    with pytest.raises(CodecError, match="not a msgpack frame"):
        unpackb(frame)
