"""The core checks every kernel's output shape and dtype against its contract (ampcore.kernel_outputs), so a
broken kernel is named where it fails instead of surfacing as a broadcast error in an op built on it."""

from __future__ import annotations

import numpy as np
import pytest

import ampcore
from ampcore import dtypes as dt
from ampcore.dispatch import KernelError
from ampcore.kernel_outputs import OUTPUT_RULES
from ampcore.kernels import FUSED, PRIMITIVES, KernelOutputError
from ampcore.nn import functional as F
from ampcore.testing import FakeBackend


def test_every_kernel_with_a_computable_output_has_a_rule():
    unruled = (PRIMITIVES | FUSED) - set(OUTPUT_RULES)
    assert unruled - {"slice", "unscale_and_check", "update_scale", "adamw_step"} == set()


def test_a_max_that_drops_keepdims_is_named_by_every_op_built_on_it(register_fake):
    backend = register_fake(defects=("max_ignores_keepdims",))
    x = ampcore.tensor(np.random.default_rng(0).random((4, 5)), device=backend.name, requires_grad=True)
    target = ampcore.tensor([0, 1, 2, 3], device=backend.name)
    for call in (lambda: F.softmax(x, 1), lambda: F.cross_entropy(x, target), lambda: x.amax(1, keepdim=True),
                 lambda: F.scaled_dot_product_attention(x[None], x[None], x[None])):
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
    with pytest.raises(KernelError, match=r"op 'exp' failed \(kernel 'exp'\).*returned float32 of shape \(2,\), "
                                          r"expected float16 of shape \(2,\)"):
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
