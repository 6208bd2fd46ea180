"""issue 27's torch functions on the opencl and cuda backends (cuda on its simulator where there is no GPU): they are
compositions of primitive kernels, so every backend runs them; this checks the two that compile their own kernels."""

from __future__ import annotations

import importlib.util
import shutil

import pytest

SCRIPT = r"""
import numpy as np
import ampcore

ampcore.manual_seed(0)
a = np.random.default_rng(0).standard_normal((4, 6)).astype(np.float32)
x = getattr(ampcore.tensor(a), DEV)()
assert x.device.type == DEV
w = ampcore.tensor(a, device=DEV, requires_grad=True)
y = w * 2.0
y[y < 0] = -float("inf")
np.testing.assert_array_equal(y.detach().cpu().numpy(), np.where(2 * a < 0, -np.inf, 2 * a))
picked = x[x > 0]
np.testing.assert_array_equal(picked.cpu().numpy(), a[a > 0])
values, indices = w.topk(3, dim=1)
order = np.argsort(-a, axis=1, kind="stable")[:, :3]
np.testing.assert_array_equal(indices.cpu().numpy(), order)
(values.sum() + w[w > 0].sum()).backward()
expect = (a > 0).astype(np.float32)
np.put_along_axis(expect, order, np.take_along_axis(expect, order, 1) + 1, 1)
np.testing.assert_array_equal(w.grad.cpu().numpy(), expect)
np.testing.assert_array_equal(ampcore.tril(x, -1).cpu().numpy(), np.tril(a, -1))
assert [p.shape for p in x.split(4, 1)] == [(4, 4), (4, 2)]
np.testing.assert_array_equal(x.sort(0, descending=True).values.cpu().numpy(), -np.sort(-a, 0))
draws = ampcore.multinomial(ampcore.tensor([0.0, 1.0, 3.0], device=DEV), 4000, replacement=True).cpu().numpy()
assert draws.min() >= 1 and abs((draws == 2).mean() - 0.75) < 0.05
assert sorted(ampcore.randperm(7, device=DEV).cpu().tolist()) == list(range(7))
h = ampcore.tensor(a, dtype="float16", device=DEV)
a16 = a.astype(np.float16)
h[h < 0] = 0.5
np.testing.assert_array_equal(h.cpu().numpy(), np.where(a16 < 0, np.float16(0.5), a16))
np.testing.assert_array_equal(h.sort(1).values.cpu().numpy(), np.sort(np.where(a16 < 0, np.float16(0.5), a16), 1))
assert f"{h[0, 0]:.3f}" == f"{float(h.cpu().numpy()[0, 0]):.3f}"
print("ok")
"""


def _skip_reason(device: str) -> str | None:
    if importlib.util.find_spec(f"ampcore_{device}") is None:
        return f"ampcore-{device} is not installed"
    if device == "cuda" and shutil.which("g++") is None:
        return "the CUDA simulator needs g++ on PATH"
    return None


@pytest.mark.parametrize("device", ["opencl", "cuda"])
def test_mask_sort_tril_split_and_sampling_run_on_the_device_backends(run_python, device):
    if _skip_reason(device):
        pytest.skip(_skip_reason(device))
    result = run_python(f"DEV = {device!r}\n" + SCRIPT, env={"AMPCORE_CUDA_SIMULATOR": "h100"})
    if device == "opencl" and "unavailable" in result.stderr and result.returncode:
        pytest.skip(f"no usable OpenCL device here: {result.stderr.strip().splitlines()[-1]}")
    assert result.returncode == 0 and result.stdout.strip() == "ok", result.stderr[-3000:]
