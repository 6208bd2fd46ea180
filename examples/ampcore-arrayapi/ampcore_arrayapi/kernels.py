"""Every ampcore primitive kernel, written with Array API functions only.

``primitive_table(ns, put, get)`` builds the table for one namespace; ``put``
moves a host NumPy array to a device (the backend's ``from_numpy``) and
``get`` back, used where the standard has nothing to compute with: random
numbers and the bookkeeping of scatter-add's indices.

float16 (an extension some namespaces have, see :mod:`.namespace`) is
computed in float32 and rounded once on output.  Where the standard lacks a
function the kernel says how it does without: erf (:mod:`.special`),
scatter-add (one ``sum`` per distinct index), random numbers (NumPy's
generator on the host, the stream ampcore's cpu backend draws, copied over).
Two library quirks are worked around in the standard's terms: float64 ->
float16 rounding twice through float32 (PyTorch; probed at start) and
negative slice steps refused (PyTorch: a ``flip``).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ampcore import dtypes as dt
from ampcore import expr

from . import special
from .namespace import Namespace

Kernel = Callable[..., Any]

_FUNCTIONS = {
    "add": "add",
    "sub": "subtract",
    "mul": "multiply",
    "div": "divide",
    "pow": "pow",
    "maximum": "maximum",
    "minimum": "minimum",
    "eq": "equal",
    "ne": "not_equal",
    "lt": "less",
    "le": "less_equal",
    "gt": "greater",
    "ge": "greater_equal",
}


def _scalar(v: Any) -> bool:
    """A Python number (NumPy scalars subclass float and int but are not operands the core passes)."""
    return isinstance(v, (bool, int, float)) and not hasattr(v, "shape")


def _quiet(fn: Kernel) -> Kernel:
    """IEEE results (inf, NaN) without NumPy's floating-point warnings, for namespaces NumPy computes for; and a
    0-d array where NumPy returns a NumPy scalar (its ufuncs and full reductions do: the standard says array)."""

    def kernel(*args: Any, **kwargs: Any) -> Any:
        with np.errstate(all="ignore"):
            out = fn(*args, **kwargs)
        return np.asarray(out) if isinstance(out, np.generic) else out

    kernel.__name__ = getattr(fn, "__name__", "kernel")
    return kernel


class _Kernels:
    """The kernels of one namespace: small methods over ``self.xp``."""

    def __init__(
        self, ns: Namespace, put: Callable[[np.ndarray, dt.DType, int], Any], get: Callable[[Any], np.ndarray]
    ):
        self.ns, self.xp, self.put, self.get = ns, ns.xp, put, get
        self.low = ns.float16
        self.f32 = self.xp.float32
        # erf and the loss-scale products work in float64 (every device used has it: namespace.REQUIRED)
        self.wide = self.xp.float64
        self.double_rounds = self._probe_double_rounding()

    # --- helpers -------------------------------------------------------
    def is_low(self, x: Any) -> bool:
        return self.low is not None and x.dtype == self.low

    def up(self, x: Any) -> Any:
        return self.xp.astype(x, self.f32) if self.is_low(x) else x

    def operands(self, *args: Any) -> tuple[Any, list[Any]]:
        """(the array operands' dtype, the operands as arrays in their compute dtype): a Python scalar takes
        the array's dtype, float16 arrays become float32."""
        xp = self.xp
        array = next(a for a in args if not _scalar(a))
        compute = self.f32 if self.is_low(array) else array.dtype
        return array.dtype, [
            xp.asarray(a, dtype=compute, device=array.device) if _scalar(a) else self.up(a) for a in args
        ]

    def lowp(self, fn: Kernel) -> Kernel:
        """``fn`` on the operands in their compute dtype, rounded once to the input dtype."""

        def kernel(*args: Any) -> Any:
            dtype, arrays = self.operands(*args)
            out = fn(*arrays)
            return out if out.dtype == dtype else self.xp.astype(out, dtype)

        return kernel

    def compare(self, fn: Kernel) -> Kernel:
        return lambda *args: fn(*self.operands(*args)[1])

    # --- elementwise ---------------------------------------------------
    def erf(self, x: Any) -> Any:
        """erf in float64 (the standard has none): the program's kernel rounds it once to the dtype."""
        return special.erf(self.xp, self.xp.astype(x, self.wide))

    def lifted(self, fn: Kernel) -> Kernel:
        """``fn`` with a Python-number operand made an array of the other's dtype (a program's constants are
        Python numbers; functions of the standard before 2024.12 take arrays only)."""

        def call(*args: Any) -> Any:
            return fn(*self.operands(*args)[1]) if any(_scalar(a) for a in args) else fn(*args)

        return call

    def elementwise(self, prog: expr.Program) -> Kernel:
        """The kernel of ``prog`` (ampcore's ``elementwise`` primitive): the program evaluated with this
        namespace's functions (:func:`ampcore.expr.evaluator`), in float32 for float16, rounded once."""
        direct = expr.direct_call(prog)
        if direct == "select":
            return _quiet(self.where)
        fn = self.functions[direct] if direct is not None else expr.evaluator(prog, self.functions)
        return _quiet(self.compare(fn) if prog.result == "b" else self.lowp(fn))

    @property
    def functions(self) -> dict[str, Kernel]:
        """Each function of ampcore's expression language in this namespace."""
        xp = self.xp
        table: dict[str, Kernel] = {"neg": xp.negative, "abs": xp.abs, "sign": self.sign, "erf": self.erf}
        table.update({n: getattr(xp, n) for n in ("exp", "log", "sqrt", "tanh", "sin", "cos", "log1p", "expm1")})
        table.update({n: self.lifted(getattr(xp, f)) for n, f in _FUNCTIONS.items()})
        table.update({"select": self.where, "and": xp.logical_and, "or": xp.logical_or, "not": xp.logical_not})
        return table

    def sign(self, x: Any) -> Any:
        return self.xp.asarray(x, copy=True) if x.dtype == self.xp.bool else self.xp.sign(x)

    def where(self, cond: Any, a: Any, b: Any) -> Any:
        xp = self.xp
        array = next(v for v in (a, b) if not _scalar(v))
        a, b = (xp.asarray(v, dtype=array.dtype, device=array.device) if _scalar(v) else v for v in (a, b))
        return xp.where(cond, a, b)

    def _probe_double_rounding(self) -> bool:
        """Whether float64 -> float16 goes through float32 (PyTorch): 65519.99999999999 rounds to 65520.0 in
        float32, a float16 tie that goes to inf, though the value itself is nearer 65504."""
        if self.low is None:
            return False
        probe = self.xp.asarray(65519.99999999999, dtype=self.wide)
        return bool(self.xp.isinf(self.xp.astype(probe, self.low)))

    def _round_to_odd_f32(self, x: Any) -> Any:
        """float64 -> float32 rounded to odd: an inexact result gets an odd last bit, so rounding it again to
        float16 (13 bits fewer) rounds as the float64 value would.  Parity is y / ulp(y) mod 2."""
        xp = self.xp
        y = xp.astype(x, self.f32)
        inexact = xp.astype(y, self.wide) != x
        ulp = xp.nextafter(y, xp.full_like(y, math.inf)) - y
        even = xp.remainder(y / ulp, 2.0) == 0.0
        toward = xp.where(xp.astype(y, self.wide) < x, xp.full_like(y, math.inf), xp.full_like(y, -math.inf))
        return xp.where(xp.logical_and(inexact, even), xp.nextafter(y, toward), y)

    def cast(self, x: Any, dtype: dt.DType) -> Any:
        target = self.ns.dtype(dtype)
        if self.double_rounds and x.dtype == self.wide and target == self.low:
            return self.xp.astype(self._round_to_odd_f32(x), target)
        return self.xp.astype(x, target, copy=True)

    # --- reductions ----------------------------------------------------
    def _numeric(self, x: Any) -> Any:
        """bool as int64 (the standard reduces numeric dtypes only), float16 as float32."""
        return self.xp.astype(x, self.xp.int64) if x.dtype == self.xp.bool else self.up(x)

    def _summed_dtype(self, x: Any) -> Any:
        return x.dtype if self.xp.isdtype(x.dtype, "real floating") else self.xp.int64

    def sum(self, x: Any, axes: tuple[int, ...], keepdims: bool) -> Any:
        target = self._summed_dtype(x)
        v = self._numeric(x)
        # accumulate in float32 for float16 (the contract) and in int64 for integers (no int32 overflow)
        out = self.xp.sum(v, axis=axes, keepdims=keepdims, dtype=v.dtype if target != self.xp.int64 else target)
        return self.xp.astype(out, target, copy=False)

    def max(self, x: Any, axes: tuple[int, ...], keepdims: bool) -> Any:
        if x.dtype == self.xp.bool:
            return self.xp.any(x, axis=axes, keepdims=keepdims)
        return self.xp.max(x, axis=axes, keepdims=keepdims)

    def argmax(self, x: Any, axis: int) -> Any:
        return self.xp.astype(self.xp.argmax(self._numeric(x), axis=axis), self.xp.int64)

    def cumsum(self, x: Any, axis: int) -> Any:
        xp, target = self.xp, self._summed_dtype(x)
        v = self._numeric(x)
        return xp.astype(xp.cumulative_sum(v, axis=axis, dtype=v.dtype), target, copy=False)

    def matmul(self, a: Any, b: Any) -> Any:
        if self.is_low(a):  # float32 products and accumulation, one rounding on output
            return self.xp.astype(self.xp.matmul(self.up(a), self.up(b)), a.dtype)
        return self.xp.matmul(a, b)

    # --- shape and indexing --------------------------------------------
    @staticmethod
    def full_index(index: tuple) -> tuple:
        """The core indexes leading axes only; the standard wants every axis named, so ``...`` names the rest."""
        return tuple(index) + (Ellipsis,)

    def _positive(self, shape: tuple[int, ...], index: tuple) -> tuple[tuple[int, ...], tuple]:
        """(axes to flip, ``index`` with positive steps on the flipped array): PyTorch refuses negative steps."""
        flips, positive = [], []
        for axis, s in enumerate(index):
            if isinstance(s, slice) and s.step is not None and s.step < 0:
                start, stop, step = s.indices(shape[axis])
                flips.append(axis)
                positive.append(slice(shape[axis] - 1 - start, shape[axis] - 1 - stop, -step))
            else:
                positive.append(s)
        return tuple(flips), self.full_index(tuple(positive))

    def slice(self, x: Any, index: tuple) -> Any:
        flips, positive = self._positive(tuple(x.shape), index)
        return (self.xp.flip(x, axis=flips) if flips else x)[positive]

    def slice_assign(self, base: Any, index: tuple, values: Any) -> Any:
        flips, positive = self._positive(tuple(base.shape), index)
        # a copy (NumPy's flip is a view of base); the flipped region lists the elements in the
        # original index's order, so ``values`` go in as they are
        out = self.xp.asarray(self.xp.flip(base, axis=flips) if flips else base, copy=True)
        out[positive] = values
        return self.xp.flip(out, axis=flips) if flips else out

    def pad(self, x: Any, widths: Sequence[tuple[int, int]], value: float) -> Any:
        shape = tuple(n + lo + hi for n, (lo, hi) in zip(x.shape, widths))
        out = self.xp.full(shape, value, dtype=x.dtype, device=x.device)
        out[tuple(slice(lo, lo + n) for n, (lo, _) in zip(x.shape, widths))] = x
        return out

    def scatter_add(self, src: Any, indices: Any, axis: int, size: int) -> Any:
        """One ``sum`` per distinct index: the standard has no scatter, and a one-hot matmul would turn a
        single inf into NaN everywhere (0 * inf).  The indices are read on the host."""
        xp = self.xp
        order = (axis,) + tuple(i for i in range(src.ndim) if i != axis)
        moved = xp.permute_dims(self._numeric(src), order)
        out = xp.zeros((size,) + tuple(moved.shape[1:]), dtype=moved.dtype, device=src.device)
        host = self.get(indices)
        for target in np.unique(host):
            rows = xp.take(moved, xp.asarray(np.flatnonzero(host == target), device=src.device), axis=0)
            out[int(target), ...] = xp.sum(rows, axis=0, dtype=moved.dtype)
        back = tuple(order.index(i) for i in range(src.ndim))
        return xp.astype(xp.permute_dims(out, back), src.dtype, copy=False)

    # --- creation ------------------------------------------------------
    def full(self, shape: tuple[int, ...], value: Any, dtype: dt.DType, device_index: int = 0) -> Any:
        return self.xp.full(shape, value, dtype=self.ns.dtype(dtype), device=self.ns.devices[device_index])

    def arange(self, start: float, stop: float, step: float, dtype: dt.DType, device_index: int = 0) -> Any:
        xp, target = self.xp, self.ns.dtype(dtype)
        device = self.ns.devices[device_index]
        if not dtype.is_floating_point:
            return xp.arange(start, stop, step, dtype=target, device=device)
        # in the widest float, then rounded once: float16 steps would accumulate error
        return xp.astype(xp.arange(start, stop, step, dtype=self.wide, device=device), target)

    def uniform(self, shape: tuple[int, ...], dtype: dt.DType, seed: int, device_index: int = 0) -> Any:
        drawn = np.float64 if dtype is dt.float64 else np.float32
        values = np.random.default_rng(seed).random(shape, dtype=drawn).astype(dtype.numpy)
        if dtype.itemsize == 2:  # a float32 sample just below 1 rounds up to 1.0 in 2 bytes: keep [0, 1)
            values = np.minimum(values, np.nextafter(dtype.numpy.type(1), dtype.numpy.type(0)))
        return self.put(values, dtype, device_index)

    def normal(self, shape: tuple[int, ...], dtype: dt.DType, seed: int, device_index: int = 0) -> Any:
        drawn = np.float64 if dtype is dt.float64 else np.float32
        return self.put(np.random.default_rng(seed).standard_normal(shape, dtype=drawn), dtype, device_index)

    # --- AMP -------------------------------------------------------------
    def unscale_and_check(self, grads: list[Any], inv_scale: Any, found_inf: Any) -> tuple[list[Any], Any]:
        """Scale each gradient and fold "any element not finite" into ``found_inf``, all on the device."""
        xp = self.xp
        inv = xp.reshape(inv_scale, ())
        out = []
        for g in grads:
            u = self.up(g) * xp.astype(inv, self.up(g).dtype)
            u = xp.astype(u, g.dtype, copy=False)
            out.append(u)
            found_inf = xp.where(xp.all(xp.isfinite(u)), found_inf, xp.ones_like(found_inf))
        return out, found_inf

    def update_scale(
        self,
        scale: Any,
        tracker: Any,
        found_inf: Any,
        growth_factor: float,
        backoff_factor: float,
        growth_interval: int,
    ) -> tuple[Any, Any]:
        """torch's rule with ``where`` instead of branches (no host sync); products in float64, rounded once."""
        xp = self.xp
        wide = xp.astype(scale, self.wide)
        backed = xp.astype(wide * backoff_factor, self.f32)
        grown = xp.astype(wide * growth_factor, self.f32)
        grown = xp.where(xp.isfinite(grown), grown, scale)
        inf = found_inf > 0
        successful = tracker + 1
        due = successful == growth_interval
        new_scale = xp.where(inf, backed, xp.where(due, grown, scale))
        new_tracker = xp.where(xp.logical_or(inf, due), xp.zeros_like(tracker), successful)
        return new_scale, new_tracker


def primitive_table(
    ns: Namespace, put: Callable[[np.ndarray, dt.DType, int], Any], get: Callable[[Any], np.ndarray]
) -> dict[str, Kernel]:
    """Every primitive kernel for namespace ``ns``, keyed by its contract name."""
    k, xp = _Kernels(ns, put, get), ns.xp
    table: dict[str, Kernel] = dict(
        elementwise=k.elementwise,
        cast=k.cast,
        where=k.where,
        sum=k.sum,
        max=k.max,
        argmax=k.argmax,
        cumsum=k.cumsum,
        matmul=k.matmul,
        reshape=lambda x, shape: xp.reshape(x, tuple(shape)),
        transpose=lambda x, axes: xp.permute_dims(x, tuple(axes)),
        broadcast_to=lambda x, shape: xp.broadcast_to(x, tuple(shape)),
        slice=k.slice,
        slice_assign=k.slice_assign,
        pad=k.pad,
        concat=lambda xs, axis: xp.concat(list(xs), axis=axis),
        take=lambda x, indices, axis: xp.take(x, indices, axis=axis),
        scatter_add=k.scatter_add,
        full=k.full,
        arange=k.arange,
        uniform=k.uniform,
        normal=k.normal,
        unscale_and_check=k.unscale_and_check,
        update_scale=k.update_scale,
    )
    return {name: fn if name == "elementwise" else _quiet(fn) for name, fn in table.items()}
