"""Creating tensors: from data, filled, ranges and seeded random numbers.

Random numbers come from the backend's ``uniform``/``normal`` kernels fed a
64-bit seed drawn from a :class:`Generator`, so a seeded program is
reproducible on a given backend without any host-side array.
"""

from __future__ import annotations

import secrets
import threading
import warnings
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, cast

import numpy as np

from . import dtypes as dt
from . import ops
from .device import DeviceLike
from .dispatch import guarded_kernels, primitive
from .dtypes import DType
from .hooks import CAPTURE
from .plugins import registry
from .plugins.capabilities import check_storable
from .syncs import defer_check
from .tensor_base import TensorBase, tensor_class

if TYPE_CHECKING:
    from .tensor import Tensor

__all__ = [
    "Generator",
    "manual_seed",
    "default_generator",
    "tensor",
    "from_numpy",
    "as_tensor",
    "zeros",
    "ones",
    "full",
    "empty",
    "zeros_like",
    "ones_like",
    "full_like",
    "empty_like",
    "rand",
    "randn",
    "arange",
    "linspace",
    "eye",
    "range_inclusive",
    "rand_like",
    "randn_like",
    "randint",
    "randperm",
    "multinomial",
]


class Generator:
    """A seeded source of kernel seeds; thread-safe."""

    def __init__(self, seed: int | None = None):
        self._lock = threading.Lock()
        self.manual_seed(seed if seed is not None else secrets.randbits(63))

    def manual_seed(self, seed: int) -> Generator:
        if not isinstance(seed, (int, np.integer)) or isinstance(seed, bool):
            raise TypeError(f"seed must be an int, got {seed!r}")
        with self._lock:
            self._seed = int(seed)
            self._rng = np.random.default_rng(self._seed)
        return self

    def initial_seed(self) -> int:
        return self._seed

    def next_seed(self) -> int:
        with self._lock:
            seed = int(self._rng.integers(0, 2**63 - 1))
        recorder = CAPTURE.recorder
        if recorder is not None:  # a captured step being recorded draws it again, in order, on every replay
            recorder.seed_drawn(self, seed)
        return seed

    def get_state(self) -> dict[str, Any]:
        with self._lock:
            return {"seed": self._seed, "bit_generator": self._rng.bit_generator.state}

    def set_state(self, state: dict[str, Any]) -> None:
        with self._lock:
            self._seed = int(state["seed"])
            self._rng = np.random.default_rng(self._seed)
            self._rng.bit_generator.state = state["bit_generator"]


default_generator = Generator()


def manual_seed(seed: int) -> Generator:
    """Seed the default generator (``ampcore.manual_seed(0)`` for reproducible runs)."""
    return default_generator.manual_seed(seed)


def _shape(size: Sequence[Any]) -> tuple[int, ...]:
    if len(size) == 1 and type(size[0]) is int and size[0] >= 0:  # zeros(n): on a data set's per-sample path
        return (size[0],)
    if len(size) == 1 and isinstance(size[0], (tuple, list)):
        size = tuple(size[0])
    out = []
    for s in size:
        if not isinstance(s, (int, np.integer)) or isinstance(s, bool) or s < 0:
            raise ValueError(f"sizes must be non-negative ints, got {tuple(size)!r}")
        out.append(int(s))
    return tuple(out)


# (device, dtype) -> (registry generation, backend) once the dtype was found storable there: tensor creation is
# on the per-sample path of a data loader, where the lookup and the check were a third of an ampcore.zeros(13).
_placed: dict[tuple[Any, DType], tuple[int, Any]] = {}


def _place(device: DeviceLike | None, dtype: DType) -> tuple[Any, Any]:
    dev = registry.resolve(device)
    known = _placed.get((dev, dtype))
    if known is not None and known[0] == registry.generation:
        return dev, known[1]
    backend = registry.get_backend(dev.type)
    check_storable(backend, dev.index, dtype)
    _placed[(dev, dtype)] = (registry.generation, backend)
    return dev, backend


_gates: dict[tuple[Any, str], Any] = {}


def _kernels(backend: Any, op: str) -> Any:
    """``guarded_kernels(backend, op)``, kept per backend and op (a gate wraps each kernel once, on first use)."""
    gate = _gates.get((backend, op))
    if gate is None or gate._kernels is not backend.kernels:
        gate = _gates[(backend, op)] = guarded_kernels(backend, op)
    return gate


def _infer_dtype(array: np.ndarray, from_python: bool) -> DType:
    if array.dtype.kind == "f" and from_python:
        return dt.float32
    if array.dtype.kind == "b":
        return dt.bool_
    if array.dtype.kind in "iu":
        return (
            dt.int64 if from_python or array.dtype.itemsize > 4 or array.dtype.kind == "u" else dt.as_dtype(array.dtype)
        )
    try:
        return dt.as_dtype(array.dtype)
    except ValueError:
        raise TypeError(f"cannot make a tensor from data of NumPy dtype {array.dtype}") from None


def _describe_row(path: str, n: int | None) -> str:
    return f"{path} is a number" if n is None else f"{path} has {n} element(s)"


def _ragged_row(data: Any) -> str | None:
    """Where nested lists stop being rectangular: ``"data[1] has 1 element(s) but data[0] has 2 element(s)
    (dimension 1)"``; None when they are rectangular (NumPy refused them for another reason)."""
    level: list[tuple[str, Any]] = [("data", data)]
    dim = 0
    while level:
        lengths = [
            (
                path,
                len(item) if isinstance(item, (list, tuple)) or (isinstance(item, np.ndarray) and item.ndim) else None,
            )
            for path, item in level
        ]
        first_path, first = lengths[0]
        for path, n in lengths[1:]:
            if n != first:
                return f"{_describe_row(path, n)} but {_describe_row(first_path, first)} (dimension {dim})"
        if first is None:
            return None
        level = [(f"{path}[{i}]", item[i]) for path, item in level for i in range(len(item))]
        dim += 1
    return None


def tensor(data: Any, dtype: Any = None, device: DeviceLike | None = None, requires_grad: bool = False) -> Tensor:
    """A new tensor holding a copy of ``data`` (nested lists, numbers, NumPy arrays or a Tensor).

    Python floats become float32, Python ints int64; NumPy arrays keep their dtype.
    """
    if isinstance(data, TensorBase):
        data = data.numpy()
    from_python = not isinstance(data, (np.ndarray, np.generic))
    try:
        array = np.asarray(data)
    except ValueError as err:
        ragged = _ragged_row(data) if from_python else None
        if ragged is None:
            raise
        raise ValueError(f"ampcore.tensor: {ragged}; every row along a dimension must have the same length") from err
    if array.dtype == object:
        ragged = _ragged_row(data) if from_python else None
        if ragged is not None:
            raise ValueError(f"ampcore.tensor: {ragged}; every row along a dimension must have the same length")
        raise TypeError(f"cannot make a tensor from {type(data).__name__} data; use numbers or nested lists of numbers")
    target = dt.as_dtype(dtype) if dtype is not None else _infer_dtype(array, from_python)
    dev, backend = _place(device, target)
    if requires_grad and not target.is_floating_point:
        raise TypeError(f"only floating tensors can require gradients, got dtype {target.name}")
    data = _kernels(backend, "tensor").from_numpy(np.asarray(array, order="C"), target, dev.index)
    recorder = CAPTURE.recorder
    if recorder is not None:  # host data inside a captured call: its replays reuse this array
        recorder.upload()
    out = tensor_class()._wrap(data, dev, backend)
    return out.requires_grad_(requires_grad)


def from_numpy(array: np.ndarray, device: DeviceLike | None = None) -> Tensor:
    """A tensor with ``array``'s values and dtype (copied to the device)."""
    if not isinstance(array, np.ndarray):
        raise TypeError(f"from_numpy needs a numpy.ndarray, got {type(array).__name__}")
    return tensor(array, dtype=dt.as_dtype(array.dtype), device=device)


def as_tensor(data: Any, dtype: Any = None, device: DeviceLike | None = None) -> Tensor:
    """``data`` itself if it is already a matching Tensor, else a new tensor."""
    if (
        isinstance(data, TensorBase)
        and (dtype is None or data.dtype == dt.as_dtype(dtype))
        and (device is None or data.device == registry.resolve(device))
    ):
        return cast("Tensor", data)  # every TensorBase is a Tensor: ampcore.tensor installs its class on import
    return tensor(data, dtype=dtype, device=device)


def full(
    size: Sequence[int],
    fill_value: float,
    *,
    dtype: Any = None,
    device: DeviceLike | None = None,
    requires_grad: bool = False,
) -> Tensor:
    """A tensor of ``size`` filled with ``fill_value`` (float32 unless ``dtype`` says otherwise)."""
    target = (
        dt.as_dtype(dtype)
        if dtype is not None
        else (dt.bool_ if isinstance(fill_value, bool) else dt.int64 if isinstance(fill_value, int) else dt.float32)
    )
    return _filled(_shape([size]), fill_value, target, device, requires_grad)


def _filled(shape: tuple[int, ...], fill_value: float, target: DType, device: Any, requires_grad: bool) -> Tensor:
    dev, backend = _place(device, target)
    out = tensor_class()._wrap(_kernels(backend, "full").full(shape, fill_value, target, dev.index), dev, backend)
    return out if requires_grad is False else out.requires_grad_(requires_grad)


def zeros(*size: Any, dtype: Any = None, device: DeviceLike | None = None, requires_grad: bool = False) -> Tensor:
    target = dt.as_dtype(dtype) if dtype is not None else dt.float32
    return _filled(_shape(size), 0.0, target, device, requires_grad)


def ones(*size: Any, dtype: Any = None, device: DeviceLike | None = None, requires_grad: bool = False) -> Tensor:
    target = dt.as_dtype(dtype) if dtype is not None else dt.float32
    return _filled(_shape(size), 1.0, target, device, requires_grad)


def empty(*size: Any, dtype: Any = None, device: DeviceLike | None = None, requires_grad: bool = False) -> Tensor:
    """Like torch.empty; values are zeros here (backends have no uninitialised allocation in the contract)."""
    return zeros(*size, dtype=dtype, device=device, requires_grad=requires_grad)


def full_like(t: Tensor, fill_value: float, *, dtype: Any = None, requires_grad: bool = False) -> Tensor:
    return full(t.shape, fill_value, dtype=dtype or t.dtype, device=t.device, requires_grad=requires_grad)


def zeros_like(t: Tensor, *, dtype: Any = None, requires_grad: bool = False) -> Tensor:
    return full_like(t, 0.0, dtype=dtype, requires_grad=requires_grad)


def ones_like(t: Tensor, *, dtype: Any = None, requires_grad: bool = False) -> Tensor:
    return full_like(t, 1.0, dtype=dtype, requires_grad=requires_grad)


def empty_like(t: Tensor, *, dtype: Any = None, requires_grad: bool = False) -> Tensor:
    return zeros_like(t, dtype=dtype, requires_grad=requires_grad)


def _random(
    op: str,
    kernel: str,
    size: Sequence[Any],
    dtype: Any,
    device: DeviceLike | None,
    generator: Generator | None,
    requires_grad: bool,
) -> Tensor:
    target = dt.as_dtype(dtype) if dtype is not None else dt.float32
    if not target.is_floating_point:
        raise TypeError(f"{op}() needs a floating dtype, got {target.name}")
    if generator is not None and not isinstance(generator, Generator):
        raise TypeError(f"generator must be an ampcore.Generator, got {generator!r}")
    dev, backend = _place(device, target)
    seed = (generator or default_generator).next_seed()
    data = getattr(guarded_kernels(backend, op), kernel)(_shape(size), target, seed, dev.index)
    out = tensor_class()._wrap(data, dev, backend)
    return out.requires_grad_(requires_grad)


def rand(
    *size: Any,
    dtype: Any = None,
    device: DeviceLike | None = None,
    generator: Generator | None = None,
    requires_grad: bool = False,
) -> Tensor:
    """Uniform samples in [0, 1)."""
    return _random("rand", "uniform", size, dtype, device, generator, requires_grad)


def randn(
    *size: Any,
    dtype: Any = None,
    device: DeviceLike | None = None,
    generator: Generator | None = None,
    requires_grad: bool = False,
) -> Tensor:
    """Standard normal samples."""
    return _random("randn", "normal", size, dtype, device, generator, requires_grad)


def rand_like(t: Tensor, *, dtype: Any = None, device: DeviceLike | None = None, requires_grad: bool = False) -> Tensor:
    """Uniform samples in [0, 1) with ``t``'s shape, dtype and device (unless given)."""
    return rand(
        t.shape, dtype=dtype or t.dtype, device=device if device is not None else t.device, requires_grad=requires_grad
    )


def randn_like(
    t: Tensor, *, dtype: Any = None, device: DeviceLike | None = None, requires_grad: bool = False
) -> Tensor:
    """Standard normal samples with ``t``'s shape, dtype and device (unless given)."""
    return randn(
        t.shape, dtype=dtype or t.dtype, device=device if device is not None else t.device, requires_grad=requires_grad
    )


def arange(
    start: float, end: float | None = None, step: float = 1, *, dtype: Any = None, device: DeviceLike | None = None
) -> Tensor:
    """Values from ``start`` up to (not including) ``end`` in steps of ``step``."""
    if end is None:
        start, end = 0, start
    if step == 0:
        raise ValueError("arange step must be non-zero")
    is_int = all(isinstance(v, (int, np.integer)) for v in (start, end, step))
    target = dt.as_dtype(dtype) if dtype is not None else (dt.int64 if is_int else dt.float32)
    dev, backend = _place(device, target)
    return tensor_class()._wrap(
        guarded_kernels(backend, "arange").arange(start, end, step, target, dev.index), dev, backend
    )


def linspace(
    start: float,
    end: float,
    steps: int,
    *,
    dtype: Any = None,
    device: DeviceLike | None = None,
    requires_grad: bool = False,
) -> Tensor:
    """``steps`` values evenly spaced from ``start`` to ``end`` inclusive, computed in float64 and rounded once
    (float32 unless ``dtype`` says otherwise)."""
    if isinstance(steps, bool) or not isinstance(steps, (int, np.integer)) or steps < 0:
        raise ValueError(f"linspace(): number of steps must be a non-negative int, got {steps!r}")
    values = np.linspace(float(start), float(end), int(steps), dtype=np.float64)
    return tensor(values, dtype=dtype or dt.float32, device=device, requires_grad=requires_grad)


def eye(
    n: int, m: int | None = None, *, dtype: Any = None, device: DeviceLike | None = None, requires_grad: bool = False
) -> Tensor:
    """The ``n`` x ``m`` (default ``n`` x ``n``) identity: ones on the diagonal (float32 unless ``dtype`` says)."""
    for name, value in (("n", n), ("m", m)):
        if value is not None and (isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 0):
            raise ValueError(f"eye(): {name} must be a non-negative int, got {value!r}")
    return tensor(
        np.eye(int(n), None if m is None else int(m)),
        dtype=dtype or dt.float32,
        device=device,
        requires_grad=requires_grad,
    )


def range_inclusive(
    start: float = 0,
    end: float | None = None,
    step: float = 1,
    *,
    dtype: Any = None,
    device: DeviceLike | None = None,
    requires_grad: bool = False,
) -> Tensor:
    """torch.range (``ampcore.range``), deprecated there too: values from ``start`` to ``end`` *inclusive* in
    steps of ``step``, float32 unless ``dtype`` says otherwise.  Warns UserWarning pointing to :func:`arange`,
    as torch does."""
    warnings.warn(
        "ampcore.range is deprecated (as torch.range) because its behavior is inconsistent with Python's range "
        "builtin. Instead, use ampcore.arange, which produces values in [start, end).",
        UserWarning,
        stacklevel=2,
    )
    if end is None:
        start, end = 0, start
    if step == 0:
        raise ValueError("range(): step must be non-zero")
    count = int(np.floor((float(end) - float(start)) / float(step))) + 1
    values = float(start) + float(step) * np.arange(max(count, 0), dtype=np.float64)
    return tensor(values, dtype=dtype or dt.float32, device=device, requires_grad=requires_grad)


# --------------------------------------------------------------------------- integer draws and sampling
# randint and randperm draw on the host from a seed the generator gives (exact for every range and dtype, the
# same numbers on every backend) and upload the result: a host-to-device copy, never a host read.
def _host_rng(generator: Generator | None) -> np.random.Generator:
    if generator is not None and not isinstance(generator, Generator):
        raise TypeError(f"generator must be an ampcore.Generator, got {generator!r}")
    return np.random.default_rng((generator or default_generator).next_seed())


def _upload_ints(values: np.ndarray, dtype: Any, device: DeviceLike | None, requires_grad: bool, op: str) -> Tensor:
    target = dt.as_dtype(dtype) if dtype is not None else dt.int64
    if target is dt.bool_:
        raise TypeError(f"{op}() cannot make a bool tensor; pass an integer or floating dtype")
    if requires_grad and not target.is_floating_point:
        raise TypeError(f"{op}(): only floating tensors can require gradients, got dtype {target.name}")
    return tensor(values, dtype=target, device=device, requires_grad=requires_grad)


def randint(
    *args: Any,
    low: int | None = None,
    high: int | None = None,
    size: Sequence[int] | None = None,
    generator: Generator | None = None,
    dtype: Any = None,
    device: DeviceLike | None = None,
    requires_grad: bool = False,
) -> Tensor:
    """torch.randint: integers drawn uniformly from ``[low, high)``, as ``randint(high, size)``,
    ``randint(low, high, size)`` or with keywords (``randint(low=0, high=10, size=(3,))``); int64 unless
    ``dtype`` says otherwise; same seed, same draws."""
    if high is not None:  # the keyword form: a positional argument can only be low, and size is a keyword too
        if len(args) > 1 or (args and low is not None):
            raise TypeError(f"randint(): with high= as a keyword, only low may be positional, got {args!r}")
        bounds: list[Any] = [args[0] if args else (0 if low is None else low), high]
    else:
        if size is None:
            if len(args) not in (2, 3):
                raise TypeError(
                    f"randint() takes (high, size) or (low, high, size), got {len(args)} positional arguments"
                )
            *bounds, size = args
        else:
            bounds = list(args)
        if low is not None:
            bounds = [low, *bounds]
        if len(bounds) not in (1, 2):
            raise TypeError(f"randint() takes (high, size) or (low, high, size), got bounds {tuple(bounds)!r}")
    if size is None:
        raise TypeError("randint() needs a size, e.g. randint(10, (3,))")
    low, high = (0, bounds[0]) if len(bounds) == 1 else bounds
    for name, v in (("low", low), ("high", high)):
        if not isinstance(v, (int, np.integer)) or isinstance(v, bool):
            raise TypeError(f"randint(): {name} must be an int, got {v!r}")
    if not low < high:
        raise ValueError(f"randint(): low must be less than high, got low={low}, high={high}")
    shape = _shape([size]) if isinstance(size, (tuple, list)) else _shape((size,))
    values = _host_rng(generator).integers(int(low), int(high), size=shape, dtype=np.int64)
    return _upload_ints(values, dtype, device, requires_grad, "randint")


def randperm(
    n: int,
    *,
    generator: Generator | None = None,
    dtype: Any = None,
    device: DeviceLike | None = None,
    requires_grad: bool = False,
) -> Tensor:
    """torch.randperm: a random permutation of ``0 .. n-1`` (int64 unless ``dtype`` says otherwise)."""
    if not isinstance(n, (int, np.integer)) or isinstance(n, bool) or n < 0:
        raise ValueError(f"randperm(): n must be a non-negative int, got {n!r}")
    values = _host_rng(generator).permutation(int(n)).astype(np.int64)
    return _upload_ints(values, dtype, device, requires_grad, "randperm")


@primitive("multinomial")
def multinomial(
    input: Tensor,  # noqa: A002 - torch's name
    num_samples: int,
    replacement: bool = False,
    *,
    generator: Generator | None = None,
) -> Tensor:
    """torch.multinomial: ``num_samples`` category indices (int64) per row of the non-negative weights ``input``
    (1-D or 2-D, rows need not sum to 1), drawn on the device from the generator's uniform numbers.

    With replacement: the inverse CDF (a cumulative sum and a comparison count; no host read).
    Without: the Gumbel-top-k trick (``log p - log(-log u)``, the ``num_samples`` largest), which is
    sampling without replacement in proportion to the weights; one sample is an argmax (no host read),
    more are a topk (one ``sort`` read).  Negative, infinite or NaN weights, a row summing to zero, and
    (without replacement) fewer non-zero weights than samples raise, checked on the device and reported
    at the next host read, as torch's device-side asserts are.
    """
    if not isinstance(input, TensorBase) or not input.dtype.is_floating_point or input.ndim not in (1, 2):
        raise TypeError(f"multinomial() needs a 1-D or 2-D floating tensor of weights, got {input!r}")
    if not isinstance(num_samples, (int, np.integer)) or isinstance(num_samples, bool) or num_samples <= 0:
        raise ValueError(f"multinomial(): num_samples must be a positive int, got {num_samples!r}")
    n = input.shape[-1]
    if n == 0:
        raise ValueError("multinomial(): the weights have no categories (last dimension of size 0)")
    if not replacement and num_samples > n:
        raise ValueError(
            f"multinomial(): cannot draw {num_samples} samples without replacement from {n} categories; "
            "pass replacement=True or fewer samples"
        )
    p = input.detach().reshape(-1, n)
    p = ops.cast(p, dt.float32) if p.dtype in dt.LOW_PRECISION_DTYPES else p
    rows = p.shape[0]
    _check_weights(p, num_samples, bool(replacement))
    if replacement:
        u = rand(rows, num_samples, dtype=p.dtype, device=p.device, generator=generator)
        cdf = ops.cumsum(p, 1)
        total = ops.getitem(cdf, (slice(None), slice(n - 1, n)))
        below = ops.compare("le", ops.unsqueeze(cdf, 1), ops.unsqueeze(u * total, 2))  # (rows, samples, n)
        out = ops.binary("minimum", ops.sum(below, 2), n - 1)
    else:
        noise = rand(rows, n, dtype=p.dtype, device=p.device, generator=generator)  # u in [0, 1)
        keys = ops.unary("log", p) - ops.unary("log", ops.unary("neg", ops.unary("log", noise)))  # log p + Gumbel
        out = ops.reshape(ops.argmax(keys, 1), (rows, 1)) if num_samples == 1 else ops.topk(keys, num_samples, 1)[1]
    return ops.reshape(out, (num_samples,) if input.ndim == 1 else (rows, num_samples))


def _check_weights(p: Any, num_samples: int, replacement: bool) -> None:
    """Queue the device-side checks of multinomial's weights (read at the next host read)."""
    positive = ops.compare("gt", p, 0.0)
    bad_value = ops.sum(ops.compare("lt", p, 0.0)) + ops.sum(ops.compare("ne", p, p))
    bad = ops.compare("gt", bad_value + ops.sum(ops.compare("eq", p, float("inf"))), 0)
    defer_check(bad, lambda: ValueError("multinomial(): the weights must be finite and non-negative"))
    counts = ops.sum(positive, 1)
    empty = ops.compare("gt", ops.sum(ops.compare("lt", counts, 1 if replacement else num_samples)), 0)
    defer_check(
        empty,
        lambda: ValueError(
            "multinomial(): a row of weights sums to zero"
            if replacement
            else f"multinomial(): a row has fewer non-zero weights than the {num_samples} samples asked without "
            "replacement"
        ),
    )
