"""Every RawKernel launch of the cuda backend passes what its CUDA C signature declares, without a GPU.

CuPy passes each kernel argument by its own type: an ndarray as its pointer,
a NumPy scalar as its bytes, a Python int as int64 and a float as double.  A
scalar of the wrong width shifts every argument after it, silently.  Here a
NumPy-backed stand-in for CuPy runs each launcher; the kernel compiler.load hands it parses
the ``extern "C"`` signature of the source it was given and checks, argument
by argument, the scalar's exact NumPy type and the array's element type and
contiguity, and that the block fits the kernel's ``__launch_bounds__``.
"""

from __future__ import annotations

import re
import sys
from types import ModuleType, SimpleNamespace
from typing import Any

import numpy as np
import pytest

from ampcore import dtypes as dt
from ampcore_cuda import compiler, launch
from ampcore_cuda.array import CuArray
from ampcore_cuda.codegen import ctype

# C parameter type -> NumPy scalar type (by value) or accepted array dtypes (through a pointer).
_SCALARS = {"int": np.int32, "long long": np.int64, "float": np.float32, "double": np.float64}
_POINTEES = {
    "float": {np.float32},
    "double": {np.float64},
    "unsigned short": {np.float16, np.uint16},
    "int": {np.int32},
    "long long": {np.int64},
    "bool": {np.bool_},
}


class FakeArray(np.ndarray):
    """A host array with the attributes the launchers read from a CuPy array."""

    @property
    def data(self) -> SimpleNamespace:  # type: ignore[override]
        return SimpleNamespace(ptr=self.ctypes.data)

    @property
    def device(self) -> SimpleNamespace:  # type: ignore[override]
        return SimpleNamespace(id=0)


def _fake(value: Any) -> Any:
    return value.view(FakeArray) if isinstance(value, np.ndarray) and not isinstance(value, FakeArray) else value


def _parameters(source: str, name: str) -> list[str]:
    match = re.search(rf"\b{name}\((.*?)\)\s*\{{", source, flags=re.S)
    assert match, f"no signature for {name}"
    return [" ".join(p.split()) for p in match.group(1).split(",")]


def _typedefs(source: str) -> dict[str, str]:
    return {alias: base for base, alias in re.findall(r"typedef\s+([\w ]+?)\s+(\w+);", source)}


def _check_argument(name: str, i: int, param: str, arg: Any, typedefs: dict[str, str]) -> None:
    words = [w for w in param.replace("*", " * ").split() if w not in ("const", "__restrict__")]
    pointer = "*" in words
    base = " ".join(w for w in words[:-1] if w != "*")  # the last word is the parameter's name
    base = typedefs.get(base, base)
    if pointer:
        assert isinstance(arg, np.ndarray), f"{name} argument {i} ({param}): got {type(arg).__name__}, not an array"
        if base != "void":
            assert arg.dtype.type in _POINTEES[base], f"{name} argument {i} ({param}): array of {arg.dtype}"
        assert arg.flags.c_contiguous, f"{name} argument {i} ({param}): array is not C-contiguous"
    else:
        assert type(arg) is _SCALARS[base], (
            f"{name} argument {i} ({param}): {type(arg).__name__} {arg!r}, CuPy would pass it as the wrong type"
        )


class FakeRawKernel:
    """Stands in for the ``Function`` that compiler.load returns (called as a RawKernel is)."""

    launches: list[tuple[str, tuple, tuple]] = []

    def __init__(self, source: str, name: str, options: tuple = ()):
        assert f"{name}(" in source and isinstance(options, tuple) and "--ftz=false" in options
        self.source, self.name = source, name
        bounds = re.search(rf"__launch_bounds__\((\d+)\)\s*{name}\(", source)
        self.max_block = int(bounds.group(1)) if bounds else 1024

    def __call__(self, grid: tuple, block: tuple, args: tuple, **kwargs: Any) -> None:
        assert isinstance(grid, tuple) and isinstance(block, tuple) and isinstance(args, tuple)
        assert all(isinstance(g, int) and g >= 1 for g in grid), f"{self.name}: grid {grid}"
        assert all(isinstance(b, int) and b >= 1 for b in block) and block[0] <= self.max_block, (
            f"{self.name}: block {block} (launch bounds {self.max_block})"
        )
        params = _parameters(self.source, self.name)
        assert len(args) == len(params), f"{self.name}: {len(args)} arguments for {len(params)} parameters"
        typedefs = _typedefs(self.source)
        for i, (param, arg) in enumerate(zip(params, args)):
            _check_argument(self.name, i, param, arg, typedefs)
        self.launches.append((self.name, grid, block))


class _Device:
    def __init__(self, index: int = 0):
        self.index = index

    def __enter__(self):
        return self

    def __exit__(self, *exc: Any) -> None:
        return None

    def synchronize(self) -> None:
        return None


class _FakeCupy(ModuleType):
    """NumPy under CuPy's name: every array it returns is a FakeArray."""

    def __getattr__(self, name: str) -> Any:
        target = getattr(np, name)
        if not callable(target):
            return target
        return lambda *args, **kwargs: _fake(target(*args, **kwargs))


@pytest.fixture
def fake_cupy(monkeypatch):
    fake = _FakeCupy("cupy")
    fake.cuda = SimpleNamespace(Device=_Device, runtime=SimpleNamespace(getDevice=lambda: 0))
    monkeypatch.setitem(sys.modules, "cupy", fake)
    monkeypatch.setattr(compiler, "load", FakeRawKernel)  # what launch.raw_kernel compiles and loads
    monkeypatch.setattr(launch, "_kernels", {})
    monkeypatch.setattr(launch, "_metas", launch.OrderedDict())
    FakeRawKernel.launches = []
    return fake


def _arr(values: Any, dtype: dt.DType) -> CuArray:
    host = np.ascontiguousarray(dt.convert(np.asarray(values), dtype)).view(ctype(dtype).cupy_dtype)
    return CuArray(host.view(FakeArray), dtype)


FLOATS = [dt.float32, dt.float64, dt.float16, dt.bfloat16]


@pytest.mark.parametrize("dtype", FLOATS, ids=lambda d: d.name)
def test_fused_kernels_and_conversions_pass_their_declared_argument_types(fake_cupy, dtype):
    from ampcore_cuda import convert, gelu, softmax

    x = _arr(np.linspace(-3, 3, 24).reshape(2, 3, 4), dtype)
    for axis in (0, 1, 2, -1):
        for op in (softmax.softmax, softmax.log_softmax):
            op(x, axis)
        for op in (softmax.softmax_backward, softmax.log_softmax_backward):
            op(x, x, axis)
    for approximate in ("none", "tanh"):
        gelu.gelu(x, approximate)
        gelu.gelu_backward(x, x, approximate)
    if dtype != dt.float32:
        convert.convert(x.data, dtype, dt.float32)
        convert.convert(_arr(np.ones(5), dt.float32).data, dt.float32, dtype)
    names = {name for name, _, _ in FakeRawKernel.launches}
    assert {f"softmax_{ctype(dtype).tag}", f"gelu_backward_tanh_{ctype(dtype).tag}"} <= names


def test_softmax_rows_along_a_negative_axis_are_the_rows_of_the_positive_one(fake_cupy):
    from ampcore_cuda import softmax

    x = _arr(np.zeros((2, 3, 4)), dt.float32)
    softmax.softmax(x, -2)
    softmax.softmax(x, 1)
    (_, grid_neg, block_neg), (_, grid_pos, block_pos) = FakeRawKernel.launches
    assert grid_neg == grid_pos == (8,) and block_neg == block_pos


@pytest.mark.parametrize("dtype", FLOATS, ids=lambda d: d.name)
def test_amp_kernels_pass_their_declared_argument_types(fake_cupy, dtype):
    from ampcore_cuda import amp

    grads = [_arr(np.ones(n), dtype) for n in (3, launch.TILE + 1)]
    inv, found = _arr([0.5], dt.float32), _arr([0.0], dt.float32)
    amp.unscale_and_check(grads, inv, found)
    amp.update_scale(_arr([65536.0], dt.float32), _arr([0], dt.int32), found, 2.0, 0.5, 2000)
    (unscale, grid, _), (update, _, _) = FakeRawKernel.launches
    assert unscale == f"unscale_and_check_{ctype(dtype).tag}" and grid == (3,) and update == "update_scale"


@pytest.mark.parametrize(
    "param_dtype, grad_dtype",
    [(dt.float32, dt.float32), (dt.float32, dt.float16), (dt.bfloat16, dt.bfloat16), (dt.float64, dt.float64)],
    ids=lambda d: d.name,
)
def test_adamw_step_passes_its_declared_argument_types(fake_cupy, param_dtype, grad_dtype):
    from ampcore_cuda import optim

    moment = dt.float64 if param_dtype == dt.float64 else dt.float32
    shapes = [(5,), (3, 7)]
    optim.adamw_step(
        [_arr(np.ones(s), param_dtype) for s in shapes],
        [_arr(np.ones(s), grad_dtype) for s in shapes],
        [_arr(np.zeros(s), moment) for s in shapes],
        [_arr(np.zeros(s), moment) for s in shapes],
        step=1,
        lr=1e-3,
        beta1=0.9,
        beta2=0.999,
        eps=1e-8,
        weight_decay=0.01,
        decoupled=True,
    )
    assert [name for name, _, _ in FakeRawKernel.launches] == [
        f"adamw_step_{ctype(param_dtype).tag}_{ctype(grad_dtype).tag}"
    ]


@pytest.mark.parametrize("dtype", FLOATS, ids=lambda d: d.name)
def test_layer_norm_and_cross_entropy_pass_their_declared_argument_types(fake_cupy, dtype):
    from ampcore_cuda import loss, norm

    x = _arr(np.linspace(-1, 1, 12).reshape(3, 4), dtype)
    w = CuArray(_arr(np.ones(8), dtype).data[::2], dtype)  # a strided weight is copied, not misread
    b = _arr(np.zeros(4), dtype)
    y, mean, rstd = norm.layer_norm(x, w, b, 4, 1e-5)
    norm.layer_norm_backward(x, y, w, mean, rstd, 4)
    norm.layer_norm(x, None, None, 4, 1e-5)
    target = _arr([0, 3, -100], dt.int32)  # int32 targets are widened for the kernel's long long *
    _, lse, _ = loss.cross_entropy(x, target)
    loss.cross_entropy_backward(x, target, lse, np.ones(3))
    assert len(FakeRawKernel.launches) == 6
