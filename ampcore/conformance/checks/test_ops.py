"""Ops through ampcore's Tensor API on the backend's device, forward and backward, in every float dtype the
backend computes, against float64 references (:mod:`ampcore.conformance.op_reference`).

This is the path users take: the core composes the backend's kernels (the fused ones where the backend has
them), so kernels that pass one by one but break together (views, broadcasting, the scalar operands of
backward rules, low-precision rounding between steps) fail here.  Report cells: ``exp`` is the forward,
``exp.backward`` the gradients of every float input.

Each case is one row of :data:`CASES`: the ampcore call, the float64 reference, the inputs, which of the
tolerance rules (:mod:`ampcore.conformance.tolerance`) judges its forward (``rule``), and the fan-in ``n`` of
the forward and ``n_grad`` of each float input's gradient.

- ``rule="elementwise"``: the forward of an elementwise op is the kernel's result, judged at its own value by
  the op's ulps (rule 1; the op is the row's name before any ``.``).
- ``rule="sum"``: the forward is a sum of products of the inputs (sum, cumsum, matmul, linear, conv2d), judged
  by the accumulation rule (rule 2) with the sum of the terms' magnitudes from the reference on ``|inputs|``;
  so are its gradients (the reference's vector-Jacobian product on ``|inputs|`` and ``|weights|``).
  ``roundings`` counts the intermediate results the core may round to the dtype on the way (linear's
  product before its bias; a broadcast operand's gradient summed from per-batch gradients).
- ``rule="composite"``: rule 3, ``n`` the fan-in of one result element (how many terms are summed into it,
  multiplied over chained reductions) and ``roundings`` (default 8) the roundings to the dtype on the way.
  Gradients of elementwise and composite rows are composite too: the gradient of a broadcast operand sums
  over the broadcast copies; a gradient that reuses a forward reduction (layer_norm's weight, attention)
  counts it.

Forward references run on the inputs as the device holds them (rounded to the dtype); backward references
differentiate the forward reference at those inputs with the output gradient also rounded to the dtype,
the one the backend received.  Pure data movement must reproduce values bit for bit.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import pytest

import ampcore
import ampcore.nn.functional as F
from ampcore import dtypes as dt
from ampcore.conformance import assert_close, declared
from ampcore.conformance import op_reference as R
from ampcore.conformance.tolerance import DEFAULT_ROUNDINGS, assert_accumulated, assert_elementwise
from ampcore.ops import declare

FLOATS = [d.name for d in dt.FLOAT_DTYPES]
Sampler = Callable[[np.random.Generator, tuple[int, ...], dt.DType], np.ndarray]


# --------------------------------------------------------------------------- input makers
def normal(scale: float = 1.0) -> Sampler:
    return lambda rng, shape, d: rng.standard_normal(shape) * scale


def uniform(lo: float, hi: float) -> Sampler:
    return lambda rng, shape, d: rng.uniform(lo, hi, shape)


def distinct() -> Sampler:
    """A shuffled ramp of step 1/4, exact in every dtype: no ties, so max and argmax are unique."""
    return lambda rng, shape, d: rng.permutation(int(np.prod(shape))).reshape(shape) * 0.25 - np.prod(shape) / 8


def large(signed: bool) -> Sampler:
    """Magnitudes where exp overflows without the max-subtraction trick (:func:`op_reference.overflowing_rows`)."""
    return lambda rng, shape, d: R.overflowing_rows(rng, shape, d, signed)


def fixed(values: Any) -> Sampler:
    return lambda rng, shape, d: np.array(values)


def indices(high: int) -> Sampler:
    return lambda rng, shape, d: rng.integers(0, high, shape)


def distinct_indices(high: int) -> Sampler:
    """Indices below ``high``, no two equal (a random permutation's first ones)."""
    return lambda rng, shape, d: rng.permutation(high)[: int(np.prod(shape))].reshape(shape)


def mask() -> Sampler:
    return lambda rng, shape, d: rng.random(shape) < 0.5


@dataclass(frozen=True)
class Arg:
    """One input of a case: its shape, how to draw it, and its kind ("float": the dtype under test and
    differentiable; "int64"; "bool")."""

    shape: tuple[int, ...]
    sample: Sampler = normal()
    kind: str = "float"


@dataclass(frozen=True)
class OpCase:
    """One op under test: a row of the table both checks read."""

    call: Callable[..., Any]  # the ampcore call on Tensors (may return (values, indices))
    ref: Callable[..., Any]  # the float64 reference on NumPy arrays, complex-step safe
    args: tuple[Arg, ...]
    n: int = 1  # forward fan-in (see the module docstring)
    n_grad: tuple[int, ...] = ()  # fan-in of each float input's gradient (default 1 each)
    exact: bool = False  # moves values only: bit-exact forward
    differentiable: bool = True
    rule: str = "composite"  # "elementwise", "sum" or "composite": the tolerance rule (see the module docstring)
    roundings: int | None = None  # intermediate roundings to the dtype (default: 0 for "sum", 8 for "composite")


def _f(*shape: int, sample: Sampler | None = None) -> Arg:
    return Arg(tuple(shape), sample or normal())


# --------------------------------------------------------------------------- the cases
# Every declared elementwise op (ampcore/ops/decls), through its function form, on its declared domains: one
# operand on an odd shape; two broadcast (3, 1, 5) with (4, 5) (a's gradient sums 4 copies, b's 3); three
# (where) with the last broadcast over 4 rows.  A bool operand is a random mask.
_SHAPES = {1: ((7, 13),), 2: ((3, 1, 5), (4, 5)), 3: ((4, 5), (4, 5), (1, 5))}
_FAN_IN = {1: (1,), 2: (4, 3), 3: (1, 1, 4)}


def _from(domain: declare.Domain) -> Sampler:
    return lambda rng, shape, d: domain.sample(rng, shape)


def _declared_case(name: str) -> OpCase:
    decl = declare.get(name)
    assert decl is not None and decl.program is not None
    prog = decl.program
    args = tuple(
        Arg(shape, mask(), "bool") if kind == "b" else Arg(shape, _from(declared.domain(name, i)))
        for i, (kind, shape) in enumerate(zip(prog.inputs, _SHAPES[prog.arity]))
    )
    n_grad = tuple(n for n, kind in zip(_FAN_IN[prog.arity], prog.inputs) if kind == "T")
    differentiable = decl.differentiable and prog.result == "T"
    return OpCase(
        decl.function,
        declared.complex_reference(name),
        args,
        n_grad=n_grad,
        rule="elementwise",
        differentiable=differentiable,
    )


def _example_case(name: str) -> OpCase:
    """A declared composite op's row, from its declaration's example and reference."""
    decl = declare.get(name)
    assert decl is not None and decl.example is not None and decl.reference is not None
    ex, fn, ref = decl.example, decl.function, decl.reference
    args = tuple(
        Arg(i.shape, _from(i.domain))
        if i.kind == "float"
        else Arg(
            i.shape, (distinct_indices if i.distinct else indices)(i.high) if i.kind == "int64" else mask(), i.kind
        )
        for i in ex.inputs
    )
    rule = "composite" if ex.rule == "exact" else ex.rule
    return OpCase(
        lambda *tensors: ex.run(fn, *tensors),
        lambda *arrays: ref(*arrays, **ex.params),
        args,
        n=ex.n,
        n_grad=ex.n_grad,
        exact=ex.rule == "exact",
        differentiable=decl.differentiable,
        rule=rule,
        roundings=ex.roundings,
    )


CASES: dict[str, OpCase] = {name: _declared_case(name) for name in declared.elementwise_ops()}
CASES.update({name: _example_case(name) for name in declared.composite_ops()})
CASES.update(
    {
        "sum": OpCase(lambda x: x.sum(dim=(0, 2)), lambda x: np.sum(x, axis=(0, 2)), (_f(3, 4, 5),), n=15, rule="sum"),
        "max": OpCase(lambda x: x.amax(dim=1), lambda x: R.amax(x, 1), (_f(4, 7, sample=distinct()),), exact=True),
        "max.dim": OpCase(
            lambda x: tuple(x.max(dim=0)),
            lambda x: (R.amax(x, 0), R.argmax(x, 0)),
            (_f(4, 7, sample=distinct()),),
            exact=True,
        ),
        "cumsum": OpCase(
            lambda x: x.cumsum(1), lambda x: np.cumsum(x, axis=1), (_f(4, 9),), n=9, n_grad=(9,), rule="sum"
        ),
        # (2, 1, 3, 16) @ (3, 16, 5): k = 16; a's gradient sums 5 columns in each of 3 broadcast batches, b's
        # 3 rows in each of 2 (each batch's partial gradient may be rounded to the dtype first).
        "matmul": OpCase(
            lambda a, b: a @ b, np.matmul, (_f(2, 1, 3, 16), _f(3, 16, 5)), n=16, n_grad=(15, 6), rule="sum"
        ),
        "reshape": OpCase(lambda x: x.reshape(6, -1), lambda x: x.reshape(6, -1), (_f(3, 4, 5),), exact=True),
        "permute": OpCase(
            lambda x: x.permute(2, 0, 1), lambda x: np.transpose(x, (2, 0, 1)), (_f(2, 3, 4),), exact=True
        ),
        "expand": OpCase(
            lambda x: x.expand(2, 3, 4, 5),
            lambda x: np.broadcast_to(x, (2, 3, 4, 5)),
            (_f(3, 1, 5),),
            exact=True,
            n_grad=(8,),
        ),
        "getitem": OpCase(lambda x: x[1:, ::-2, 3], lambda x: x[1:, ::-2, 3], (_f(4, 6, 5),), exact=True),
        # An integer-list index (take; its gradient is scatter_add): row 4 is picked twice.
        "getitem.index": OpCase(
            lambda x: x[[4, 0, 4, 2]], lambda x: x[[4, 0, 4, 2]], (_f(5, 3),), exact=True, n_grad=(2,)
        ),
        # Rows 5 and 2 are looked up three times each.
        "embedding": OpCase(
            F.embedding,
            lambda idx, w: w[idx],
            (Arg((2, 4), fixed([[5, 0, 2, 5], [2, 2, 1, 5]]), "int64"), _f(6, 3)),
            exact=True,
            n_grad=(3,),
        ),
        "pad": OpCase(
            lambda x: ampcore.ops.pad(x, (1, 2, 0, 1), 0.5),
            lambda x: np.pad(x, ((0, 1), (1, 2)), constant_values=0.5),
            (_f(3, 4),),
            exact=True,
        ),
        "cat": OpCase(
            lambda a, b, c: ampcore.cat([a, b, c], dim=1),
            lambda a, b, c: np.concatenate([a, b, c], 1),
            (_f(3, 2), _f(3, 0), _f(3, 4)),
            exact=True,
        ),
        # The fused-kernel ops (or the core's composition where the backend has no fused kernel).
        "softmax": OpCase(
            lambda x: F.softmax(x, dim=1), lambda x: R.softmax(x, 1), (_f(3, 6, 2, sample=normal(2)),), n=6, n_grad=(6,)
        ),
        "log_softmax": OpCase(
            lambda x: F.log_softmax(x, dim=1),
            lambda x: R.log_softmax(x, 1),
            (_f(3, 6, 2, sample=normal(2)),),
            n=6,
            n_grad=(6,),
        ),
        "softmax.large": OpCase(
            lambda x: F.softmax(x, dim=-1),
            lambda x: R.softmax(x, -1),
            (_f(4, 9, sample=large(signed=True)),),
            n=9,
            n_grad=(9,),
        ),
        "log_softmax.large": OpCase(
            lambda x: F.log_softmax(x, dim=-1),
            lambda x: R.log_softmax(x, -1),
            (_f(4, 9, sample=large(signed=False)),),
            n=9,
            n_grad=(9,),
        ),
        # gelu above -3: below, the tanh form's derivative cancels terms ~10x its size (see test_fused).
        "gelu": OpCase(F.gelu, R.gelu, (_f(6, 5, sample=uniform(-3, 3)),)),
        "gelu.tanh": OpCase(
            lambda x: F.gelu(x, approximate="tanh"), lambda x: R.gelu(x, "tanh"), (_f(6, 5, sample=uniform(-3, 3)),)
        ),
        # Composite nn ops.  linear: 8 products + the bias (the product may be rounded before the bias is added);
        # x's gradient sums 5 outputs, w's and b's 2 * 3 rows.
        "linear": OpCase(
            F.linear, R.linear, (_f(2, 3, 8), _f(5, 8), _f(5)), n=9, n_grad=(5, 6, 6), rule="sum", roundings=1
        ),
        # layer_norm over 16: the weight's gradient sums 4 rows of x-hat, each normalised over 16.
        "layer_norm": OpCase(
            lambda x, w, b: F.layer_norm(x, (16,), w, b),
            R.layer_norm,
            (_f(4, 16), _f(16), _f(16)),
            n=16,
            n_grad=(16, 64, 4),
        ),
        # mean over 5 rows of a log-sum-exp over 7 classes; the gradient is softmax - one-hot, over 7.
        "cross_entropy": OpCase(
            F.cross_entropy,
            R.cross_entropy,
            (_f(5, 7, sample=normal(2)), Arg((5,), indices(7), "int64")),
            n=35,
            n_grad=(7,),
        ),
        "mse_loss": OpCase(F.mse_loss, R.mse_loss, (_f(4, 6), _f(4, 6)), n=24),
        # conv2d, 3 channels x 3 x 3 taps + bias; output (2, 4, 5, 3).  x's gradient: 4 filters x 9 taps;
        # w's and b's: 2 images x 15 positions.
        "conv2d": OpCase(
            lambda x, w, b: F.conv2d(x, w, b, stride=(1, 2), padding=1),
            lambda x, w, b: R.conv2d(x, w, b, (1, 2), (1, 1)),
            (_f(2, 3, 5, 5), _f(4, 3, 3, 3), _f(4)),
            n=28,
            n_grad=(36, 30, 30),
            rule="sum",
            roundings=1,
        ),
        # scaled_dot_product_attention ("sdpa": the report's op column is narrow).
        # L=3 queries, S=5 keys, E=4, Ev=6: scores sum E, the output S of them (n = S*E); dq: S x Ev;
        # dk: L x S x Ev (through the softmax's sum over S); dv: L x (S x E of the weights).
        "sdpa": OpCase(
            F.scaled_dot_product_attention,
            R.attention,
            (_f(2, 3, 4), _f(2, 5, 4), _f(2, 5, 6)),
            n=20,
            n_grad=(30, 90, 60),
        ),
        "sdpa.causal": OpCase(
            lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True),
            lambda q, k, v: R.attention(q, k, v, causal=True),
            (_f(2, 4, 4), _f(2, 4, 4), _f(2, 4, 3)),
            n=16,
            n_grad=(12, 48, 64),
        ),
        # Edges: an empty reduction axis (sum is 0, the gradient empty), an empty inner dimension, strided views
        # (a transposed, reversed operand and a step-2 slice) going into a kernel.
        "sum.empty": OpCase(lambda x: x.sum(dim=1), lambda x: np.sum(x, axis=1), (_f(3, 0, 4),), rule="sum"),
        "matmul.empty": OpCase(lambda a, b: a @ b, np.matmul, (_f(3, 0), _f(0, 4)), rule="sum"),
        "mul.strided": OpCase(
            lambda a, b: a.mT[::-1] * b[:, ::2],
            lambda a, b: a.T[::-1] * b[:, ::2],
            (_f(5, 4), _f(4, 10)),
            rule="elementwise",
        ),
        "matmul.strided": OpCase(
            lambda a, b: a.mT @ b[::2],
            lambda a, b: a.T @ b[::2],
            (_f(6, 3), _f(12, 5)),
            n=6,
            n_grad=(5, 3),
            rule="sum",
        ),
    }
)


# --------------------------------------------------------------------------- helpers
def _rng(op: str) -> np.random.Generator:
    """A generator seeded by the case name: every run and backend sees the same inputs."""
    return np.random.default_rng(zlib.crc32(op.encode()))


def _inputs(backend: Any, op: str, case: OpCase, dtype: dt.DType, requires_grad: bool) -> list[Any]:
    """The case's inputs as Tensors on the device: floats rounded to ``dtype``."""
    rng = _rng(op)
    out = []
    for arg in case.args:
        values = np.asarray(arg.sample(rng, arg.shape, dtype))
        if arg.kind == "float":
            out.append(backend.tensor(values.astype(np.float64).astype(dtype.numpy), dtype, requires_grad))
        else:
            backend.require_storage(arg.kind)
            out.append(backend.tensor(values.astype(np.int64 if arg.kind == "int64" else np.bool_), arg.kind))
    return out


def _host(tensors: list[Any]) -> list[np.ndarray]:
    """What the device holds, float inputs as float64 (the reference's inputs)."""
    return [t.numpy().astype(np.float64) if t.dtype.is_floating_point else t.numpy() for t in tensors]


def _outputs(result: Any) -> tuple[Any, ...]:
    return tuple(result) if isinstance(result, tuple) else (result,)


def _magnitudes(host: list[np.ndarray]) -> list[np.ndarray]:
    """The inputs' magnitudes (floats only): a "sum" row's reference on them is the sum of its terms' sizes."""
    return [np.abs(h) if h.dtype.kind == "f" else h for h in host]


def _float_inputs(case: OpCase) -> list[int]:
    return [i for i, a in enumerate(case.args) if a.kind == "float"]


def _assert_bit_exact(got: np.ndarray, expected: np.ndarray, what: str) -> None:
    """A data-movement result holds exactly the input values it moved."""
    g = np.asarray(got, np.float64)
    assert g.shape == expected.shape, f"{what}: shape {g.shape} where the reference has {expected.shape}"
    differ = ~((g == expected) | (np.isnan(g) & np.isnan(expected)))
    if differ.any():
        i = tuple(int(v) for v in np.argwhere(differ)[0])
        raise AssertionError(
            f"{what}: moves values without arithmetic, so must reproduce them exactly; at {i} got "
            f"{g[i]!r}, expected {expected[i]!r} ({int(differ.sum())} of {g.size} elements differ)"
        )


def _roundings(case: OpCase) -> int:
    if case.roundings is not None:
        return case.roundings
    return 0 if case.rule == "sum" else DEFAULT_ROUNDINGS


def _check_output(
    got: Any, expected: np.ndarray, dtype: dt.DType, op: str, case: OpCase, magnitudes: Any, what: str
) -> None:
    """Indices exactly; float outputs in the input dtype, bit-exact for data movement, else by the case's rule."""
    if np.asarray(expected).dtype == np.bool_:
        assert got.dtype is dt.bool_, f"{what}: output dtype {got.dtype.name}, expected bool (a comparison)"
        assert np.array_equal(got.numpy(), expected), f"{what}: {got.numpy()}, expected {expected}"
        return
    if not np.issubdtype(np.asarray(expected).dtype, np.floating):
        assert got.dtype is dt.int64, f"{what}: index output has dtype {got.dtype.name}, not int64"
        assert np.array_equal(got.numpy(), expected), f"{what}: indices {got.numpy()}, expected {expected}"
        return
    assert got.dtype is dtype, f"{what}: output dtype {got.dtype.name}, expected {dtype.name} (the input dtype)"
    if case.exact:
        _assert_bit_exact(got.numpy(), np.asarray(expected, np.float64), what)
    elif case.rule == "elementwise":
        assert_elementwise(got.numpy(), expected, dtype, op.split(".")[0], what=what)
    elif case.rule == "sum":
        assert_accumulated(got.numpy(), expected, magnitudes, dtype, case.n, roundings=_roundings(case), what=what)
    else:
        assert_close(got.numpy(), expected, dtype, n=case.n, roundings=_roundings(case), what=what)


# --------------------------------------------------------------------------- checks
@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("op", list(CASES))
def test_forward(backend, op, dtype):
    """The op's output matches the float64 reference on the same (rounded) inputs, in the input dtype."""
    backend.require_compute(dtype)
    case, d = CASES[op], dt.as_dtype(dtype)
    tensors = _inputs(backend, op, case, d, requires_grad=False)
    outputs = _outputs(case.call(*tensors))
    host = _host(tensors)
    expected = _outputs(case.ref(*host))
    magnitudes = _outputs(case.ref(*_magnitudes(host))) if case.rule == "sum" else (None,) * len(expected)
    assert len(outputs) == len(expected), f"{op}: {len(outputs)} outputs, expected {len(expected)}"
    for i, (got, want, size) in enumerate(zip(outputs, expected, magnitudes)):
        what = f"{op} forward in {d.name}" + (f", output {i}" if len(outputs) > 1 else "")
        _check_output(got, want, d, op, case, size, what)


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("op", [f"{name}.backward" for name, case in CASES.items() if case.differentiable])
def test_backward(backend, op, dtype):
    """``out.backward(w)`` gives every float input the gradient of sum(w * ref(inputs)), in the input dtype."""
    backend.require_compute(dtype)
    name = op.removesuffix(".backward")
    case, d = CASES[name], dt.as_dtype(dtype)
    tensors = _inputs(backend, name, case, d, requires_grad=True)
    out = _outputs(case.call(*tensors))[0]
    weights = np.asarray(_rng(op).standard_normal(out.shape)).astype(d.numpy)
    out.backward(backend.tensor(weights, d))
    host = _host(tensors)
    for j, i in enumerate(_float_inputs(case)):
        t, what = tensors[i], f"{name} gradient of input {i} in {d.name}"
        assert t.grad is not None, f"{what}: no gradient reached the input"
        assert t.grad.dtype is d, f"{what}: gradient dtype {t.grad.dtype.name}, expected {d.name} (the leaf's dtype)"
        expected = R.vjp(case.ref, host, weights.astype(np.float64), i)
        n = case.n_grad[j] if case.n_grad else 1
        if case.rule == "sum":  # a gradient of a sum of products is one too; broadcast batches may round once
            magnitudes = R.vjp(case.ref, _magnitudes(host), np.abs(weights.astype(np.float64)), i)
            assert_accumulated(t.grad.numpy(), expected, magnitudes, d, n, roundings=1, what=what)
        else:
            assert_close(t.grad.numpy(), expected, d, n=n, what=what)
