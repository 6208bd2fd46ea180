"""Captured steps (``ampcore.compile``) on this backend: every op, forward and backward, and chains of elementwise
ops fused into one kernel, replayed bit for bit as the backend runs them eagerly.

A captured call replays the kernels its eager run called, through the backend's own runner where it offers one
(:meth:`ampcore.Backend.capture_runner`) and its fused kernels (:meth:`ampcore.Backend.fused_kernel`) where it
fuses, else the core's reference runner, kernel by kernel.  Whatever the route, the replay must give eager's
bits: every op of the autocast policies and every declared op (``op_cases.CASES``), its output and the
gradients of its float inputs; and fused chains in every float dtype, with operands of the output's shape, a
row, a column and one element, holding infinities, NaN, signed zeros, subnormals and values whose 16-bit
rounding is a tie (a fused kernel that skips a rounding eager makes, or rounds twice, fails here); and chains
whose operands differ in dtype (a 16-bit activation, a float32 residual, a 16-bit bias row), as an AMP step's
epilogues are; and a matmul or a float8 scaled_mm with the chain that reads its result
(:meth:`ampcore.Backend.fused_gemm_kernel` where the backend fuses GEMM epilogues), whose 16-bit product must be
rounded before the chain.  NaNs
compare as NaN (IEEE leaves their payload to the implementation); every other value by its bits.  An op whose
call cannot be captured (it reads the host, as sort does) is skipped with the reason.  Each check replays
twice and compares every replay: a backend's runner may record at its first replay (opencl's list of
enqueues) and replay what it recorded from the second on.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import ampcore
from ampcore import dtypes as dt
from ampcore.conformance.op_cases import CASES, Inputs

FLOATS = [d.name for d in dt.FLOAT_DTYPES]
SEED = 20260101
REPLAYS = 2  # a runner may record at its first replay and replay its recording from the second
_ops: Any = ampcore  # its declared ops' function forms (ampcore.maximum, ...) are exported at import


def _same_bits(got: np.ndarray, want: np.ndarray, what: str) -> None:
    got, want = np.asarray(got), np.asarray(want)
    assert got.dtype == want.dtype and got.shape == want.shape, f"{what}: {got.dtype}{got.shape} != {want.dtype}"
    if got.dtype.kind == "f" or got.dtype in (dt.bfloat16.numpy,):
        wide_got, wide_want = got.astype(np.float64), want.astype(np.float64)
        nan = np.isnan(wide_want)
        assert np.array_equal(np.isnan(wide_got), nan), f"{what}: NaN where eager has none (or the reverse)"
        unsigned = {2: np.uint16, 4: np.uint32, 8: np.uint64}[got.dtype.itemsize]
        bad = (got.view(unsigned) != want.view(unsigned)) & ~nan
        if bad.any():
            i = np.flatnonzero(bad.reshape(-1))[0]
            raise AssertionError(
                f"{what}: {int(bad.sum())} of {bad.size} values differ from eager's bits, the first at flat index "
                f"{i}: {got.reshape(-1)[i]!r} (replayed) != {want.reshape(-1)[i]!r} (eager)"
            )
    else:
        assert np.array_equal(got, want), f"{what}: {got} (replayed) != {want} (eager)"


class _Fixed(Inputs):
    """An :class:`Inputs` that hands out tensors made beforehand, in order (the captured call's arguments)."""

    def __init__(self, tensors: list[ampcore.Tensor], device: Any):
        super().__init__((dt.float32,), device=device)
        self.tensors, self.i = tensors, 0

    def _next(self, *_: Any) -> ampcore.Tensor:
        t = self.tensors[self.i]
        self.i += 1
        return t

    def __call__(self, *shape: int) -> ampcore.Tensor:
        return self._next()

    def const(self, values: Any) -> ampcore.Tensor:
        return self._next()

    def classes(self, *values: int) -> ampcore.Tensor:
        return self._next()


class _Recording(Inputs):
    """An :class:`Inputs` that keeps what it made."""

    def __init__(self, *args: Any, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.made: list[ampcore.Tensor] = []

    def __call__(self, *shape: int) -> ampcore.Tensor:
        self.made.append(super().__call__(*shape))
        return self.made[-1]

    def const(self, values: Any) -> ampcore.Tensor:
        self.made.append(super().const(values))
        return self.made[-1]

    def classes(self, *values: int) -> ampcore.Tensor:
        self.made.append(super().classes(*values))
        return self.made[-1]


def _outputs(out: Any) -> list[ampcore.Tensor]:
    items = out if isinstance(out, (tuple, list)) else [out]
    return [o for o in items if isinstance(o, ampcore.Tensor)]


def _copies(tensors: list[ampcore.Tensor], grad: bool) -> list[ampcore.Tensor]:
    out = []
    for t in tensors:
        c = t.detach().clone()
        out.append(c.requires_grad_(True) if grad and c.dtype.is_floating_point else c)
    return out


def _weights(shape: tuple[int, ...], k: int) -> np.ndarray:
    """A fixed pattern to weigh output ``k`` by, in float32: every backend stores it (float64 is optional)."""
    n = int(np.prod(shape)) if shape else 1
    return (np.linspace(-1.0, 1.0, max(n, 1)) * (k + 1)).astype(np.float32).reshape(shape)


def _run(case: Callable[..., Any], tensors: list[ampcore.Tensor], device: str) -> tuple[list[Any], list[Any]]:
    """The case's outputs (host arrays) and the gradients of its float inputs after ``backward`` of each output
    with weights of ones... times a fixed pattern (host arrays; None where no gradient arrived)."""
    ampcore.manual_seed(SEED)
    outs = _outputs(case(_Fixed(tensors, device)))
    values = [o.detach().numpy() for o in outs]
    grads: list[Any] = []
    differentiable = [o for o in outs if o.requires_grad and o.dtype.is_floating_point]
    if differentiable:
        total = None
        for k, o in enumerate(differentiable):
            w = ampcore.tensor(_weights(o.shape, k), device=device)
            term = (o * w.to(o.dtype)).sum()
            total = term if total is None else total + term
        assert total is not None
        total.backward()
        grads = [t.grad.numpy() if t.grad is not None else None for t in tensors]
    return values, grads


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("op", list(CASES))
def test_captured_op_replays_eager_bits(backend, op, dtype):
    """The op, compiled: its replay's output and its inputs' gradients (the captured backward) are eager's bits."""
    backend.require_compute(dtype)
    d = dt.as_dtype(dtype)
    maker = _Recording((d,), seed=SEED, device=backend.device)
    CASES[op](maker)
    base = maker.made
    case = CASES[op]

    def call(*tensors: ampcore.Tensor) -> Any:
        return case(_Fixed(list(tensors), backend.device))

    eager_values, eager_grads = _run(case, _copies(base, True), backend.device)
    compiled = ampcore.compiler.compile(call, options={"warmup": 0})
    _run(lambda t: compiled(*t.tensors), _copies(base, True), backend.device)  # the recording
    stats = compiled._compiled.stats
    if stats.breaks:
        pytest.skip(f"{op} cannot be captured: {stats.breaks[0].reason}")
    for replay in range(1, REPLAYS + 1):  # fresh copies of the inputs each time: new arrays, the same values
        values, grads = _run(lambda t: compiled(*t.tensors), _copies(base, True), backend.device)
        assert stats.replays == replay, f"{op}: call {replay + 1} did not replay ({stats})"
        for i, (got, want) in enumerate(zip(values, eager_values)):
            _same_bits(got, want, f"{op} in {dtype}, output {i}, replay {replay}")
        for i, (got, want) in enumerate(zip(grads, eager_grads)):
            if want is None:
                assert got is None, f"{op} in {dtype}: replay {replay} gave input {i} a gradient eager does not"
                continue
            assert got is not None, f"{op} in {dtype}: no gradient reached input {i} through the captured backward"
            _same_bits(got, want, f"{op} in {dtype}, gradient of input {i}, replay {replay}")


# --------------------------------------------------------------------------- fused chains
def _edge_values(d: dt.DType, rng: np.random.Generator, n: int) -> np.ndarray:
    """Random values mixed with the hard ones: +-inf, NaN, +-0, subnormals of d, and 16-bit rounding ties."""
    info = dt.finfo(d)
    special = [np.inf, -np.inf, np.nan, 0.0, -0.0, info.tiny / 4, -info.tiny / 2, 1.0 + 2.0**-8, 1.0 + 2.0**-11,
               3.0 + 2.0**-9, 65504.0, 70000.0, 1e-5, 3.0e38]  # fmt: skip
    values = rng.standard_normal(n) * 4.0
    idx = rng.choice(n, size=min(len(special), n), replace=False)
    values[idx] = special[: len(idx)]
    return values


CHAINS: dict[str, Callable[..., Any]] = {
    "chain.arith": lambda a, b, c: ((a * b + c) / 1.5 - a) * 0.25,
    "chain.sqrt_abs": lambda a, b, c: ((a - b).abs() + c.abs()).sqrt() - 1.0,
    "chain.select": lambda a, b, c: ampcore.where(a > b, a - c, b * 0.5) + c,
    "chain.minmax_neg": lambda a, b, c: _ops.maximum(-a, _ops.minimum(b, c)) * 2.0,
    "chain.relu_sign": lambda a, b, c: (a + b).relu() * c.sign() - c,
    "chain.casts": lambda a, b, c: ((a.float() * b.float()).to(a.dtype) + c) * 3.0,
    "chain.compare_cast": lambda a, b, c: (a > c).to(a.dtype) * b + (b <= c).to(a.dtype),
    # numbers no 16-bit dtype holds (dropout's 1 / (1 - p)): computed in float32 eagerly, so fused too
    "chain.inexact_scalar": lambda a, b, c: ampcore.where(a > c, a * (1.0 / 0.9), b - 0.1) / 3.0,
}
"""Chains of elementwise ops, by the name their cells carry in the report."""


@pytest.mark.parametrize("layout", ["full", "row", "column", "one"])
@pytest.mark.parametrize("op", list(CHAINS))
@pytest.mark.parametrize("dtype", FLOATS)
def test_fused_chain_replays_eager_bits(backend, dtype, op, layout):
    """A chain of elementwise ops (fused into one kernel where the backend fuses) gives eager's bits on hard
    values; ``c`` takes each broadcast layout."""
    backend.require_compute(dtype)
    d = dt.as_dtype(dtype)
    rng = np.random.default_rng(SEED)
    shape = (33, 70)
    c_shape = {"full": shape, "row": (70,), "column": (33, 1), "one": (1,)}[layout]
    with np.errstate(over="ignore"):  # 70000 and 3e38 overflow float16 to inf on purpose
        a, b, c = (
            ampcore.tensor(_edge_values(d, rng, int(np.prod(s))).reshape(s), dtype=d, device=backend.device)
            for s in (shape, shape, c_shape)
        )
    chain, fn = op, CHAINS[op]
    compiled = ampcore.compiler.compile(fn, options={"warmup": 0})
    compiled(a, b, c)
    replays = [compiled(a, b, c) for _ in range(REPLAYS)]
    stats = compiled._compiled.stats
    assert stats.replays == REPLAYS and not stats.breaks, f"chain {chain!r} was not replayed: {stats}"
    want = fn(a, b, c).numpy()
    for k, replayed in enumerate(replays, 1):
        _same_bits(replayed.numpy(), want, f"chain {chain!r} in {dtype}, c {layout}, replay {k}")


MIXED_CHAINS: dict[str, Callable[..., Any]] = {
    # 16-bit bias add and scaling (each stored in 16 bits eagerly), widened, times a float32 tensor, narrowed
    "mixed.bias_residual": lambda x, r, bias: (((x + bias) * 1.5).relu().float() * r).to(x.dtype) - bias,
    # promotion: the 16-bit operands widened exactly into float32 arithmetic, then two 16-bit roundings
    "mixed.promote": lambda x, r, bias: ((x * r + bias) * 0.5).to(x.dtype) * 3.0 + bias,
    # a float32 mask chosen on 16-bit values, then 16-bit arithmetic
    "mixed.select": lambda x, r, bias: ampcore.where(r > 0, x * 2.0, (x - bias).abs()).sqrt() + bias,
}
"""Chains over a value ``x`` of the checked dtype, a float32 ``r`` of its shape and a bias row of its dtype."""


@pytest.mark.parametrize("op", list(MIXED_CHAINS))
@pytest.mark.parametrize("dtype", FLOATS)
def test_fused_mixed_chain_replays_eager_bits(backend, dtype, op):
    """A chain over operands of mixed dtypes and layouts (``x`` of the checked dtype, a float32 ``r``, a bias row
    of ``x``'s dtype), fused where the backend fuses, gives eager's bits on hard values."""
    backend.require_compute(dtype)
    backend.require_compute("float32")
    d = dt.as_dtype(dtype)
    rng = np.random.default_rng(SEED + 1)
    shape = (33, 70)
    with np.errstate(over="ignore"):
        x = ampcore.tensor(_edge_values(d, rng, 33 * 70).reshape(shape), dtype=d, device=backend.device)
        r = ampcore.tensor(
            _edge_values(dt.float32, rng, 33 * 70).reshape(shape), dtype=dt.float32, device=backend.device
        )
        bias = ampcore.tensor(_edge_values(d, rng, 70), dtype=d, device=backend.device)
    fn = MIXED_CHAINS[op]
    compiled = ampcore.compiler.compile(fn, options={"warmup": 0})
    compiled(x, r, bias)
    replays = [compiled(x, r, bias) for _ in range(REPLAYS)]
    stats = compiled._compiled.stats
    assert stats.replays == REPLAYS and not stats.breaks, f"chain {op!r} was not replayed: {stats}"
    want = fn(x, r, bias).numpy()
    for k, replayed in enumerate(replays, 1):
        _same_bits(replayed.numpy(), want, f"chain {op!r} in {dtype} with float32 r and a bias row, replay {k}")


EPILOGUES: dict[str, Callable[..., Any]] = {
    # a linear layer: the product stored in the checked dtype, the bias added and the activation in it
    "epilogue.linear_relu": lambda x, w, bias, r: (x @ w + bias).relu(),
    # an autocast linear's float32 output: the 16-bit product widened, a float32 row added, narrowed again
    "epilogue.widened_bias": lambda x, w, bias, r: ((x @ w).float() + r[0]).to(x.dtype) * 0.5,
    # a ReLU's backward on a product (a float32 mask), and a weight gradient's cast to float32
    "epilogue.mask_cast": lambda x, w, bias, r: ampcore.where(r > 0, x @ w, 0.0).float() * 3.0,
}
"""A matmul whose result only an elementwise chain reads (fused with it into one kernel where the backend fuses
GEMM epilogues), over ``x`` (33, 70) and ``w`` (70, 40) of the checked dtype, a bias row of it and a float32
``r`` of the product's shape."""


@pytest.mark.parametrize("op", list(EPILOGUES))
@pytest.mark.parametrize("dtype", FLOATS)
def test_fused_epilogue_replays_eager_bits(backend, dtype, op):
    """A matmul and the chain that reads its result (a GEMM epilogue, fused where the backend fuses one) give
    eager's bits: the product rounded to the checked dtype before the chain, as eager stores it, on rows of
    ordinary values, of values whose products are subnormal in 16 bits, and of infinities."""
    backend.require_compute(dtype)
    backend.require_compute("float32")
    d = dt.as_dtype(dtype)
    rng = np.random.default_rng(SEED + 2)
    x64 = rng.standard_normal((33, 70)) * 2.0
    x64[3] *= 2.0**-18  # products below float16's normal range, rounded to its subnormals
    x64[5, 7] = np.inf
    with np.errstate(over="ignore"):
        x = ampcore.tensor(x64, dtype=d, device=backend.device)
        w = ampcore.tensor(rng.standard_normal((70, 40)), dtype=d, device=backend.device)
        bias = ampcore.tensor(_edge_values(d, rng, 40), dtype=d, device=backend.device)
        r = ampcore.tensor(rng.standard_normal((33, 40)), dtype=dt.float32, device=backend.device)
    fn = EPILOGUES[op]
    compiled = ampcore.compiler.compile(fn, options={"warmup": 0})
    compiled(x, w, bias, r)
    replays = [compiled(x, w, bias, r) for _ in range(REPLAYS)]
    stats = compiled._compiled.stats
    assert stats.replays == REPLAYS and not stats.breaks, f"epilogue {op!r} was not replayed: {stats}"
    want = fn(x, w, bias, r).numpy()
    for k, replayed in enumerate(replays, 1):
        _same_bits(replayed.numpy(), want, f"epilogue {op!r} in {dtype}, replay {k}")


@pytest.mark.conformance(op="epilogue.scaled_mm")
@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "float16"])
def test_fused_scaled_mm_epilogue_replays_eager_bits(backend, dtype):
    """A float8 ``scaled_mm`` whose result only a chain reads (a float8 linear's bias and ReLU, fused with it
    where the backend fuses GEMM epilogues) gives eager's bits: its result rounded to ``dtype`` before the chain."""
    from ampcore.ops.float8 import scaled_mm

    caps = backend.capabilities
    if caps.float8 == "none":
        pytest.skip(f"not supported: {backend.name!r} has no float8 ({caps.float8_reason})")
    backend.require_compute(dtype)
    d = dt.as_dtype(dtype)
    rng = np.random.default_rng(SEED + 3)
    f8 = dt.float8_e4m3fn

    def on(values: Any, dtype: Any) -> ampcore.Tensor:
        return ampcore.tensor(values, dtype=dtype, device=backend.device)

    a = on((rng.standard_normal((33, 64)) * 4).astype(np.float32).astype(f8.numpy), f8)
    b = on((rng.standard_normal((64, 48)) * 4).astype(np.float32).astype(f8.numpy), f8)
    sa, sb = on(np.float32(0.37), dt.float32), on(np.float32(1.9), dt.float32)
    bias = on(rng.standard_normal(48), d)

    def fn(a, b, sa, sb, bias):
        return (scaled_mm(a, b, sa, sb, d) + bias).relu() * 0.5

    compiled = ampcore.compiler.compile(fn, options={"warmup": 0})
    compiled(a, b, sa, sb, bias)
    replays = [compiled(a, b, sa, sb, bias) for _ in range(REPLAYS)]
    stats = compiled._compiled.stats
    assert stats.replays == REPLAYS and not stats.breaks, f"the scaled_mm epilogue was not replayed: {stats}"
    want = fn(a, b, sa, sb, bias).numpy()
    for k, replayed in enumerate(replays, 1):
        _same_bits(replayed.numpy(), want, f"scaled_mm epilogue in {dtype}, replay {k}")
