"""The cpu backend's 32-bit integer intrinsics (``ampcore_cpu._u32_numba``) compute what NumPy's uint32
arithmetic computes, wrapping included: the rounding loops rely on a wrapped subtraction being selected away,
and on a carry out of bit 31 being dropped."""

import numpy as np
import pytest

from ampcore_cpu import compiled

u32 = compiled.load("_u32_numba")
pytestmark = pytest.mark.skipif(
    u32 is None,
    reason="the cpu backend is on its NumPy fallback path (no numba, or AMPCORE_CPU_NO_NUMBA=1): there are no "
    "compiled loops to check",
)

EDGES = np.array(
    [0, 1, 2, 13, 31, 0x7FFF, 0x8000, 0x7F800000, 0x7FFFFFFF, 0x80000000, 0xFFFFFFFE, 0xFFFFFFFF], np.uint32
)


def _compiled(op_name: str):  # type: ignore[no-untyped-def]
    import numba

    op = getattr(u32, op_name)

    @numba.njit
    def apply(a, b, out):  # type: ignore[no-untyped-def]
        for i in range(a.size):
            out[i] = op(a[i], b[i])

    return apply


@pytest.mark.parametrize(
    ("name", "reference"),
    [
        ("add32", np.add),
        ("sub32", np.subtract),
        ("and32", np.bitwise_and),
        ("or32", np.bitwise_or),
        ("max32", np.maximum),
        ("min32", np.minimum),
    ],
)
def test_binary_operations_wrap_as_uint32(name: str, reference) -> None:  # type: ignore[no-untyped-def]
    a, b = (v.reshape(-1) for v in np.meshgrid(EDGES, EDGES))
    out = np.empty_like(a)
    _compiled(name)(a, b, out)
    np.testing.assert_array_equal(out, reference(a, b))  # NumPy's uint32 ufuncs wrap


@pytest.mark.parametrize(("name", "reference"), [("shl32", np.left_shift), ("shr32", np.right_shift)])
def test_shifts_below_32(name: str, reference) -> None:  # type: ignore[no-untyped-def]
    shifts = np.array([0, 1, 13, 16, 23, 31], np.uint32)
    a, b = (v.reshape(-1) for v in np.meshgrid(EDGES, shifts))
    out = np.empty_like(a)
    _compiled(name)(a, b, out)
    np.testing.assert_array_equal(out, reference(a, b))


def test_bit_casts_round_trip() -> None:
    import numba

    @numba.njit
    def round_trip(x, out):  # type: ignore[no-untyped-def]
        for i in range(x.size):
            out[i] = u32.bits_from_f32(u32.f32_from_bits(x[i]))

    bits = np.array([0, 1, 0x7F800000, 0x7FC00001, 0xFF800001, 0x80000000, 0x3F800000], np.uint32)
    out = np.empty_like(bits)
    round_trip(bits, out)
    np.testing.assert_array_equal(out, bits)  # a signalling NaN's bits too: a bit cast, not a conversion


def test_a_carry_out_of_bit_31_is_dropped_before_a_shift() -> None:
    """Where 64-bit arithmetic would differ: a sum or difference that wraps, shifted right afterwards (a store
    into a uint32 array would hide the difference by truncating)."""
    import numba

    @numba.njit
    def shifted(a, b, out):  # type: ignore[no-untyped-def]
        for i in range(a.size):
            out[0, i] = u32.shr32(u32.add32(a[i], b[i]), 1)
            out[1, i] = u32.shr32(u32.sub32(a[i], b[i]), 1)

    a, b = (v.reshape(-1) for v in np.meshgrid(EDGES, EDGES))
    out = np.empty((2, a.size), np.uint32)
    shifted(a, b, out)
    np.testing.assert_array_equal(out[0], np.add(a, b) >> np.uint32(1))
    np.testing.assert_array_equal(out[1], np.subtract(a, b) >> np.uint32(1))
