"""A fake backend for tests: NumPy underneath, capabilities and failures on demand.

``FakeBackend`` lets the core and plugin authors test capability handling
without hardware, the way array-api-strict's fake devices lack a dtype:

    FakeBackend(storable={float32, bfloat16}, native={float32})   # bf16 storage only
    FakeBackend(missing=("matmul",))           # register_backend -> MissingKernelsError
    FakeBackend(fail_on=("exp", 2))            # the 2nd call of exp raises RuntimeError
    FakeBackend(defects=("truncating_casts",)) # a deliberate bug the conformance suite must catch

Compute kernels refuse inputs whose dtype is storable but neither native nor
emulated (TypeError), so a core that ignores ``capabilities()`` is caught.
Low precision computes in float32 and rounds once to nearest-even on output.
It shares no code with any real backend on purpose.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from typing import Any

import numpy as np

from .. import dtypes as dt
from ..backend import Availability, Backend, Capabilities
from ..expr import NUMPY, evaluator
from ..kernels import BINARY, COMPARISON
from . import numpy_kernels
from .defects import Disguised, apply_defects, check_defects, disguise
from .planted import without_roundings

__all__ = ["FakeBackend"]

_F32 = np.dtype(np.float32)
_np = numpy_kernels.np_dtype
_up = numpy_kernels.up
_UNARY_FNS, _BINARY_FNS, _COMPARE_FNS = numpy_kernels.UNARY, numpy_kernels.BINARY, numpy_kernels.COMPARE


def _elementwise(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Compute in float32 (or the input's own type) and return the first array operand's dtype."""

    def kernel(*args: Any) -> Any:
        dtype = next((a.dtype for a in args if isinstance(a, np.ndarray)), None)
        if dtype is None:  # only numbers (a composed program's node on a scalar operand): a number again
            with np.errstate(all="ignore"):
                return np.float64(fn(*[np.float64(a) for a in args]))
        with np.errstate(all="ignore"):  # IEEE results (and the rounding to float16 that overflows) are quiet
            return np.asarray(fn(*[_up(a) for a in args])).astype(dtype, copy=False)

    return kernel


def _compare(fn: Callable[..., Any]) -> Callable[..., Any]:
    return lambda a, b: np.asarray(fn(_up(a), _up(b)))


def _where(cond: np.ndarray, a: Any, b: Any) -> np.ndarray:
    dtype = next(v.dtype for v in (a, b) if isinstance(v, np.ndarray))
    return np.where(cond, np.asarray(a, dtype=dtype), np.asarray(b, dtype=dtype)).astype(dtype)


def _reduce(fn: Callable[..., Any], int64_for_ints: bool) -> Callable[..., Any]:
    """A reduction in float32 (float64 stays float64); sums of bool/int give int64."""

    def kernel(x: np.ndarray, *args: Any) -> np.ndarray:
        if x.dtype.kind in "biu" and int64_for_ints:
            return np.asarray(fn(x.astype(np.int64), *args))
        return np.asarray(fn(_up(x), *args)).astype(x.dtype)

    return kernel


def _sum(x: np.ndarray, axes: tuple[int, ...], keepdims: bool) -> np.ndarray:
    return _reduce(np.sum, True)(x, axes, None, None, keepdims)


def _max(x: np.ndarray, axes: tuple[int, ...], keepdims: bool) -> np.ndarray:
    return _reduce(np.max, False)(x, axes, None, keepdims)


def _slice_assign(base: np.ndarray, index: tuple, values: np.ndarray) -> np.ndarray:
    out = base.copy()
    out[index] = values
    return out


def _pad(x: np.ndarray, widths: Any, value: float) -> np.ndarray:
    out = np.full(tuple(n + lo + hi for n, (lo, hi) in zip(x.shape, widths)), value, dtype=x.dtype)
    out[tuple(slice(lo, lo + n) for n, (lo, _) in zip(x.shape, widths))] = x
    return out


def _scatter_add(src: np.ndarray, indices: np.ndarray, axis: int, size: int) -> np.ndarray:
    moved = np.moveaxis(_up(src), axis, 0)
    out = np.zeros((size,) + moved.shape[1:], dtype=moved.dtype)
    np.add.at(out, indices, moved)
    return np.moveaxis(out, 0, axis).astype(src.dtype)


def _random(method: str) -> Callable[..., np.ndarray]:
    def kernel(shape: tuple[int, ...], dtype: Any, seed: int, device_index: int = 0) -> np.ndarray:
        out = dt.convert(getattr(np.random.default_rng(seed), method)(shape), dtype)
        if method == "random" and out.dtype.itemsize == 2:  # rounding up to 1.0 would leave [0, 1)
            np.minimum(out, np.nextafter(out.dtype.type(1), out.dtype.type(0)), out=out)
        return out

    return kernel


def _unscale_and_check(grads: list, inv_scale: np.ndarray, found_inf: np.ndarray) -> tuple[list, np.ndarray]:
    with np.errstate(all="ignore"):
        out = [(_up(g) * inv_scale.reshape(())).astype(g.dtype) for g in grads]
    bad = any(not np.isfinite(_up(g)).all() for g in out)
    return out, np.asarray([1.0 if bad else float(found_inf.reshape(-1)[0])], dtype=_F32).reshape(found_inf.shape)


def _update_scale(
    scale: np.ndarray,
    tracker: np.ndarray,
    found_inf: np.ndarray,
    growth_factor: float,
    backoff_factor: float,
    growth_interval: int,
) -> tuple[np.ndarray, np.ndarray]:
    s, t = float(scale.reshape(-1)[0]), int(tracker.reshape(-1)[0])
    with np.errstate(over="ignore"):
        if float(found_inf.reshape(-1)[0]):
            s, t = s * backoff_factor, 0
        elif t + 1 == growth_interval:
            s, t = (s * growth_factor if np.isfinite(np.float32(s * growth_factor)) else s), 0
        else:
            t += 1
    return np.full(scale.shape, s, dtype=scale.dtype), np.full(tracker.shape, t, dtype=tracker.dtype)


def _primitives() -> dict[str, Callable[..., Any]]:
    table: dict[str, Callable[..., Any]] = {}
    table.update({n: _elementwise(fn) for n, fn in _UNARY_FNS.items()})
    table.update({n: _elementwise(_BINARY_FNS[n]) for n in BINARY})
    table.update({n: _compare(_COMPARE_FNS[n]) for n in COMPARISON})
    table.update(
        cast=dt.convert,
        where=_where,
        sum=_sum,
        max=_max,
        argmax=lambda x, axis: np.asarray(np.argmax(_up(x), axis=axis), dtype=np.int64),
        cumsum=_reduce(np.cumsum, True),
        matmul=_elementwise(np.matmul),
        reshape=np.reshape,
        transpose=np.transpose,
        broadcast_to=np.broadcast_to,
        slice=lambda x, index: x[index],
        slice_assign=_slice_assign,
        pad=_pad,
        concat=lambda xs, axis: np.concatenate(list(xs), axis=axis),
        take=lambda x, indices, axis: np.take(x, indices, axis=axis),
        scatter_add=_scatter_add,
        full=lambda shape, value, dtype, device_index=0: np.full(shape, value, dtype=_np(dtype)),
        arange=lambda start, stop, step, dtype, device_index=0: dt.convert(np.arange(start, stop, step), dtype),
        uniform=_random("random"),
        normal=_random("standard_normal"),
        unscale_and_check=_unscale_and_check,
        update_scale=_update_scale,
    )
    return table


# Kernels that compute on their inputs' dtype (capability-checked); the rest only move or convert data.
_COMPUTE = frozenset((*_UNARY_FNS, *BINARY, *COMPARISON, "where", "sum", "max", "argmax", "cumsum", "matmul"))


class FakeBackend(Backend):
    """A NumPy-backed backend whose capabilities, kernel set and failures are chosen by the test.

    ``storable``/``native``/``emulated`` are dtype collections (default: every
    dtype storable, float16/bfloat16 emulated); ``missing`` names kernels to
    leave out; ``fail_on=(kernel, k)`` makes the k-th call (1-based) of that
    kernel raise RuntimeError; ``devices`` is the device count, and
    ``unusable`` maps a device index to the reason it cannot run kernels;
    ``fallback_ops`` maps a dtype to ops the device claims it cannot run in it,
    and ``policy`` names the built-in cast-policy table it starts from.
    ``defects`` names deliberate bugs from :data:`ampcore.testing.defects.DEFECTS`.
    ``float8="emulated"`` (or ``"native"``) claims float8 (the float8 dtypes
    become storable; ``quantize_float8`` and ``scaled_mm`` run as the core's
    compositions of its primitives); ``float8_reason`` is the reason a
    ``"none"`` device gives.
    """

    def __init__(
        self,
        name: str = "fake",
        *,
        storable: Collection[Any] | None = None,
        native: Collection[Any] | None = None,
        emulated: Collection[Any] | None = None,
        missing: Collection[str] = (),
        fail_on: tuple[str, int] | None = None,
        priority: int = 0,
        devices: int = 1,
        autocast_dtype: Any = None,
        fallback_ops: Mapping[Any, Collection[str]] | None = None,
        policy: str = "cpu",
        defects: Collection[str] = (),
        unusable: Mapping[int, str] | None = None,
        float8: str = "none",
        float8_reason: str = "",
    ):
        as_set = lambda ds: frozenset(dt.as_dtype(d) for d in ds)  # noqa: E731 - local conversion
        self.name = name
        self.priority = priority
        self.storable = as_set(dt.ALL_DTYPES if storable is None else storable)
        if float8 != "none":
            self.storable |= frozenset(dt.FLOAT8_DTYPES)
        self.float8, self.float8_reason = float8, float8_reason
        default_native = {dt.float64, dt.float32, dt.int64, dt.int32, dt.bool_}
        self.native = as_set(default_native if native is None else native) & self.storable
        emulated = dt.LOW_PRECISION_DTYPES if emulated is None else emulated
        self.emulated = as_set(emulated) & (self.storable - self.native)
        self.missing = frozenset(missing)
        self.fail_on = fail_on
        self.devices = devices
        self.autocast_dtype = dt.as_dtype(autocast_dtype) if autocast_dtype is not None else None
        self.fallback_ops = {dt.as_dtype(d): frozenset(ops) for d, ops in (fallback_ops or {}).items()}
        self.policy = policy
        self.defects = check_defects(defects)
        self.calls: dict[str, int] = {}
        self.unusable = dict(unusable or {})

    def availability(self) -> Availability:
        if all(i in self.unusable for i in range(self.devices)):
            return Availability(False, "no usable device: " + "; ".join(self.unusable.values()))
        return Availability(True)

    def device_count(self) -> int:
        return self.devices

    def device_status(self, index: int = 0) -> Availability:
        return Availability(index not in self.unusable, self.unusable.get(index, ""))

    def capabilities(self, index: int = 0) -> Capabilities:
        return Capabilities(
            device_name=f"fake device {index}",
            storable=self.storable,
            native=self.native,
            emulated=self.emulated,
            autocast_dtype=self.autocast_dtype,
            memory_bytes=1 << 30,
            policy=self.policy,
            fallback_ops=self.fallback_ops,
            float8=self.float8,
            float8_reason=self.float8_reason,
        )

    def kernel_functions(self) -> Mapping[str, Callable[..., Any]]:
        table = apply_defects(_primitives(), self.defects)
        return {name: self._wrap(name, fn) for name, fn in table.items() if name not in self.missing}

    def _wrap(self, name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        computable = {d.numpy for d in self.native | self.emulated}

        def kernel(*args: Any, **kwargs: Any) -> Any:
            self.calls[name] = self.calls.get(name, 0) + 1
            if self.fail_on is not None and self.fail_on == (name, self.calls[name]):
                raise RuntimeError(
                    f"fake backend {self.name!r}: injected failure in call {self.calls[name]} of kernel {name!r}"
                )
            if name in _COMPUTE:
                for a in args:
                    if isinstance(a, np.ndarray) and a.dtype != np.bool_ and a.dtype not in computable:
                        raise TypeError(
                            f"fake backend {self.name!r} stores {a.dtype} but cannot compute {name!r} on it"
                        )
            return fn(*args, **kwargs)

        kernel.__name__ = name
        return kernel

    def fused_kernel(self, program: Any, operand_dtypes: Any, result_dtype: Any) -> Any:
        """A captured step's fused chain (:meth:`ampcore.Backend.fused_kernel`) evaluated with NumPy: each operand
        widened to the compute type (float32, float64 for float64), each node a ufunc there, the rounding
        nodes' ``astype`` round trips, the result rounded once."""
        if "fusion_drops_rounding" in self.defects:
            program = without_roundings(program)
        compute = np.float64 if dt.float64 in (*operand_dtypes, result_dtype) else np.float32
        fn = evaluator(program, NUMPY)
        out = result_dtype.numpy

        def kernel(*operands: Any) -> np.ndarray:
            widened = [a.astype(compute) if a.dtype != np.bool_ else a for a in operands]
            with np.errstate(all="ignore"):
                return np.asarray(fn(*widened)).astype(out)

        return kernel

    def capture_support(self) -> str:
        return "kernels called back to back (the core's runner); elementwise chains fused (NumPy, one node a time)"

    def from_numpy(self, array: np.ndarray, dtype: Any, device_index: int = 0) -> np.ndarray:
        dtype = dt.as_dtype(dtype)
        if dtype not in self.storable:
            raise TypeError(f"fake backend {self.name!r} cannot store {dtype.name}")
        if "float32_inside" in self.defects and dtype in dt.LOW_PRECISION_DTYPES:
            return disguise(dt.convert(array, dtype), dtype)
        return dt.convert(array, dtype)

    def to_numpy(self, array: np.ndarray) -> np.ndarray:
        if isinstance(array, Disguised):
            return np.asarray(array).view(np.ndarray).astype(array.claimed.numpy)
        return np.array(array, copy=True)

    def dtype_of(self, array: Any) -> dt.DType:
        return array.claimed if isinstance(array, Disguised) else dt.as_dtype(array.dtype)
