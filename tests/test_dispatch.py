"""The op hot path (issue 26): the fast path is exact, nodes are recorded only when a gradient is needed, the
cheap result check is always on and the full kernel-output check sits behind the debug switch."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import ampcore
from ampcore import KernelError
from ampcore.kernels import debug_kernels, set_debug_kernels
from ampcore.ops import declare
from ampcore.ops import elementwise as ew
from ampcore.testing import FakeBackend

DTYPES = ("float32", "float64", "float16", "bfloat16")


def _bits(t: ampcore.Tensor) -> bytes:
    return t.numpy().tobytes()


def _declared(inputs: str, result: str) -> list[str]:
    """The declared elementwise ops with these operand kinds and result kind (ampcore.ops.declare)."""
    return sorted(
        n
        for n, d in declare.declarations().items()
        if d.program is not None and d.program.inputs == inputs and d.program.result == result
    )


def _operands(dtype: str, seed: int = 0) -> tuple[ampcore.Tensor, ampcore.Tensor]:
    rng = np.random.default_rng(seed)
    a = rng.standard_normal((4, 8)) * 3
    b = rng.standard_normal((4, 8)) * 3
    b[0, :3] = (0.0, np.inf, np.nan)
    return ampcore.tensor(a, dtype=dtype), ampcore.tensor(b, dtype=dtype)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name", _declared("TT", "T"))
def test_binary_fast_path_is_bit_identical_to_the_routed_path(dtype: str, name: str) -> None:
    a, b = _operands(dtype)
    assert _bits(ew.binary(name, a, b)) == _bits(ew._binary(name, a, b))
    assert _bits(ew.binary(name, a, 2.5)) == _bits(ew._binary(name, a, 2.5))
    assert _bits(ew.binary(name, 2.5, a, reflected=True)) == _bits(ew._binary(name, 2.5, a))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name", _declared("T", "T"))
def test_unary_fast_path_is_bit_identical_to_the_routed_path(dtype: str, name: str) -> None:
    a, _ = _operands(dtype)
    assert _bits(ew.unary(name, a)) == _bits(ew._unary(name, a))


def test_fast_path_gradients_match_the_routed_path() -> None:
    def grads(fn: Callable[[Any, Any], Any]) -> tuple[bytes, bytes]:
        a, b = (t.requires_grad_() for t in _operands("float32", seed=1))
        fn(a, b).sum().backward()
        return _bits(a.grad), _bits(b.grad)

    for name in ("add", "sub", "mul", "div", "maximum"):
        assert grads(functools.partial(ew.binary, name)) == grads(functools.partial(ew._binary, name))


def test_no_node_is_recorded_unless_an_input_requires_grad() -> None:
    a, b = _operands("float32")
    assert (a + b).grad_fn is None and (a @ b.mT).grad_fn is None and a.sum().grad_fn is None
    b.requires_grad_()
    assert (a + b).grad_fn is not None
    with ampcore.no_grad():
        assert (a + b).grad_fn is None


def test_the_suite_runs_with_full_kernel_checks_on() -> None:
    assert debug_kernels(), "tests/conftest.py turns AMPCORE_DEBUG_KERNELS on for the whole suite"


class _WrongShapeMax(FakeBackend):
    """A backend whose max ignores keepdims (a shape bug only the full check sees)."""

    def kernel_functions(self) -> Any:
        table = dict(super().kernel_functions())
        inner = table["max"]
        table["max"] = lambda x, axes, keepdims: inner(x, axes, False)
        return table


class _WrongDtypeExp(FakeBackend):
    """A backend whose exp returns float64 for float32 input (the cheap check sees it)."""

    def kernel_functions(self) -> Any:
        table = dict(super().kernel_functions())
        table["exp"] = lambda x: np.exp(x.astype(np.float64))
        return table


def test_full_output_check_runs_only_behind_the_debug_switch(register_fake: Any) -> None:
    backend = register_fake(cls=_WrongShapeMax)
    x = ampcore.ones(2, 3, device=backend.name)
    with pytest.raises(KernelError, match="kernel 'max'"):
        x.amax(1, keepdim=True)
    previous = set_debug_kernels(False)
    try:
        x.amax(1, keepdim=True)  # unchecked: the wrong shape goes through
    finally:
        set_debug_kernels(previous)


def test_cheap_dtype_check_stays_on_without_the_debug_switch(register_fake: Any) -> None:
    backend = register_fake(cls=_WrongDtypeExp)
    x = ampcore.ones(3, device=backend.name)
    previous = set_debug_kernels(False)
    try:
        with pytest.raises(KernelError, match="op 'exp'.*returned float64 for float32 input"):
            x.exp()
    finally:
        set_debug_kernels(previous)
