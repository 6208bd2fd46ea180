"""docs/writing-a-backend.md is the contract a plugin author works from alone: every kernel's contract is
written down, and every "must" in it is enforced by a conformance check."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from ampcore import kernels
from ampcore.kernels import FUSED
from ampcore.optim.adam import adamw_step_reference

GUIDE = (Path(__file__).resolve().parents[1] / "docs" / "writing-a-backend.md").read_text()
ADAMW_FORMULA = (
    "p = p * (1 - lr * weight_decay)",
    "g = g + weight_decay * p",
    "m = m + (g - m) * (1 - beta1)",
    "v = v * beta2 + g * g * (1 - beta2)",
    "sqrt(1 - beta2 ** step) + eps",
    "(lr / (1 - beta1 ** step))",
)

# Each "must" of the guide -> the conformance check (module::test) that enforces it.
MUSTS = {
    "what must hold": "the heading of the table of checks",
    "inf and NaN must match": "ampcore/conformance/tolerance.py::assert_same_nonfinite",
    "must be correctly rounded": "ampcore/conformance/tolerance.py::assert_elementwise",
    "your `cast` must then convert": (
        "ampcore/conformance/checks/test_float8.py::test_casts_to_and_from_float8_are_ml_dtypes"
    ),
    "whose bits it must give": (
        "ampcore/conformance/checks/test_float8.py::test_current_scaling_cast_gives_the_numpy_recipes_bits"
    ),
}


def test_every_fused_kernel_has_its_contract_in_the_guide_and_the_kernels_docstring():
    for name in sorted(FUSED):
        assert re.search(rf"^\| `{name}\(", GUIDE, re.M) or name in ("adamw_step", "adamw_step_amp"), (
            f"no contract row for {name}"
        )
        assert re.search(rf"^{name}\(", kernels.__doc__, re.M), f"ampcore.kernels has no entry for {name}"
    section = GUIDE[GUIDE.index("#### The fused kernels' contract") : GUIDE.index("## 3. The hooks")]
    for text in ADAMW_FORMULA + ("`decoupled=True`", "**In place.**", "TypeError", "ValueError"):
        assert text in section, f"the adamw_step contract does not say {text!r}"
    for key in ("lr", "beta1", "beta2", "eps", "weight_decay"):
        assert f"`{key}`" in section and f"``{key}``" in kernels.check_adamw_step.__doc__


def test_the_reference_composition_carries_the_formula():
    doc = adamw_step_reference.__doc__
    for line in ADAMW_FORMULA:
        assert line in doc, line


@pytest.mark.parametrize(
    "topic",
    [
        "axes` as a tuple",
        "never `None`",
        "a float scalar only ever meets",
        "true division",
        "RuntimeWarning",
        "Output shape and dtype",
    ],
)
def test_the_guide_settles_the_questions_the_outside_author_had(topic):
    assert topic in GUIDE


def test_every_must_in_the_guide_is_enforced_by_a_check():
    musts = re.findall(r"[^.|]*\bmust\b[^.|]*", GUIDE)
    adamw = [m for m in musts if "adamw_step" in m]
    unexplained = [m.strip() for m in musts if m not in adamw and not any(key in m for key in MUSTS)]
    assert not unexplained, f"each 'must' needs a conformance check (add it to MUSTS) or rewording: {unexplained}"
    checks = Path(__file__).resolve().parents[1] / "ampcore" / "conformance" / "checks" / "test_fused.py"
    assert "def test_adamw_step_rejects_bad_arguments_before_writing" in checks.read_text()


def test_the_guide_pins_no_pass_count():
    """A count of checks changes whenever an op is declared (ampcore/ops/decls): a doc quotes none by hand."""
    for doc in (Path(__file__).resolve().parents[1] / "docs").glob("*.md"):
        pinned = re.findall(r"passes \(\d+ pass", doc.read_text())
        assert pinned == [], f"{doc.name} pins a pass count: {pinned}"
