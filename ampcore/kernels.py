"""The kernel contract: the primitive set every backend implements, and the
optional fused kernels.

Kernels work on backend arrays, never on Tensors.  The core checks shapes,
devices and dtypes before it calls a kernel, so a kernel may assume its inputs
are valid: binary kernels get operands of one dtype (already promoted) whose
shapes broadcast; reductions get normalised non-negative axes.

Low-precision contract: a kernel on float16/bfloat16 inputs returns float16/
bfloat16 outputs, rounded once to nearest-even from a float32 (or better)
result; reductions and matmul accumulate in at least float32.

Scalars: an elementwise kernel (a program's: the binary ops, the comparisons,
``where``, ...) accepts a Python number for any one operand; it takes the array
operands' dtype.

Ownership: ``cast`` always returns a new array, even to the same dtype (the
core uses it to copy).  Other kernels may return views of their inputs; the
core never writes into a kernel's output except through ``unscale_and_check``
and the fused optimizer step, on arrays it owns.

Primitive signatures (``x``, ``a``, ``b`` are backend arrays, ``dtype`` is an
:class:`ampcore.DType`):

======================  =====================================================
cast(x, dtype)          convert (round-to-nearest-even for narrowing floats)
elementwise(program)    -> the kernel of an elementwise program (ampcore.expr):
                        its operands broadcast (arrays of one dtype, a Python
                        number, bool arrays where ``program.inputs`` says
                        ``"b"``); the result in their dtype (bool where
                        ``program.result == "b"``), computed in float32 for
                        float16/bfloat16 (float64 for float64, wrapping
                        integers) and rounded once.  The table calls it once
                        per program and keeps the kernel under the program's
                        name (``k.exp``, ``k.add``, ``k.where``, ``k.eq``); a
                        backend may register its own kernel under a program's
                        name instead.  A backend that implements the
                        :data:`ELEMENTWISE_KERNELS` one by one instead has the
                        other programs composed of them
sum(x, axes, keepdims)  float32+ accumulation; bool/int input -> int64
max(x, axes, keepdims)  maximum over axes (NaN propagates)
argmax(x, axis)         int64 index of the first maximum along ``axis``
cumsum(x, axis)         inclusive prefix sum (float32+ accumulation)
matmul(a, b)            (..., m, k) @ (..., k, n), batch dims broadcast
reshape(x, shape)       same elements, new shape
transpose(x, axes)      permute axes
broadcast_to(x, shape)  broadcast (may return a view)
slice(x, index)         basic indexing; ``index`` is a tuple of ints and slices,
                        one per leading axis (steps may be negative)
slice_assign(base, index, values)
                        a copy of ``base`` with ``base[index] = values``
pad(x, widths, value)   constant padding; ``widths`` is ((lo, hi), ...) per axis
concat(xs, axis)        join a sequence of arrays of one dtype
take(x, indices, axis)  gather along ``axis`` with 1-D int64 ``indices``
scatter_add(src, indices, axis, size)
                        zeros with ``src``'s shape but ``size`` along ``axis``,
                        then ``out[.., indices[j], ..] += src[.., j, ..]``
full(shape, value, dtype, device_index)
arange(start, stop, step, dtype, device_index)
uniform(shape, dtype, seed, device_index)   U[0, 1), deterministic in ``seed``
normal(shape, dtype, seed, device_index)    N(0, 1), deterministic in ``seed``
unscale_and_check(grads, inv_scale, found_inf) -> (grads, found_inf)
                        multiply every gradient by ``inv_scale`` (a 1-element
                        float32 array) and set ``found_inf`` (1-element float32)
                        to 1.0 if any element of any *unscaled* gradient is
                        inf or NaN (so every non-finite input, and a finite one
                        that overflows when inv_scale > 1: no inf reaches the
                        optimizer); never clears it; one pass, on the device;
                        may work in place
update_scale(scale, growth_tracker, found_inf, growth_factor, backoff_factor,
             growth_interval) -> (scale, growth_tracker)
                        torch's dynamic loss-scale rule, on the device: scale
                        float32, tracker int32, found_inf > 0 means inf; the
                        products scale * factor rounded once to float32 (as
                        torch's float * double), growth skipped if not finite
======================  =====================================================

Integers: add sub mul pow maximum minimum (and neg abs sign) get int32/int64
operands and are exact in that dtype; pow gets non-negative exponents.  div and
the other unary kernels only ever see floating arrays: integer ``/`` is true
division, run in float32 by the core (torch's rule).  A Python float is never
passed with an integer or bool array.  Reductions get ``axes`` as a tuple,
never None, possibly empty (a 0-d input, or ``()``: nothing reduced).  Kernels
give IEEE results without emitting warnings (NumPy: ``np.errstate(all="ignore")``).

Output checks: every op checks that its kernel returned an array of a dtype
the backend knows, and elementwise ops that the dtype is their inputs' (well
under a microsecond).  With ``AMPCORE_DEBUG_KERNELS=1`` (or
:func:`set_debug_kernels`; the test and conformance suites turn it on) every
kernel's result shape and dtype are checked against what its arguments imply
(:mod:`ampcore.kernel_outputs`).  A mismatch raises :class:`KernelError`
naming the kernel.

The kernel gate: every call into a backend's kernels (and its array I/O) goes
through :class:`KernelGate` or :func:`ampcore.dispatch.call`, which turn a
backend's exception into :class:`KernelError` naming the kernel and device.

Fused kernels are optional; each has a reference composition of primitives in
the core (see :mod:`ampcore.nn.functional` and :mod:`ampcore.optim`).  Except
adamw_step and adamw_step_amp they return a new array of their first input's dtype and
(max_pool2d_tiled: the pooled) shape, computed in float32 or better (one rounding for
float16/bfloat16; the pooling kernels only move values), and raise nothing of their own
(the core validated the call):

======================  =====================================================
softmax(x, axis)        exp(x - max(x)) / sum(exp(x - max(x))) over ``axis``
                        (the maximum subtracted: no overflow)
softmax_backward(y, gy, axis)
                        y * (gy - sum(gy * y)), ``y`` the forward output
log_softmax(x, axis)    x - max(x) - log(sum(exp(x - max(x))))
log_softmax_backward(y, gy, axis)
                        gy - exp(y) * sum(gy)
gelu(x, approximate)    "none": x/2 (1 + erf(x / sqrt 2));
                        "tanh": x/2 (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))
gelu_backward(x, gy, approximate)
                        gy * gelu'(x)
max_pool2d_tiled(x, kernel)
                        (N, C, H, W) -> (N, C, H // kh, W // kw): the maximum
                        of each (kh, kw) window that tiles ``x`` (stride =
                        kernel), NaN where the window holds one; the values
                        are ``x``'s own (nothing is rounded)
max_pool2d_tiled_backward(x, g, kernel)
                        (N, C, H, W): ``g`` (N, C, H // kh, W // kw) at each
                        window's first maximum in row-major order (its first
                        NaN), zero elsewhere
adamw_step(params, grads, exp_avgs, exp_avg_sqs, *, step, lr, beta1, beta2,
           eps, weight_decay, decoupled) -> (params, exp_avgs, exp_avg_sqs)
                        one Adam (``decoupled=False``: weight decay is an L2
                        term added to the gradient) or AdamW
                        (``decoupled=True``: the parameter is multiplied by
                        1 - lr * weight_decay) step over lists of one length,
                        with the formula of
                        :func:`ampcore.optim.adam.adamw_step_reference`;
                        ``step`` >= 1 is the step number; moments in
                        :func:`adamw_moment_dtype`; may update its inputs in
                        place and returns the updated arrays.  Before writing
                        anything it raises TypeError for an array that is not
                        the backend's, then calls :func:`check_adamw_step`
                        (ValueError / TypeError)
adamw_step_amp(params, grads, exp_avgs, exp_avg_sqs, steps, skip, *, lr, beta1,
           beta2, eps, weight_decay, decoupled)
           -> (params, exp_avgs, exp_avg_sqs, steps)
                        adamw_step with no host read, for a fused optimizer
                        under a GradScaler (torch's fused path): ``steps``
                        and ``skip`` are 1-element float32 device arrays (the
                        steps taken so far; nonzero where the step must be
                        skipped: found inf/NaN or a failed input check).
                        Where ``skip`` is nonzero nothing is written and the
                        inputs come back; else one adamw_step numbered
                        ``steps + 1``, which it returns as the new ``steps``.
                        Reference composition (no host read):
                        :func:`ampcore.optim.adam.adamw_step_amp_reference`.
                        Optional even among fused kernels: without it a
                        fused optimizer under a GradScaler reads the found-inf
                        flag on the host once per step, as unfused ones do
quantize_float8(x, scale, dtype, saturate) -> (q, amax)
                        float8 training's cast, one pass: ``q = cast(x * scale,
                        dtype)`` with ``x * scale`` in float32 (``x`` float32,
                        bfloat16 or float16; ``scale`` a float32 array that
                        broadcasts to ``x``'s shape without changing it: 0-d
                        per tensor, (rows, 1) per row), ``dtype``
                        float8_e4m3fn or float8_e5m2, rounded to nearest-even;
                        ``saturate`` clamps to +-max first (NaN stays NaN),
                        else overflow is what the format has (e4m3fn: NaN,
                        e5m2: inf).  ``amax`` = max|x| as a 0-d float32 array
                        (NaN if any element is NaN; 0 for an empty ``x``).
                        Bit-exact against ml_dtypes (the reference composition
                        in :mod:`ampcore.ops.float8`)
quantize_float8_current(x, dtype, eps, rowwise, round_pow2) -> (q, scale, inv_scale, amax)
                        float8 training's cast with current scaling, one call
                        in place of the six it composes: ``amax = max|x|`` as
                        float32 (0-d; per row of a 2-D ``x`` with ``rowwise``,
                        (rows, 1)), ``scale = fp8_max / max(amax, eps)`` in
                        float32 where ``amax`` is finite, else 1, rounded down
                        to a power of two with ``round_pow2``; ``q`` is
                        ``quantize_float8(x, scale, dtype, True)`` and
                        ``inv_scale = 1 / scale`` (float32).  Bit-exact against
                        its composition (:func:`ampcore.float8.casting.current_cast`)
scaled_mm(a, b, scale_a, scale_b, out_dtype, bias, use_fast_accum) -> out
                        torch._scaled_mm on CPU: ``a`` (M, K) and ``b`` (K, N)
                        float8 (e4m3fn or e5m2), ``scale_a`` / ``scale_b`` the
                        float32 *dequantization* scales (0-d per tensor, or
                        (M, 1) and (1, N) per row / column), ``bias`` None or
                        (N,) float32/bfloat16/float16;  ``((a * scale_a) @
                        (b * scale_b) + bias)`` with each scaled operand
                        rounded to float32, float32 accumulation, rounded once
                        to ``out_dtype`` (float32, bfloat16 or float16).  A
                        native float8 GEMM (a GPU's; oneMKL's on the cpu
                        backend) applies the scales to the accumulator
                        instead (differences at float32 rounding); ``use_fast_accum``
                        may trade accumulation precision for speed there
scaled_mm_mx(a, b, scale_a, scale_b, out_dtype, bias, use_fast_accum) -> out
                        scaled_mm with OCP MX block scales: K a multiple of
                        32, ``scale_a`` (M, K/32) and ``scale_b`` (K/32, N)
                        float32 powers of two, one per 32 values along K;
                        ``((a * repeat(scale_a)) @ (b * repeat(scale_b)) +
                        bias)``, the scaled operands exact in float32, float32
                        accumulation, rounded once to ``out_dtype``
======================  =====================================================

Float8 kernels return a tuple (``quantize_float8``) or one array; none
records autograd (float8 training wraps them in its own autograd function).
A backend that implements none still runs them: the core composes
``cast``, ``mul``, ``where``, ``abs``, ``max`` and ``matmul`` (see
:mod:`ampcore.ops.float8`), on every backend whose capabilities store float8
(:attr:`ampcore.Capabilities.float8`).
"""

from __future__ import annotations

import math
import os
import weakref
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from . import expr
from .dtypes import FLOAT_DTYPES, DType, bfloat16, float16, float32, float64
from .expr.python import evaluator
from .forwarding import exact_wrapper
from .kernel_outputs import describe_args, rule_for

__all__ = [
    "UNARY",
    "BINARY",
    "COMPARISON",
    "ELEMENTWISE_KERNELS",
    "PRIMITIVES",
    "FUSED",
    "FLOAT8_KERNELS",
    "EPILOGUE_GEMMS",
    "KernelTable",
    "KernelError",
    "KernelGate",
    "KernelOutputError",
    "MissingKernelsError",
    "debug_kernels",
    "set_debug_kernels",
    "adamw_moment_dtype",
    "check_adamw_step",
    "set_float32_matmul_precision",
    "get_float32_matmul_precision",
    "FLOAT32_MATMUL_PRECISIONS",
    "exact_wrapper",
]

# The elementwise kernels a backend written before the ``elementwise`` primitive implements one by one (each
# is now the program of that name, :mod:`ampcore.expr`): such a backend still works, every other elementwise
# op composed of these kernels (:meth:`KernelTable._compose`).
UNARY = ("neg", "abs", "exp", "log", "sqrt", "rsqrt", "tanh", "sigmoid", "erf", "sign", "sin", "cos")
BINARY = ("add", "sub", "mul", "div", "pow", "maximum", "minimum")
COMPARISON = ("eq", "ne", "lt", "le", "gt", "ge")
ELEMENTWISE_KERNELS: frozenset[str] = frozenset(UNARY + BINARY + COMPARISON + ("where",))
"""The one-by-one elementwise kernels a backend may implement instead of the ``elementwise`` primitive."""
_STRUCTURAL = (
    "cast",
    "elementwise",
    "sum",
    "max",
    "argmax",
    "cumsum",
    "matmul",
    "reshape",
    "transpose",
    "broadcast_to",
    "slice",
    "slice_assign",
    "pad",
    "concat",
    "take",
    "scatter_add",
    "full",
    "arange",
    "uniform",
    "normal",
    "unscale_and_check",
    "update_scale",
)
PRIMITIVES: frozenset[str] = frozenset(_STRUCTURAL)
FUSED: frozenset[str] = frozenset(
    {
        "softmax",
        "softmax_backward",
        "log_softmax",
        "log_softmax_backward",
        "gelu",
        "gelu_backward",
        "max_pool2d_tiled",
        "max_pool2d_tiled_backward",
        "adamw_step",
        "adamw_step_amp",
        "quantize_float8",
        "quantize_float8_current",
        "scaled_mm",
        "scaled_mm_mx",
    }
)
# The fused kernels of float8 training: no backward partner (float8 training's own autograd function
# calls them in its backward too).
FLOAT8_KERNELS: frozenset[str] = frozenset({"quantize_float8", "quantize_float8_current", "scaled_mm", "scaled_mm_mx"})
EPILOGUE_GEMMS: dict[str, int] = {"matmul": 2, "scaled_mm": 7}
"""The GEMM kernels a captured step may fuse with the elementwise chain that reads their result
(:meth:`ampcore.Backend.fused_gemm_kernel`), by their number of arguments."""


FLOAT32_MATMUL_PRECISIONS = ("highest", "high", "medium")
_matmul_precision = ["highest"]


def set_float32_matmul_precision(precision: str) -> None:
    """torch's knob for float32 GEMMs: ``"highest"`` (float32 throughout), ``"high"`` (a backend may use
    TF32 or a split-bfloat16 sum), ``"medium"`` (a backend may use bfloat16 products).

    It is a permission, stored here for backends to read with :func:`get_float32_matmul_precision`; the
    cpu backend always computes float32 GEMMs in float32, whatever it says.
    """
    if precision not in FLOAT32_MATMUL_PRECISIONS:
        choices = ", ".join(map(repr, FLOAT32_MATMUL_PRECISIONS))
        raise ValueError(f"unknown float32 matmul precision {precision!r}; use one of {choices}")
    _matmul_precision[0] = precision


def get_float32_matmul_precision() -> str:
    """The float32 matmul precision set with :func:`set_float32_matmul_precision` (``"highest"`` by default)."""
    return _matmul_precision[0]


class MissingKernelsError(TypeError):
    """A backend does not implement every primitive kernel."""

    def __init__(self, backend_name: str, missing: Iterable[str]):
        self.backend_name = backend_name
        self.missing = sorted(missing)
        super().__init__(
            f"backend {backend_name!r} is missing primitive kernels {', '.join(self.missing)}; "
            "every backend must implement all of ampcore.kernels.PRIMITIVES"
        )


class KernelError(RuntimeError):
    """A backend kernel raised, or returned an array of the wrong shape or dtype; names the op (and where:
    its backward, an optimizer step), the kernel and the backend, chained to the original error.

    ``op`` is None where the kernel table itself caught the problem (a kernel called outside an op); the
    op boundary that called it re-raises with its name.  Also ``ampcore.dispatch.KernelError``.
    """

    def __init__(
        self, op: str | None, backend: str, error: BaseException, *, kernel: str | None = None, phase: str | None = None
    ):
        self.op = op
        self.backend = backend
        self.kernel = kernel
        self.phase = phase
        self.error = error
        where = (f" in its {phase}" if phase else "") + (f" (kernel {kernel!r})" if kernel else "")
        subject = f"op {op!r} failed{where}" if op is not None else f"kernel {kernel!r} failed"
        super().__init__(f"{subject} on backend {backend!r}: {type(error).__name__}: {error}")

    def named(self, op: str, phase: str | None = None) -> KernelError:
        """This error with the op (and phase) that called the kernel filled in, if it had none."""
        if self.op is not None:
            return self
        return KernelError(op, self.backend, self.error, kernel=self.kernel, phase=phase or self.phase)


# Whether every kernel's output shape and dtype are checked (ampcore.kernel_outputs): a list so the
# hot path reads one item, not a global rebound by set_debug_kernels.
_debug = [os.environ.get("AMPCORE_DEBUG_KERNELS", "").strip().lower() in {"1", "true", "yes", "on"}]
_tables: weakref.WeakSet[KernelTable] = weakref.WeakSet()


def debug_kernels() -> bool:
    """Whether every kernel's output is checked against its contract (``AMPCORE_DEBUG_KERNELS=1``)."""
    return _debug[0]


def set_debug_kernels(enabled: bool) -> bool:
    """Turn the full kernel-output check on or off for every backend; returns the previous setting.

    Off by default (each check costs a few microseconds per kernel call); the
    test suite and the conformance suite turn it on, as does
    ``AMPCORE_DEBUG_KERNELS=1`` in the environment.
    """
    previous, _debug[0] = _debug[0], bool(enabled)
    if previous != _debug[0]:
        for table in list(_tables):
            table._reinstall()
    return previous


class KernelOutputError(ValueError):
    """A kernel returned an array whose shape or dtype is not the one its contract gives for its inputs."""


def _checked(
    backend_name: str, name: str, fn: Callable[..., Any], shape_of: Callable[[Any], Any], dtype_of: Callable[[Any], Any]
) -> Callable[..., Any]:
    """``fn`` with its output's shape and dtype checked against :data:`ampcore.kernel_outputs.OUTPUT_RULES`."""
    rule = rule_for(name)
    assert rule is not None  # _install checks a rule exists first

    def check(args: tuple[Any, ...], out: Any, shape: Any, dtype: Any, which: str) -> None:
        got_shape, got_dtype = shape_of(out), dtype_of(out)
        # Identity first: DType equality compares fields, and this runs on every kernel call.
        if (shape is not None and got_shape != shape) or (
            dtype is not None and got_dtype is not dtype and got_dtype != dtype
        ):
            want = f"{dtype.name if dtype else got_dtype.name} of shape {shape if shape is not None else got_shape}"
            error = KernelOutputError(
                f"{name}({describe_args(args, shape_of, dtype_of)}) returned{which} {got_dtype.name} of shape "
                f"{got_shape}, expected {want}; see the kernel contract in ampcore.kernels"
            )
            raise KernelError(None, backend_name, error, kernel=name)

    def kernel(*args: Any, **kwargs: Any) -> Any:
        out = fn(*args, **kwargs)
        if kwargs:
            return out  # rules read positional arguments; the core passes none by keyword to these kernels
        expected = rule(shape_of, dtype_of, args)
        if isinstance(expected, list):  # a kernel with several outputs: one (shape, dtype) each
            if not isinstance(out, tuple) or len(out) != len(expected):
                error = KernelOutputError(f"{name} returned {type(out).__name__}, expected a {len(expected)}-tuple")
                raise KernelError(None, backend_name, error, kernel=name)
            for i, (one, (shape, dtype)) in enumerate(zip(out, expected)):
                check(args, one, shape, dtype, f" as output {i}")
            return out
        check(args, out, *expected, "")
        return out

    kernel.__name__ = name
    kernel.__wrapped__ = fn  # type: ignore[attr-defined]
    return kernel


# Errors a kernel may raise about its inputs; anything else is the backend failing, wrapped in KernelError.
INPUT_ERRORS = (ValueError, TypeError, IndexError, KernelError)

# Backend methods that move arrays between host and device: gated like kernels.
_IO_METHODS = frozenset({"from_numpy", "to_numpy"})
# Table attributes that are not kernels (introspection): returned as they are.
_NOT_KERNELS = frozenset(
    {
        "has",
        "provider",
        "names",
        "shape_of",
        "dtype_of",
        "missing_primitives",
        "program_kernel",
        "record_with",
        "kernel",
    }
)


class KernelGate:
    """The one gate into a backend: its kernels (and array I/O) raising :class:`KernelError` that names
    the op, phase, kernel and backend when the backend fails.

    ``gate.add(a, b)`` calls the backend's ``add`` kernel; ``gate.to_numpy(x)``
    and ``gate.from_numpy(a, dtype, index)`` call the backend's array I/O.
    Errors about the inputs (ValueError, TypeError, IndexError) pass through
    unchanged.  For code that calls kernels directly rather than through
    :func:`ampcore.dispatch.call`: creation, conversions, backward rules,
    gradient accumulation, optimizer steps, the loss scaler and overflow detection.
    """

    def __init__(self, kernels: Any, backend: str, op: str, phase: str | None = None, source: Any = None):
        self._kernels, self._backend, self._op, self._phase = kernels, backend, op, phase
        self._source = source  # the backend object, for its array I/O

    @classmethod
    def of(cls, backend: Any, op: str, phase: str | None = None) -> KernelGate:
        """The gate into ``backend``'s kernels for the op ``op`` (and ``phase``)."""
        return cls(backend.kernels, backend.name, op, phase, backend)

    def renamed(self, op: str, phase: str | None = None) -> KernelGate:
        """This gate, now naming ``op`` (and ``phase``) in its errors: the backward engine reuses one gate
        for every node, so each kernel is wrapped once per backward pass, not once per call."""
        self._op, self._phase = op, phase
        return self

    def __getattr__(self, name: str) -> Any:
        # Reached once per kernel name: the wrapper is cached in the instance dict.
        if name.startswith("_"):
            raise AttributeError(name)
        if name in _IO_METHODS and self._source is not None:
            fn = getattr(self._source, name)
        else:
            fn = getattr(self._kernels, name)
            if name in _NOT_KERNELS:
                return fn

        def kernel(*args: Any, **kwargs: Any) -> Any:
            try:
                return fn(*args, **kwargs)
            except KernelError as exc:
                raise exc.named(self._op, self._phase) from exc.error
            except INPUT_ERRORS:
                raise
            except Exception as exc:
                raise KernelError(self._op, self._backend, exc, kernel=name, phase=self._phase) from exc

        self.__dict__[name] = kernel
        return kernel


_GATE_BODY = """\
try:
    return {call}
except _input_errors:
    raise
except Exception as exc:
    raise _kernel_error(None, _backend_name, exc, kernel=_name) from exc
"""


def _gated(backend_name: str, name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
    """``fn`` raising :class:`KernelError` naming the kernel and backend when the backend fails (errors
    about its inputs pass through); the op that called it fills in its own name (:meth:`KernelError.named`).

    The wrapper takes ``fn``'s own parameters (:func:`ampcore.forwarding.exact_wrapper`): it is on every
    kernel call."""
    env = {"_input_errors": INPUT_ERRORS, "_kernel_error": KernelError, "_backend_name": backend_name, "_name": name}
    kernel = exact_wrapper(fn, _GATE_BODY, env)
    kernel.__name__ = kernel.__qualname__ = name
    return kernel


@dataclass(frozen=True)
class _Entry:
    fn: Callable[..., Any]
    provider: str


class KernelTable:
    """Kernels of one backend, keyed by name, with who provided each.

    Attribute access calls the kernel: ``k.add(a, b)``.  Plugins may override
    entries (:meth:`register`); the provider is kept for ``ampcore info``.
    """

    def __init__(self, backend_name: str, kernels: Mapping[str, Callable[..., Any]], provider: str):
        self._backend_name = backend_name
        self._entries: dict[str, _Entry] = {}
        self._array_info: tuple[Callable[[Any], Any], Callable[[Any], Any]] | None = None
        self._recorder: Callable[..., Callable[..., Any]] | None = None
        self._gates: dict[str, Callable[..., Any]] = {}  # each kernel as installed without a recorder
        self.register(kernels, provider)

    def register(self, kernels: Mapping[str, Callable[..., Any]], provider: str) -> None:
        """Add or replace kernels; unknown names are refused so typos fail loudly."""
        unknown = {n for n in kernels if n not in PRIMITIVES and n not in FUSED and expr.get(n) is None}
        unknown -= ELEMENTWISE_KERNELS
        if unknown:
            raise ValueError(
                f"unknown kernel names {sorted(unknown)} for backend {self._backend_name!r}; known names are in "
                "ampcore.kernels.PRIMITIVES and ampcore.kernels.FUSED, and the elementwise programs of ampcore.expr"
            )
        for name, fn in kernels.items():
            if not callable(fn):
                raise TypeError(f"kernel {name!r} of backend {self._backend_name!r} must be callable, got {fn!r}")
            self._entries[name] = _Entry(fn, provider)
            self._install(name, fn)

    def _install(self, name: str, fn: Callable[..., Any]) -> None:
        # Cache as an attribute: kernel calls are on every op's hot path.  Once the backend's array
        # introspection is bound, and while debug checks are on, kernels with an output rule are
        # installed with their output checked.
        fn = _gated(self._backend_name, name, fn)
        if _debug[0] and self._array_info is not None and rule_for(name) is not None:
            fn = _checked(self._backend_name, name, fn, *self._array_info)
        self._gates[name] = fn
        if self._recorder is not None:
            fn = self._recorder(self, name, fn)
        object.__setattr__(self, name, fn)

    def record_with(self, wrap: Callable[..., Callable[..., Any]] | None) -> None:
        """Install ``wrap(table, name, kernel)``'s wrapper around every kernel (a captured step's recording,
        :mod:`ampcore.capture`), or remove it (None).  The op path pays nothing for it: the wrappers replace
        the table's attributes while a recording runs, and the plain kernels come back after.  The gated
        kernels are kept, not generated again: a recording starts and ends in microseconds per kernel."""
        self._recorder = wrap
        for name, fn in self._gates.items():
            object.__setattr__(self, name, fn if wrap is None else wrap(self, name, fn))

    def kernel(self, name: str) -> Callable[..., Any]:
        """The callable ``k.<name>`` is now, as a replay calls it (a program's kernel made on first use)."""
        fn = self.__dict__.get(name)
        return fn if fn is not None else getattr(self, name)

    def bind_array_info(self, shape_of: Callable[[Any], tuple[int, ...]], dtype_of: Callable[[Any], Any]) -> None:
        """Give op rules ``k.shape_of`` / ``k.dtype_of`` (the backend's array introspection), and from now on
        check each kernel's output shape and dtype (:mod:`ampcore.kernel_outputs`): a wrong one raises
        :class:`KernelError` naming the kernel."""
        object.__setattr__(self, "shape_of", shape_of)
        object.__setattr__(self, "dtype_of", dtype_of)
        self._array_info = (shape_of, dtype_of)
        _tables.add(self)
        self._reinstall()

    def _reinstall(self) -> None:
        for name, entry in self._entries.items():
            self._install(name, entry.fn)

    def missing_primitives(self) -> set[str]:
        """The primitives this table lacks.  ``elementwise`` counts as present where the table has every one of
        :data:`ELEMENTWISE_KERNELS` instead (a backend written before it: its programs are composed of them)."""
        missing = set(PRIMITIVES) - set(self._entries)
        if "elementwise" in missing and ELEMENTWISE_KERNELS & set(self._entries):
            missing.discard("elementwise")  # written one kernel at a time: name the ones it lacks
            missing |= ELEMENTWISE_KERNELS - set(self._entries)
        return missing

    def has(self, name: str) -> bool:
        """Whether ``k.<name>`` runs: a kernel registered under the name, or a registered program."""
        return name in self._entries or expr.get(name) is not None

    def provider(self, name: str) -> str | None:
        """Who supplies ``name``: a plugin/backend name, or None (core reference composition).  A program not
        yet run names who will render it."""
        entry = self._entries.get(name)
        if entry is None and expr.get(name) is not None:
            factory = self._entries.get("elementwise")
            return factory.provider if factory is not None else None
        return entry.provider if entry else None

    def program_kernel(self, prog: expr.Program) -> Callable[..., Any]:
        """The kernel running ``prog`` on this backend: its ``elementwise`` primitive's rendering, or (a backend
        without it) a composition of its one-by-one elementwise kernels: a 16-bit program's computed by its float32
        kernels and rounded once."""
        factory = self._entries.get("elementwise")
        if factory is not None:
            return factory.fn(prog)
        return self._compose(prog)

    def _compose(self, prog: expr.Program) -> Callable[..., Any]:
        fns: dict[str, Callable[..., Any]] = {}
        for fn in {n.op for n in prog.nodes}:
            kernel = "where" if fn == "select" else fn
            entry = self._entries.get(kernel)
            if entry is not None:
                fns[fn] = entry.fn
            elif fn not in ("and", "or", "not") or "where" not in self._entries or "eq" not in self._entries:
                raise MissingKernelsError(self._backend_name, [kernel, f"elementwise (which renders {prog.name!r})"])
        where, eq = self._entries.get("where"), self._entries.get("eq")
        if where is not None and eq is not None:
            fns.setdefault("and", lambda a, b: where.fn(a, b, False))
            fns.setdefault("or", lambda a, b: where.fn(a, True, b))
            fns.setdefault("not", lambda a: eq.fn(a, False))
        composed = evaluator(prog, fns)
        cast = self._entries.get("cast")
        if prog.roundings < 2 or cast is None or self._array_info is None:
            return composed  # one kernel rounds once already
        return _widened(composed, cast.fn, self._array_info[1])

    def names(self) -> list[str]:
        return sorted(self._entries)

    def __getattr__(self, name: str) -> Any:
        # Only reached for names never registered (and for private names looked up
        # before __init__ ran, e.g. by copy/pickle: they must not recurse).  A registered program's kernel is
        # made on first use and kept like a registered one.
        if name.startswith("_"):
            raise AttributeError(name)
        prog = expr.get(name)
        if prog is None:
            raise AttributeError(f"backend {self._backend_name!r} has no kernel {name!r}")
        factory = self._entries.get("elementwise")
        provider = factory.provider if factory is not None else "ampcore (composed of the backend's kernels)"
        try:
            fn = self.program_kernel(prog)
        except MissingKernelsError:
            raise
        except Exception as exc:
            raise KernelError(None, self._backend_name, exc, kernel=name) from exc
        self._entries[name] = _Entry(fn, provider)
        self._install(name, fn)
        return self.__dict__[name]


_WIDENED = (float16, bfloat16)


def _widened(
    composed: Callable[..., Any], cast: Callable[..., Any], dtype_of: Callable[[Any], Any]
) -> Callable[..., Any]:
    """A composed program on float16/bfloat16 operands computed by the backend's float32 kernels and rounded
    once, as the ``elementwise`` primitive's contract says: each 16-bit kernel would round every node."""

    def kernel(*args: Any) -> Any:
        low = None
        for a in args:
            if not isinstance(a, (bool, int, float, np.generic)) and dtype_of(a) in _WIDENED:
                low = dtype_of(a)
                break
        if low is None:
            return composed(*args)
        wide = [
            cast(a, float32) if not isinstance(a, (bool, int, float, np.generic)) and dtype_of(a) == low else a
            for a in args
        ]
        out = composed(*wide)
        return cast(out, low) if dtype_of(out) == float32 else out

    return kernel


def adamw_moment_dtype(param_dtype: DType) -> DType:
    """The dtype of Adam's moments for a parameter of ``param_dtype``: float64 for float64, else float32."""
    return float64 if param_dtype == float64 else float32


def check_adamw_step(
    params: Sequence[Any],
    grads: Sequence[Any],
    exp_avgs: Sequence[Any],
    exp_avg_sqs: Sequence[Any],
    step: Any,
    hyper: Mapping[str, float],
    *,
    shape_of: Callable[[Any], tuple[int, ...]],
    dtype_of: Callable[[Any], DType],
) -> None:
    """The ``adamw_step`` argument checks every backend makes before it writes anything, so all raise alike.

    ``hyper`` maps exactly the keys ``lr``, ``beta1``, ``beta2``, ``eps`` and
    ``weight_decay`` to the call's floats (``step`` and ``decoupled`` are not in it).

    Raises ValueError for lists of different lengths, a ``step`` that is not an
    int >= 1, a non-finite hyper-parameter or tensors of different shapes, and
    TypeError for a non-floating parameter or gradient or moments not in
    :func:`adamw_moment_dtype`.  The arrays are the backend's own (checked by
    the backend before it calls this); ``shape_of``/``dtype_of`` read them.
    """
    n = len(params)
    if not (len(grads) == len(exp_avgs) == len(exp_avg_sqs) == n):
        raise ValueError(
            f"adamw_step needs lists of one length, got {n} params, {len(grads)} grads, "
            f"{len(exp_avgs)} exp_avgs and {len(exp_avg_sqs)} exp_avg_sqs"
        )
    if isinstance(step, bool) or not isinstance(step, (int, np.integer)) or step < 1:
        raise ValueError(f"adamw_step step must be an int >= 1, got {step!r}")
    for name, value in hyper.items():
        if not math.isfinite(value):
            raise ValueError(f"adamw_step {name} must be finite, got {value!r}")
    for i, (p, g, m, v) in enumerate(zip(params, grads, exp_avgs, exp_avg_sqs)):
        p_dtype, g_dtype = dtype_of(p), dtype_of(g)
        if p_dtype not in FLOAT_DTYPES or g_dtype not in FLOAT_DTYPES:
            raise TypeError(
                f"adamw_step tensor {i}: parameter and gradient must be floating, got {p_dtype.name} and {g_dtype.name}"
            )
        shapes = [shape_of(a) for a in (p, g, m, v)]
        if len(set(shapes)) != 1:
            raise ValueError(
                f"adamw_step tensor {i}: shapes differ: param {shapes[0]}, grad {shapes[1]}, "
                f"exp_avg {shapes[2]}, exp_avg_sq {shapes[3]}"
            )
        want, moments = adamw_moment_dtype(p_dtype), (dtype_of(m), dtype_of(v))
        if moments != (want, want):
            raise TypeError(
                f"adamw_step tensor {i}: moments must be {want.name} for a {p_dtype.name} parameter, "
                f"got {moments[0].name} and {moments[1].name}"
            )
