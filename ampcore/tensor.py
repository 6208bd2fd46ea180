"""Tensor: a backend array with a dtype, a device and an autograd history.

Arrays are treated as immutable by ops; "in-place" methods (``add_``,
``copy_``, ``__setitem__``) compute a new array and rebind it, so a failed op
never leaves a tensor half-written.
"""

from __future__ import annotations

import builtins
import copy
import math
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any, SupportsIndex

import numpy as np

from . import dtypes as dt
from .autograd import grad_mode, is_grad_enabled, run_backward
from .backend import BackendUnavailableError
from .creation import multinomial, tensor
from .device import Device, DeviceLike
from .dispatch import guarded_kernels, primitive, register_op, route
from .dtypes import DType
from .hooks import STATE
from .kernels import KernelError
from .ops import declare, indexing, linalg, reduction, shape, sorting
from .ops import elementwise as ew
from .plugins import UnknownBackendError, registry
from .plugins.capabilities import _caps_cache, capabilities_of, check_storable, forget_capabilities  # noqa: F401 - their old home
from .syncs import to_host
from .tensor_base import TensorBase, set_tensor_class
from .tensor_torch import TorchTensorMethods

__all__ = ["Tensor"]


def _operator(dunder: str, op: str, swap: bool, decl: declare.Declaration) -> Callable[..., Tensor]:
    """The Python operator ``dunder`` running the declared op ``op`` (``swap``: ``other <op> self``)."""
    prog = decl.program
    if prog is not None and prog.arity == 1:

        def unary(self: Tensor) -> Tensor:
            return ew.unary(op, self)

        method: Callable[..., Tensor] = unary
    elif prog is not None and prog.result == "b":

        def compare(self: Tensor, other: Any) -> Tensor:
            return ew.compare(op, self, other)

        method = compare
    elif swap:
        reflected = decl.reflected is not None

        def reflected_binary(self: Tensor, other: Any) -> Tensor:
            return ew.binary(op, other, self, reflected=reflected)

        method = reflected_binary
    else:

        def binary(self: Tensor, other: Any) -> Tensor:
            return ew.binary(op, self, other)

        method = binary
    method.__name__ = method.__qualname__ = dunder
    method.__doc__ = f"The operator {dunder}: the op {op!r}" + (" with the operands swapped." if swap else ".")
    return method


def _to_method(name: str, target: Any) -> Callable[[Tensor], Tensor]:
    """A Tensor method converting to ``target`` (a dtype or a device): ``.to(target)``."""

    def method(self: Tensor) -> Tensor:
        return self.to(target)

    method.__name__ = method.__qualname__ = name
    method.__doc__ = f"``self.to({target!r})``."
    return method


class Tensor(TorchTensorMethods, TensorBase):
    """An n-dimensional array on a backend device, with autograd."""

    __slots__ = ()
    __array_ufunc__ = None  # make NumPy defer to our reflected operators

    # ------------------------------------------------------------------ construction
    def __init__(self, *args: Any, **kwargs: Any):
        raise TypeError("create tensors with ampcore.tensor(data, dtype=..., device=...), not Tensor(...)")

    def _new_tensor(self, data: Any, dtype: DType | None = None) -> Tensor:
        return tensor(data, dtype=dtype, device=self.device)

    # ------------------------------------------------------------------ properties
    @property
    def ndim(self) -> int:
        return len(self.shape)

    def dim(self) -> int:
        return len(self.shape)

    def size(self, dim: int | None = None) -> Any:
        return self.shape if dim is None else self.shape[dim]

    def numel(self) -> int:
        n = 1
        for s in self.shape:
            n *= s
        return n

    @property
    def is_leaf(self) -> bool:
        return self.grad_fn is None

    def is_floating_point(self) -> bool:
        return self.dtype.is_floating_point

    @property
    def nbytes(self) -> int:
        """Bytes held on the device (2 per element for float16/bfloat16)."""
        return self._backend.nbytes(self._data)

    @property
    def T(self) -> Tensor:  # noqa: N802 - torch's name for the transpose
        return self.permute(tuple(reversed(range(self.ndim))))

    @property
    def mT(self) -> Tensor:  # noqa: N802 - torch's name for the batched matrix transpose
        return self.transpose(-2, -1)

    def t(self) -> Tensor:
        if self.ndim > 2:
            raise ValueError(
                f"t() expects a tensor with <= 2 dimensions, got shape {self.shape}; use .mT or .transpose"
            )
        return self.T

    # ------------------------------------------------------------------ host conversion
    def numpy(self) -> np.ndarray:
        """A host copy as a NumPy array (bfloat16 as ``ml_dtypes.bfloat16``)."""
        return to_host(self)

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        a = self.numpy()
        return a.astype(dtype) if dtype is not None else a

    def tolist(self) -> Any:
        return self.numpy().astype(np.float64 if self.dtype.is_floating_point else self.dtype.numpy).tolist()

    def item(self) -> Any:
        """The value of a one-element tensor as a Python number."""
        if self.numel() != 1:
            raise ValueError(f"item() needs a tensor with one element, got shape {self.shape}")
        return (
            self.numpy().reshape(()).item()
            if self.dtype not in dt.LOW_PRECISION_DTYPES
            else float(self.numpy().reshape(()))
        )

    def __float__(self) -> float:
        return float(self.item())

    def __int__(self) -> int:
        return int(self.item())

    def __bool__(self) -> bool:
        if self.numel() != 1:
            raise ValueError(
                f"the truth value of a tensor with {self.numel()} elements is ambiguous; "
                "use .any()-style reductions explicitly"
            )
        return bool(self.item())

    def __index__(self) -> int:
        if self.dtype.is_floating_point:
            raise TypeError("only integer tensors of one element can be used as an index")
        return int(self.item())

    def __len__(self) -> int:
        if not self.shape:
            raise TypeError("len() of a 0-d tensor")
        return self.shape[0]

    def __iter__(self) -> Iterator[Tensor]:
        for i in range(len(self)):
            yield self[i]

    def __repr__(self) -> str:
        values = self.numpy().astype(np.float64) if self.dtype in dt.LOW_PRECISION_DTYPES else self.numpy()
        body = np.array2string(
            values,
            separator=", ",
            threshold=1000,
            edgeitems=3,
            max_line_width=80,
            prefix="tensor(",
            formatter={"float_kind": _float_formatter(values)} if values.dtype.kind == "f" else None,
        )
        extra = (
            f", grad_fn={self.grad_fn!r}" if self.grad_fn else (", requires_grad=True" if self.requires_grad else "")
        )
        return f"tensor({body}, dtype={self.dtype.name}, device='{self.device}'{extra})"

    def __format__(self, format_spec: str) -> str:
        """``f"{loss:.4f}"``: a one-element tensor formats its Python value (torch does this for 0-d tensors;
        ampcore also for one-element tensors of any shape); with an empty spec any tensor gives ``str(t)``."""
        if not format_spec:
            return str(self)
        if self.numel() == 1:
            return format(self.item(), format_spec)
        raise TypeError(
            f"unsupported format string {format_spec!r} passed to Tensor.__format__: only one-element tensors "
            f"format as numbers, this one has shape {self.shape}; format t.tolist() or its elements"
        )

    __hash__ = object.__hash__

    def __deepcopy__(self, memo: dict) -> Tensor:
        """A copy with its own storage on the same device and backend (``copy.deepcopy(model.state_dict())``)."""
        out = type(self)._wrap(
            self._kernels("deepcopy").cast(self._data, self.dtype),
            self.device,
            self._backend,
            requires_grad=self.requires_grad and self.grad_fn is None,
        )
        if hasattr(self, "__dict__"):  # subclasses such as Parameter
            out.__dict__.update(copy.deepcopy(self.__dict__, memo))
        if self.grad is not None:
            out.grad = copy.deepcopy(self.grad, memo)
        memo[id(self)] = out
        return out

    def __reduce_ex__(self, protocol: SupportsIndex) -> tuple[Any, ...]:
        """Pickle as host values, dtype and device (checkpoints on disk); autograd history is not kept.

        Unpickling puts the tensor back on the same device, so that backend must
        be installed and available then.
        """
        if self.grad_fn is not None:
            raise RuntimeError(
                "only leaf tensors can be pickled (this one has autograd history); pickle t.detach() instead"
            )
        state = dict(self.__dict__) if hasattr(self, "__dict__") else {}
        return (
            _unpickle,
            (type(self), to_host(self, "pickle"), self.dtype.name, str(self.device), self.requires_grad, state),
        )

    # ------------------------------------------------------------------ devices and dtypes
    def to(
        self,
        *args: Any,
        dtype: Any = None,
        device: DeviceLike | None = None,
        non_blocking: bool = False,
        copy: bool = False,
    ) -> Tensor:
        """``.to(device)``, ``.to(dtype)``, ``.to(device, dtype)`` or ``.to(other)``; differentiable for dtype
        changes.  ``copy=True`` returns a new tensor even when nothing changes.  ``non_blocking`` is accepted
        for torch's signature: a move between devices goes through host memory and is complete on return.

        An explicit conversion: autocast never changes what it produces.
        """
        kwargs = {"dtype": dtype, "device": device, "copy": bool(copy)}
        return route("to", Tensor._convert, (self, *args), kwargs, "explicit dtype=")

    def _convert(self, *args: Any, dtype: Any = None, device: DeviceLike | None = None, copy: bool = False) -> Tensor:
        for a in args:
            if isinstance(a, DType) or (isinstance(a, str) and _is_dtype_name(a)):
                dtype = a
            elif isinstance(a, (str, Device)):
                device = a
            elif isinstance(a, Tensor):
                device, dtype = a.device, a.dtype
            else:
                raise TypeError(f"to() takes a device, a dtype or a tensor, got {a!r}")
        out = self
        if device is not None:
            target = registry.resolve(device)
            if target != self.device:
                out = _move(self, target, registry.get_backend(target.type))
        if dtype is not None:
            out = ew.cast(out, dt.as_dtype(dtype))
        return out.clone() if copy and out is self else out

    def cuda(self, device: Any = None, non_blocking: bool = False) -> Tensor:
        """This tensor on the cuda backend (``device``: an index, ``"cuda:1"`` or None for the current one);
        BackendUnavailableError with the reason where it cannot run."""
        return _to_backend(self, "cuda", device)

    def opencl(self, device: Any = None, non_blocking: bool = False) -> Tensor:
        """This tensor on the opencl backend, as :meth:`cuda` does for cuda."""
        return _to_backend(self, "opencl", device)

    def pin_memory(self) -> Tensor:
        """``self`` for a cpu tensor: ampcore copies between host and device through ordinary NumPy memory, with
        no page-locked pool, so there is nothing to pin (DataLoader's ``pin_memory=True`` is harmless)."""
        if self.device.type != "cpu":
            raise RuntimeError(f"cannot pin a tensor on {str(self.device)!r}: only cpu tensors can be pinned")
        return self

    def is_pinned(self) -> bool:
        """False: ampcore never page-locks host memory (see :meth:`pin_memory`)."""
        return False

    # dtype and device shorthands: .float() is .to(float32), and so on (from one table).
    float = _to_method("float", dt.float32)
    double = _to_method("double", dt.float64)
    half = _to_method("half", dt.float16)
    bfloat16 = _to_method("bfloat16", dt.bfloat16)
    long = _to_method("long", dt.int64)
    int = _to_method("int", dt.int32)
    bool = _to_method("bool", dt.bool_)
    cpu = _to_method("cpu", "cpu")

    def type_as(self, other: Tensor) -> Tensor:
        return self.to(other.dtype)

    # ------------------------------------------------------------------ autograd
    def backward(self, gradient: Tensor | None = None, retain_graph: builtins.bool = False) -> None:
        """Accumulate d(self)/d(leaf) into every leaf's ``.grad``."""
        if not self.requires_grad:
            raise RuntimeError(
                "backward() on a tensor that does not require grad and has no grad_fn; "
                "set requires_grad=True on the leaves you differentiate"
            )
        if gradient is None:
            if self.numel() != 1:
                raise RuntimeError(
                    f"backward() without a gradient needs a scalar output, got shape {self.shape}; "
                    "pass gradient=ones_like(output) or reduce (e.g. .sum()) first"
                )
            try:
                grad = self._backend.kernels.full(self.shape, 1.0, self.dtype, self.device.index)
            except KernelError as exc:  # the kernel table gates it; name the op
                raise exc.named("backward") from exc.error
        else:
            if not isinstance(gradient, Tensor) or gradient.shape != self.shape:
                got = gradient.shape if isinstance(gradient, Tensor) else type(gradient).__name__
                raise ValueError(f"gradient must be a tensor of shape {self.shape}, got {got}")
            grad = gradient.to(device=self.device, dtype=self.dtype)._data
        run_backward(self, grad, retain_graph=retain_graph)

    def detach(self) -> Tensor:
        """The same values, cut from the graph (shares the array)."""
        return Tensor._wrap(self._data, self.device, self._backend)

    def requires_grad_(self, requires_grad: builtins.bool = True) -> Tensor:
        if not isinstance(requires_grad, (bool, np.bool_)):
            raise TypeError(f"requires_grad must be True or False, got {requires_grad!r}")
        if self.grad_fn is not None and not requires_grad:
            raise RuntimeError("cannot unset requires_grad on a non-leaf tensor; use .detach()")
        if requires_grad and not self.dtype.is_floating_point:
            raise TypeError(f"only floating tensors can require gradients, got {self.dtype.name}")
        self.requires_grad = bool(requires_grad)
        return self

    @primitive("clone")
    def clone(self) -> Tensor:
        """A copy with its own storage; differentiable."""
        return ew.call(ew.CAST, self, dtype=self.dtype)

    # ------------------------------------------------------------------ in-place (rebinding)
    def _check_inplace(self) -> None:
        if is_grad_enabled() and self.requires_grad:
            kind = "a leaf tensor that requires grad" if self.is_leaf else "a tensor in the autograd graph"
            raise RuntimeError(f"in-place change of {kind}; do it under ampcore.no_grad() or on .detach()")

    def _rebase(self, compute: Any, name: str) -> Tensor:
        """torch-style in-place op ``name``: ``self`` becomes ``compute(self)`` and its
        autograd history continues through the ops ``compute`` recorded.

        In-place ops are never autocast (``self`` keeps its dtype); ``name``
        is what traces show.

        ``compute`` runs on an alias carrying ``self``'s current history, so the
        gradient reaching ``self`` later flows back through ``compute``'s graph.
        A leaf that requires grad cannot change in place (as in torch).
        """
        if is_grad_enabled() and self.requires_grad and self.grad_fn is None:
            raise RuntimeError(
                "a leaf tensor that requires grad cannot be changed in place; "
                "do it under ampcore.no_grad() or on .detach()"
            )
        alias = Tensor._wrap(
            self._data, self.device, self._backend, grad_fn=self.grad_fn, requires_grad=self.requires_grad
        )
        out = route(name, compute, (alias,), {}, "in-place")
        self._data, self.dtype, self.shape = out._data, out.dtype, out.shape
        if is_grad_enabled():  # under no_grad the history is untouched: a Parameter keeps requires_grad
            self.grad_fn, self.requires_grad = out.grad_fn, out.requires_grad
        return self

    def copy_(self, src: Any) -> Tensor:
        """Overwrite the values with ``src`` (broadcast and cast to this tensor's shape and dtype)."""
        self._check_inplace()
        src = src if isinstance(src, Tensor) else self._new_tensor(src, self.dtype)
        src = ew.cast(src.detach().to(device=self.device), self.dtype).expand(self.shape)
        self._data = src._data
        return self

    def zero_(self) -> Tensor:
        return self.fill_(0)

    def _kernels(self, op: str) -> Any:
        """This tensor's backend kernels, raising KernelError naming ``op`` when one fails."""
        return guarded_kernels(self._backend, op)

    def fill_(self, value: builtins.float) -> Tensor:
        self._check_inplace()
        self._data = self._kernels("fill_").full(self.shape, value, self.dtype, self.device.index)
        return self

    def add_(self, other: Any, alpha: builtins.float = 1.0) -> Tensor:
        """In place ``self += alpha * other``, keeping the dtype; differentiable for non-leaf tensors."""
        return self._rebase(lambda a: ew.cast(a + (other * alpha if alpha != 1.0 else other), self.dtype), "add_")

    def mul_(self, other: Any) -> Tensor:
        """In place ``self *= other``, keeping the dtype; differentiable for non-leaf tensors."""
        return self._rebase(lambda a: ew.cast(a * other, self.dtype), "mul_")

    def __setitem__(self, index: Any, value: Any) -> None:
        """``x[index] = value`` for basic indices (ints, slices, ...) or one bool mask (``x[x < v] = -inf``).

        ``value`` is a number or a tensor broadcastable to the selection (for a
        mask: to ``x.shape[mask.ndim:]``, or one row per selected element), cast
        to this tensor's dtype.  Gradients flow to the kept elements of ``self``
        and to a tensor ``value``; a leaf that requires grad cannot be assigned
        to outside ``no_grad()`` (as in torch).
        """
        if STATE.plain and not (grad_mode.enabled and (self.requires_grad or getattr(value, "requires_grad", False))):
            data = indexing.assigned_array(self, index, value)  # nothing to record: the kernels directly
            if data is not None:
                self._data = data
                return
        self._rebase(lambda a: indexing.setitem(a, index, value), "__setitem__")

    # ------------------------------------------------------------------ shape
    reshape = shape.reshape
    view = shape.reshape
    permute = shape.permute
    transpose = shape.transpose
    expand = shape.expand
    unsqueeze = shape.unsqueeze
    squeeze = shape.squeeze
    flatten = shape.flatten
    __getitem__ = shape.getitem  # basic indices, one integer tensor, or one bool mask (x[mask], a host read)
    split = shape.split
    chunk = shape.chunk
    masked_select = indexing.masked_select
    take_along_dim = indexing.take_along_dim
    sort = sorting.sort
    argsort = sorting.argsort
    topk = sorting.topk
    multinomial = multinomial

    def expand_as(self, other: Tensor) -> Tensor:
        return self.expand(other.shape)

    def contiguous(self) -> Tensor:
        return self

    # ------------------------------------------------------------------ reductions
    sum = reduction.sum
    mean = reduction.mean
    max = reduction.max
    amax = reduction.amax
    argmax = reduction.argmax
    cumsum = reduction.cumsum

    @primitive("min")
    def min(self, dim: builtins.int | None = None, keepdim: builtins.bool = False) -> Any:
        if dim is None:
            return -reduction.amax(-self)
        values, indices = reduction.max(-self, dim, keepdim)
        return reduction.MaxResult(-values, indices)

    @primitive("argmin")
    def argmin(self, dim: builtins.int | None = None, keepdim: builtins.bool = False) -> Tensor:
        return reduction.argmax(-self, dim, keepdim)

    @primitive("var")
    def var(
        self,
        dim: Any = None,
        correction: builtins.int = 1,
        keepdim: builtins.bool = False,
        *,
        unbiased: builtins.bool | None = None,
    ) -> Tensor:
        """Variance with Bessel's ``correction`` (torch's default 1; torch's older ``unbiased=False`` is 0)."""
        if unbiased is not None:
            correction = 1 if unbiased else 0
        axes = reduction.normalize_axes(dim, self.ndim)
        n = 1
        for a in axes:
            n *= self.shape[a]
        centered = self - self.mean(axes, keepdim=True)
        return (centered * centered).sum(axes, keepdim) / float(max(n - correction, 0) or float("nan"))

    @primitive("std")
    def std(
        self,
        dim: Any = None,
        correction: builtins.int = 1,
        keepdim: builtins.bool = False,
        *,
        unbiased: builtins.bool | None = None,
    ) -> Tensor:
        return self.var(dim, correction, keepdim, unbiased=unbiased).sqrt()

    # ------------------------------------------------------------------ math
    # The declared ops' methods and operators (exp, pow, maximum, __add__, __lt__, ...) are attached below the
    # class from the op registry (ampcore.ops.declare), as each op is declared.

    @primitive("masked_fill")
    def masked_fill(self, mask: Tensor, value: builtins.float) -> Tensor:
        return ew.where(mask, value, self)

    def matmul(self, other: Tensor) -> Tensor:
        """Matrix product (torch.matmul semantics)."""
        return linalg.matmul(self, other)

    # softmax(dim) and log_softmax(dim) are ampcore.nn.functional's, which sits above Tensor and attaches them.
    softmax: Callable[..., Tensor]
    log_softmax: Callable[..., Tensor]

    # ------------------------------------------------------------------ operators
    if TYPE_CHECKING:
        # What the type checker sees of the declared ops' methods and Python operators, which are attached at
        # import from the op registry (below the class): any other attribute is a method returning a Tensor.
        def __getattr__(self, name: str) -> Callable[..., Tensor]: ...
        def __add__(self, other: Any) -> Tensor: ...
        def __radd__(self, other: Any) -> Tensor: ...
        def __sub__(self, other: Any) -> Tensor: ...
        def __rsub__(self, other: Any) -> Tensor: ...
        def __mul__(self, other: Any) -> Tensor: ...
        def __rmul__(self, other: Any) -> Tensor: ...
        def __truediv__(self, other: Any) -> Tensor: ...
        def __rtruediv__(self, other: Any) -> Tensor: ...
        def __pow__(self, other: Any) -> Tensor: ...
        def __rpow__(self, other: Any) -> Tensor: ...
        def __neg__(self) -> Tensor: ...
        def __abs__(self) -> Tensor: ...
        def __eq__(self, other: Any) -> Tensor: ...  # type: ignore[override]
        def __ne__(self, other: Any) -> Tensor: ...  # type: ignore[override]
        def __lt__(self, other: Any) -> Tensor: ...
        def __le__(self, other: Any) -> Tensor: ...
        def __gt__(self, other: Any) -> Tensor: ...
        def __ge__(self, other: Any) -> Tensor: ...

    def __matmul__(self, o: Tensor) -> Tensor:
        return linalg.matmul(self, o)

    def __rmatmul__(self, o: Tensor) -> Tensor:
        return linalg.matmul(o, self)

    def __invert__(self) -> Tensor:
        """Logical not of a bool tensor (``~mask``)."""
        if self.dtype != dt.bool_:
            raise TypeError(f"~ is only supported on bool tensors here, got {self.dtype.name}")
        return ew.compare("eq", self, False)

    def __pos__(self) -> Tensor:
        return self


def _attach(decl: declare.Declaration) -> None:
    """A declared op's method and operators on Tensor (a method the class defines itself is kept)."""
    if "method" in decl.variants and decl.name not in Tensor.__dict__:
        setattr(Tensor, decl.name, decl.function)
    if "inplace" in decl.variants and f"{decl.name}_" not in Tensor.__dict__:
        setattr(Tensor, f"{decl.name}_", _inplace(decl))
    for dunder in decl.operators:
        setattr(Tensor, dunder, _operator(dunder, decl.name, False, decl))
    for dunder in decl.roperators:
        setattr(Tensor, dunder, _operator(dunder, decl.name, True, decl))


def _inplace(decl: declare.Declaration) -> Callable[..., Tensor]:
    """``x.<name>_(*args)``: the op in place, keeping the dtype; differentiable for non-leaf tensors."""
    fn, name = decl.function, f"{decl.name}_"

    def method(self: Tensor, *args: Any, **kwargs: Any) -> Tensor:
        return self._rebase(lambda a: ew.cast(fn(a, *args, **kwargs), self.dtype), name)

    method.__name__ = method.__qualname__ = name
    method.__doc__ = f"In place ``{decl.name}``, keeping the dtype."
    return method


declare.on_declare(_attach)


def _is_dtype_name(name: str) -> bool:
    try:
        dt.as_dtype(name)
        return True
    except ValueError:
        return False


def _to_backend(t: Tensor, name: str, device: Any) -> Tensor:
    """``t.to()`` the backend ``name`` (``device``: None, an index, or a device of that type)."""
    if device is None:
        target: Any = name
    elif isinstance(device, (int, np.integer)) and not isinstance(device, bool):
        target = f"{name}:{int(device)}"
    else:
        target = device
    try:
        resolved = registry.resolve(target)
    except UnknownBackendError as err:
        unavailable = BackendUnavailableError(name, f"ampcore-{name} is not installed")
        unavailable.args = (
            f"backend {name!r} is not installed: pip install ampcore-{name} (installed backends are "
            f"{', '.join(map(repr, err.known))})",
        )
        raise unavailable from err
    if resolved.type != name:
        raise ValueError(f".{name}() got a device of another type: {str(resolved)!r}; use .to({str(resolved)!r})")
    return t.to(resolved)


def _move(t: Tensor, target: Device, backend: Any) -> Tensor:
    """Copy ``t`` to another device through the host."""
    if t.grad_fn is not None:
        raise RuntimeError(
            f"cannot move a tensor that is part of an autograd graph from '{t.device}' to "
            f"'{target}'; move the inputs before computing"
        )
    check_storable(backend, target.index, t.dtype)
    data = guarded_kernels(backend, "to").from_numpy(to_host(t, "move between devices"), t.dtype, target.index)
    return Tensor._wrap(data, target, backend, requires_grad=t.requires_grad)


set_tensor_class(Tensor)
register_op("to", "primitive")
for _name in ("add_", "mul_"):
    register_op(_name, "in-place")


def _unpickle(
    cls: type[Tensor], values: np.ndarray, dtype: str, device: str, requires_grad: bool, state: dict
) -> Tensor:
    """Rebuild a pickled tensor (or Parameter) on ``device``."""
    t = tensor(values, dtype=dtype, device=device)
    out = cls._wrap(t._data, t.device, t._backend, requires_grad=requires_grad)
    if state:
        out.__dict__.update(state)
    return out


def _float_formatter(values: np.ndarray) -> Callable[[Any], str]:
    """torch's float format for ``values``: ``0.7750`` (4 decimals), ``1.`` when every value is whole, ``1.0000e-05``
    when the magnitudes span more than 1000x, exceed 1e8 or go below 1e-4; right-aligned to one width."""
    finite = values[np.isfinite(values)]
    nonzero = np.abs(finite[finite != 0])
    whole = bool(np.all(np.ceil(nonzero) == nonzero))
    big, small = (float(nonzero.max()), float(nonzero.min())) if nonzero.size else (0.0, 0.0)
    sci = nonzero.size > 0 and (big / small > 1000.0 or big > 1e8 or (not whole and small < 1e-4))

    def fmt(value: Any) -> str:
        if sci:
            return f"{value:.4e}"
        if whole:
            return f"{value:.0f}" + ("" if math.isnan(value) or math.isinf(value) else ".")
        return f"{value:.4f}"

    specials = values[~np.isfinite(values)]
    samples = [float(finite.min()), float(finite.max())] if finite.size else []
    samples += [v for v in (np.inf, -np.inf) if bool((specials == v).any())]
    samples += [math.nan] if bool(np.isnan(specials).any()) else []
    width = max((len(fmt(v)) for v in samples), default=0)
    return lambda value: fmt(value).rjust(width)
