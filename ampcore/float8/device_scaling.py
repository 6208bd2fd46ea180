"""The float8 recipes' scale rules on the device: the same float32 numbers as :mod:`ampcore.float8.scaling`,
composed from primitive ops on Tensors, so a training step never reads an amax or a scale on the host.

:mod:`ampcore.float8.scaling` is the reference (float32 NumPy); every function here gives its bits (the tests
compare them on each backend).  The float32 divisions are correctly rounded on every backend, as NumPy's are.

Rounding a scale down to a power of two without ``frexp`` or a bit cast (no primitive has them): Veltkamp's
split with ``C = 2**23 + 1`` rounds a float32 ``s`` to one significant bit, ``hi = (s*C) - ((s*C) - s)``, which
is ``2**e`` or ``2**(e+1)`` for ``2**e <= s < 2**(e+1)``; halving it where it exceeds ``s`` gives ``2**e``.
The products are exact below 2**104, so a scale of 2**64 or more is split after a multiplication by 2**-64
(exact) and multiplied back; every scale a recipe makes is a normal float32 number, where the split is exact.
"""

from __future__ import annotations

from typing import Literal

from .. import dtypes as dt
from ..creation import zeros
from ..ops import cat, where
from ..tensor import Tensor
from .scaling import AMAX_EPS, EMAX, FP8_MAX

__all__ = ["round_down_pow2", "current_scale", "delayed_scale", "mx_scale", "AmaxHistory"]

_SPLIT = float(2**23 + 1)  # Veltkamp's constant for one significant bit of a 24-bit float32 significand
_BIG = 2.0**64
_INF = float("inf")


def _finite_positive(a: Tensor) -> Tensor:
    """``0 < a < inf``: false for 0, inf and NaN (every comparison with NaN is false)."""
    return where(a < _INF, a, 0.0) > 0.0


def round_down_pow2(s: Tensor) -> Tensor:
    """``2 ** floor(log2(s))`` of a positive float32 tensor, exactly (inf and NaN stay as they are)."""
    big = s >= _BIG
    v = where(big, s * (1.0 / _BIG), s)
    t = v * _SPLIT
    hi = t - (t - v)
    p = where(hi > v, hi * 0.5, hi)
    p = where(big, p * _BIG, p)
    return where(s < _INF, p, s)


def current_scale(amax: Tensor, dtype_name: str, round_to_pow2: bool = False) -> Tensor:
    """:func:`ampcore.float8.scaling.current_scale` on the device: ``fp8_max / max(amax, eps)``, 1 where
    ``amax`` is inf or NaN; ``amax`` float32, any shape."""
    finite = amax < _INF  # false for inf and NaN
    scale = where(finite, FP8_MAX[dtype_name] / amax.maximum(float(AMAX_EPS)), 1.0)
    return round_down_pow2(scale) if round_to_pow2 else scale


def delayed_scale(
    amax: Tensor, previous: Tensor | float, dtype_name: str, *, margin: int = 0, round_to_pow2: bool = False
) -> Tensor:
    """:func:`ampcore.float8.scaling.delayed_scale` on the device, given the history's amax (its max or most
    recent): ``(fp8_max / amax) / 2**margin``; ``previous`` where ``amax`` is 0, inf or NaN."""
    scale = (FP8_MAX[dtype_name] / amax) / float(2.0**margin)
    if round_to_pow2:
        scale = round_down_pow2(scale)
    ok = _finite_positive(amax)
    if isinstance(previous, Tensor):
        return where(ok, scale, previous)
    return where(ok, scale, float(previous))


def mx_scale(amax: Tensor, dtype_name: str) -> Tensor:
    """:func:`ampcore.float8.scaling.mx_scale` on the device: ``2 ** -(floor(log2(amax)) - emax)`` with the
    exponent clamped to e8m0's [-127, 127], 1 where the block is all zero or not finite.

    ``amax`` below ``2**(emax - 127)`` has its exponent clamped: the multiplier is 2**127.  Above it the
    multiplier is ``2**emax / 2**floor(log2(amax))``, a quotient of two powers of two (exact), and the split
    only ever sees normal numbers.
    """
    emax = EMAX[dtype_name]
    low = 2.0 ** (emax - 127)
    p = round_down_pow2(amax.maximum(low))
    scale = where(amax < low, 2.0**127, float(2.0**emax) / p)
    return where(_finite_positive(amax), scale, 1.0)


class AmaxHistory:
    """Delayed scaling's state on the device: the last ``length`` amaxes (a float32 buffer, zeros before the
    first casts: amaxes are never negative, so the zeros change no maximum) and the scale they give.

    ``scale`` is None until the first cast, which scales by its own amax; ``steps`` counts the amaxes appended
    eagerly (a host counter: no read; a captured step's replays do not run it).
    """

    def __init__(self, length: int) -> None:
        self.length = length
        self.values: Tensor | None = None
        self.scale: Tensor | None = None
        self.steps = 0

    def __len__(self) -> int:
        return min(self.steps, self.length)

    def append(self, amax: Tensor) -> None:
        """Add a 0-d float32 amax, dropping the oldest once ``length`` are kept."""
        if self.values is None:
            self.values = zeros(self.length, dtype=dt.float32, device=amax.device)
        # In place (the same tensor, a new array): a captured step writes it back as state (ampcore.capture).
        self.values.copy_(cat([self.values[1:], amax.reshape(1)]))
        self.steps += 1

    def amax(self, algo: Literal["max", "most_recent"]) -> Tensor:
        """The history's amax: its maximum (NaN if it holds one) or the most recent."""
        if self.values is None:
            raise ValueError("the amax history is empty: append an amax first")
        return self.values.amax() if algo == "max" else self.values[-1]
