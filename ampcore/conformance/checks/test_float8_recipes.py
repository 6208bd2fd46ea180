"""Float8 training recipes on a backend: a Float8Linear's three GEMMs under every recipe.

For tensorwise, rowwise (with and without power-of-two scales) and MXFP8
block scaling, a Float8Linear on the backend's device computes its output,
grad_input and grad_weight; each must equal the float64 product of the
recipe's float8 operands (:mod:`ampcore.conformance.float8_recipes`: the
recipe's scales, ml_dtypes' rounding) within float32 accumulation.  The
weight stays float32 and unchanged.  Delayed scaling's first step is
tensorwise scaling (it scales by its own amax), so it is checked too.

A backend whose capabilities say ``float8="none"`` skips every check as not
supported, with its reason.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import ampcore
from ampcore import nn
from ampcore.conformance import NOT_SUPPORTED
from ampcore.conformance.float8_recipes import expected_linear
from ampcore.conformance.kernel_harness import seeded_rng
from ampcore.float8 import (
    DelayedScaling,
    Float8GemmConfig,
    Float8LinearConfig,
    MXFP8BlockScaling,
    RowwiseScaling,
    TensorwiseScaling,
    convert_to_float8_training,
)

pytestmark = pytest.mark.conformance(check="float8 recipes")

RECIPES = {
    "tensorwise": TensorwiseScaling(),
    "rowwise": RowwiseScaling(),
    "rowwise-exact-scales": RowwiseScaling(round_scales_to_power_of_2=False),
    "delayed-first-step": DelayedScaling(amax_history_len=4),
    "mxfp8": MXFP8BlockScaling(),
}


def _require_float8(backend: Any) -> None:
    caps = backend.capabilities
    if caps.float8 == "none":
        why = f" ({caps.float8_reason})" if caps.float8_reason else ""
        pytest.skip(f"{NOT_SUPPORTED}: {backend.name!r} has no float8{why}")


@pytest.mark.conformance(op="Float8Linear")
@pytest.mark.parametrize("shape", [(24, 40, 36), (32, 64, 48)], ids=["ragged", "aligned"])
@pytest.mark.parametrize("name", list(RECIPES))
def test_float8_linear_gemms_match_the_recipe(backend, name, shape):
    """``ragged``: K = 40 and N = 36 give MX blocks a zero-padded tail; ``aligned``: every dimension a multiple of
    16, as float8 tensor cores (cuBLASLt) take them.  Fast accumulation is off in all three GEMMs: the
    tolerance is float32 accumulation's, which a GPU's fast float8 accumulation does not promise."""
    _require_float8(backend)
    recipe = RECIPES[name]
    rng = seeded_rng("float8 recipes", name, *map(str, shape))
    m, k, n = shape
    x = rng.standard_normal((m, k)).astype(np.float32) * 2
    w = (rng.standard_normal((n, k)) / np.sqrt(k)).astype(np.float32)
    g = (rng.standard_normal((m, n)) * 1e-3).astype(np.float32)
    linear = nn.Linear(k, n, bias=False, device=backend.device)
    with ampcore.no_grad():
        linear.weight.copy_(ampcore.tensor(w, device=backend.device))
    exact = Float8GemmConfig(use_fast_accum=False)
    config = Float8LinearConfig(
        recipe, gemm_config_output=exact, gemm_config_grad_input=exact, gemm_config_grad_weight=exact
    )
    layer = convert_to_float8_training(linear, config)
    xt = ampcore.tensor(x, device=backend.device, requires_grad=True)
    out = layer(xt)
    out.backward(ampcore.tensor(g, device=backend.device))
    got = {"output": out.numpy(), "grad_input": xt.grad.numpy(), "grad_weight": layer.weight.grad.numpy()}
    for gemm, (want, tol) in expected_linear(x, w, g, recipe).items():
        err = np.abs(got[gemm].astype(np.float64) - want)
        worst = np.unravel_index(np.argmax(err - tol), err.shape)
        assert np.all(err <= tol), (
            f"Float8Linear {name} {gemm}: element {tuple(map(int, worst))} is {got[gemm][worst]!r}, the recipe's "
            f"float8 product is {want[worst]!r} (tolerance {tol[worst]:.3g})"
        )
    assert np.array_equal(layer.weight.numpy(), w), "Float8Linear changed its float32 master weight"
