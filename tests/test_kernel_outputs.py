"""The core checks every kernel's output shape and dtype against its contract (ampcore.kernel_outputs), so a
broken kernel is named where it fails instead of surfacing as a broadcast error in an op built on it."""

from __future__ import annotations

import numpy as np
import pytest

import ampcore
from ampcore import dtypes as dt
from ampcore import expr
from ampcore.dispatch import KernelError
from ampcore.kernel_outputs import OUTPUT_RULES, rule_for
from ampcore.kernels import FUSED, PRIMITIVES, KernelOutputError
from ampcore.nn import functional as F
from ampcore.testing import FakeBackend


def test_every_kernel_with_a_computable_output_has_a_rule():
    unruled = (PRIMITIVES | FUSED) - set(OUTPUT_RULES)
    # elementwise makes kernels (each program's has the rule of its program: kernel_outputs.program_rule)
    exempt = {"slice", "unscale_and_check", "update_scale", "adamw_step", "adamw_step_amp", "elementwise"}
    assert unruled - exempt == set()
    assert all(rule_for(name) is not None for name in expr.names())


def test_a_max_that_drops_keepdims_is_named_by_every_op_built_on_it(register_fake):
    backend = register_fake(defects=("max_ignores_keepdims",))
    x = ampcore.tensor(np.random.default_rng(0).random((4, 5)), device=backend.name, requires_grad=True)
    target = ampcore.tensor([0, 1, 2, 3], device=backend.name)
    for call in (
        lambda: F.softmax(x, 1),
        lambda: F.cross_entropy(x, target),
        lambda: x.amax(1, keepdim=True),
        lambda: F.scaled_dot_product_attention(x[None], x[None], x[None]),
    ):
        with pytest.raises(KernelError) as info:
            call()
        assert info.value.kernel == "max" and info.value.op is not None
        assert isinstance(info.value.__cause__, KernelOutputError)
        assert "expected float64 of shape" in str(info.value) and "max(float64 array" in str(info.value)


class WideExp(FakeBackend):
    """exp of float16 comes back float32: a silent widening the dtype check must catch."""

    def kernel_functions(self):
        table = dict(super().kernel_functions())
        good = table["exp"]
        table["exp"] = lambda x: good(x).astype(np.float32)
        return table


def test_a_kernel_returning_the_wrong_dtype_raises_naming_op_and_kernel(register_fake):
    backend = register_fake(cls=WideExp)
    x = ampcore.tensor([1.0, 2.0], dtype=dt.float16, device=backend.name)
    with pytest.raises(
        KernelError,
        match=r"op 'exp' failed \(kernel 'exp'\).*returned float32 of shape \(2,\), "
        r"expected float16 of shape \(2,\)",
    ):
        x.exp()


def test_a_kernel_called_outside_an_op_is_named_too(register_fake):
    backend = register_fake(defects=("max_ignores_keepdims",))
    k = backend.kernels
    with pytest.raises(KernelError, match=r"^kernel 'max' failed on backend"):
        k.max(backend.from_numpy(np.ones((2, 3)), dt.float32), (1,), True)
    assert k.max(backend.from_numpy(np.ones((2, 3)), dt.float32), (1,), False).shape == (2,)


def test_the_check_keeps_the_honest_backends_working():
    x = ampcore.tensor(np.arange(12.0).reshape(3, 4), requires_grad=True)
    y = (F.softmax(x, 1) * x).sum() + x.amax() + ampcore.cat([x, x]).sum() + (x @ x.T).sum()
    y.backward()
    assert x.grad.shape == (3, 4)


class Recording(FakeBackend):
    """Records the operand kinds every binary, comparison and where kernel is called with."""

    def kernel_functions(self):
        table = dict(super().kernel_functions())
        self.seen = []
        for name in ("add", "sub", "mul", "div", "pow", "maximum", "minimum", "lt", "eq", "where"):
            table[name] = self._record(name, table[name])
        return table

    def _record(self, name, fn):
        def kernel(*args):
            self.seen.append(
                (name, tuple(a.dtype.kind if isinstance(a, np.ndarray) else type(a).__name__ for a in args))
            )
            return fn(*args)

        return kernel


def test_kernels_never_see_a_float_scalar_with_an_integer_array(register_fake):
    """The guide's promise: a Python float meets only floating arrays; with an integer tensor the core
    promotes the tensor to float32 first (torch's rule), so the scalar never takes an integer dtype."""
    backend = register_fake(cls=Recording)
    x = ampcore.tensor([1, 2, 3], dtype=dt.int64, device=backend.name)
    results = [x + 1.5, 1.5 * x, x - 0.5, x / 2, x**0.5, x < 1.5, x == 2.0, ampcore.where(x > 1, x, 0.5)]
    assert all(r.dtype in (dt.float32, dt.bool_) for r in results)
    for name, kinds in backend.seen:
        if "float" in kinds:
            assert all(k in ("f", "b", "float") for k in kinds), f"{name} got a float scalar with {kinds}"
    assert (x + 2).dtype == dt.int64 and ("add", ("i", "int")) in backend.seen
