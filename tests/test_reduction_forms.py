"""The reduction forms training code writes (issue 37: "check the sum, mean, max forms"), against torch: dims as
ints or tuples, keepdim, dtype=, the (values, indices) pairs, torch's older ``unbiased=``."""

from __future__ import annotations

import numpy as np
import pytest

import ampcore


def test_reduction_forms_real_code_uses_give_torchs_values():
    """The sum/mean/max/var forms training code writes (issue 37: "check the sum, mean, max forms")."""
    torch = pytest.importorskip("torch")
    a = np.random.default_rng(0).random((3, 4))
    forms = [
        "x.sum()", "x.sum(1)", "x.sum(dim=(0, 1))", "x.sum(-1, keepdim=True)", "m.sum(x, 0)",
        "x.sum(dtype=m.float32)", "x.mean()", "x.mean(dim=-1, keepdim=True)", "m.mean(x, (0, 1))",
        "x.mean(dtype=m.float32)", "x.max()", "x.max(1).values", "x.max(dim=1, keepdim=True)[0]",
        "x.max(1).indices", "m.max(x, x * 0.5)", "m.max(x, 1)[1]", "x.min(0)[0]", "m.min(x, x * 0.5)",
        "x.amax((0, 1))", "x.argmax()", "x.argmax(1, keepdim=True)", "x.std()", "x.std(1, keepdim=True)",
        "x.var(0, unbiased=False)", "x.std(unbiased=False)", "x.var(dim=1, correction=0)", "x.prod()",
        "x.cumsum(dim=1)", "x.logsumexp(1)", "x.norm(dim=1, p=2)", "m.amax(x, 1)", "x.all()", "x.any(1)",
    ]  # fmt: skip
    for form in forms:
        theirs = eval(form, {"x": torch.tensor(a), "m": torch})
        ours = eval(form, {"x": ampcore.tensor(a), "m": ampcore})
        np.testing.assert_allclose(np.asarray(ours.tolist(), float), np.asarray(theirs.tolist(), float), err_msg=form)
