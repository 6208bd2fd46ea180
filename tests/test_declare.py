"""The op registry (ampcore.ops.declare): what a declaration derives, and what it refuses.

Declarations are global, so those made here run in a fresh interpreter: the public-API pin and the other tests
see only ampcore's own ops.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from ampcore import expr as E
from ampcore.ops import declare


def _python(code: str) -> str:
    proc = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc.stdout


def test_a_composite_declaration_makes_the_function_the_method_and_the_policy_row():
    out = _python(
        """
        import numpy as np, ampcore
        from ampcore import policy as P
        from ampcore.ops.declare import Example, Input, composite

        @composite("scaled_softsign", category="fp32", aten=None,
                   example=Example((Input((3, 4)),), {"scale": 2.0}),
                   reference=lambda x, scale: scale * x / (1 + np.abs(x)))
        def scaled_softsign(input, scale=1.0):
            return scale * input / (1 + input.abs())

        x = ampcore.tensor([[-1.0, 0.0, 3.0]])
        assert ampcore.scaled_softsign is scaled_softsign and "scaled_softsign" in ampcore.__all__
        assert x.scaled_softsign(2.0).tolist() == [[-1.0, 0.0, 1.5]]
        with ampcore.autocast("cpu", dtype=ampcore.bfloat16, trace=True) as region:
            y = scaled_softsign(x.bfloat16())
        assert y.dtype == ampcore.float32 and "scaled_softsign" in region.trace.ops()
        print(P.get("cpu").decision("scaled_softsign").source)
        """
    )
    assert out.startswith("ampcore's own decision (declared in __main__)")


def test_the_conformance_suite_checks_a_declared_composite():
    out = _python(
        """
        import numpy as np, pytest, ampcore
        from ampcore.ops.declare import Example, Input, composite

        @composite("half_square", aten=None, example=Example((Input((4, 5)),)), reference=lambda x: 0.5 * x * x)
        def half_square(input):
            return 0.5 * input * input

        raise SystemExit(pytest.main(["-q", "-p", "no:cacheprovider", "--pyargs", "ampcore.conformance",
                                      "--ampcore-backend", "cpu", "-k", "half_square"]))
        """
    )
    assert "passed" in out and "half_square" in out


def test_a_declaration_that_cannot_be_is_refused_naming_why():
    with pytest.raises(declare.DeclarationError, match="declared already"):
        declare.unary("exp", E.exp)
    with pytest.raises(declare.DeclarationError, match="unknown category 'fast'"):
        declare.unary("fast_exp_never_declared", E.exp, category="fast")
    with pytest.raises(declare.DeclarationError, match="state its error bound"):
        declare.unary("exp_then_log_never_declared", lambda x: E.log(E.exp(x)))
    with pytest.raises(declare.DeclarationError, match="give both example= and reference="):
        declare.composite("no_reference_never_declared", example=declare.Example((declare.Input((2,)),)))(abs)
    assert declare.get("fast_exp_never_declared") is None and E.get("exp_then_log_never_declared") is None
