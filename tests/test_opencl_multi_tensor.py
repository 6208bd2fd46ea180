"""The multi-tensor launch shape of the opencl AMP family (ampcore_opencl.amp.tile_shape): one work-item looping
over CPU_TILE elements on a CPU device, and what that loop must get right: non-finite values on either side of
every tile boundary, buffers that end inside a tile, float16/bfloat16/float64 gradients over several tiles, and
adamw_step across tile boundaries against the CPU backend."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("pyopencl")

from opencl_devices import get, put, state

from ampcore import dtypes as dt
from ampcore_cpu import fused_optim as cpu_optim
from ampcore_opencl import amp, devices, optim

pytestmark = pytest.mark.usefixtures("opencl_device")  # every test on every OpenCL device

F32 = np.float32
INV = F32(1.0) / F32(49152.75)  # not a power of two: the products really round
ADAM = dict(lr=1e-2, beta1=0.9, beta2=0.999, eps=1e-8)


def tile() -> int:
    return amp.tile_shape(state()).tile


def unscale(host: list[np.ndarray], dtype: dt.DType = dt.float32) -> tuple[list[np.ndarray], float]:
    out, found = amp.unscale_and_check(
        [put(g, dtype) for g in host], put(np.array([INV], F32), "float32"), put(np.array([0.0], F32), "float32")
    )
    return [get(g) for g in out], float(get(found)[0])


def assert_unscaled(out: list[np.ndarray], host: list[np.ndarray]) -> None:
    """The float32 product rounded once to the gradient's dtype (float64: the float64 product), bit for bit."""
    for i, (got, g) in enumerate(zip(out, host)):
        with np.errstate(over="ignore", invalid="ignore"):
            want = g * np.float64(INV) if g.dtype == np.float64 else (g.astype(F32) * INV).astype(g.dtype)
        nan = np.isnan(got.astype(np.float64)) & np.isnan(want.astype(np.float64))
        same = (got.view(f"u{g.itemsize}") == want.view(f"u{g.itemsize}")) | nan
        assert same.all(), f"gradient {i}: {int((~same).sum())} of {g.size} elements are not g * inv_scale"


def test_cpu_devices_loop_over_a_tile_and_others_take_one_element_per_work_item():
    shape = amp.tile_shape(state())
    if devices.is_cpu(state().device):
        assert shape == amp.TileShape(1, amp.CPU_TILE)
    else:
        assert shape.per_item == 1 and shape.local == amp.local_size(state())


@pytest.mark.parametrize("offset", [0, 1, -1], ids=["at", "after", "before"])
@pytest.mark.parametrize("boundary", [1, 2])
def test_nan_beside_each_tile_boundary_is_found(boundary, offset):
    t = tile()
    host = [np.ones(t // 2 + 3, F32), np.linspace(-4, 4, 2 * t + 5, dtype=F32), np.ones(7, F32)]
    host[1][boundary * t + offset] = np.nan
    out, flag = unscale(host)
    assert flag == 1.0, f"NaN at element {boundary * t + offset} of a {host[1].size}-element gradient missed"
    assert_unscaled(out, host)


def test_inf_in_the_last_element_of_a_partial_tile_is_found():
    t = tile()
    host = [np.ones(3 * t + 1, F32), np.ones(t - 1, F32)]
    host[1][-1] = -np.inf
    out, flag = unscale(host)
    assert flag == 1.0
    assert_unscaled(out, host)


@pytest.mark.parametrize("dtype", [dt.float16, dt.bfloat16, dt.float64, dt.float32], ids=lambda d: d.name)
def test_gradients_over_several_tiles_are_unscaled_exactly(dtype):
    if dtype == dt.float64 and not state().fp64:
        pytest.skip("the device has no cl_khr_fp64")
    t = tile()
    rng = np.random.default_rng(3)
    sizes = [1, t - 1, t, t + 1, 3 * t + 17]
    host = [(rng.standard_normal(n) * 10.0 ** rng.uniform(-3, 3, n)).astype(dtype.numpy) for n in sizes]
    out, flag = unscale(host, dtype)
    assert flag == 0.0
    assert_unscaled(out, host)


def test_adamw_step_across_tile_boundaries_matches_the_cpu_backend():
    if not state().correctly_rounded_div_sqrt:
        pytest.skip("the device's float32 division/sqrt are not correctly rounded: no bit-exact comparison")
    t = tile()
    rng = np.random.default_rng(5)
    sizes = [3, t + 1, 2 * t - 1]
    host = [[rng.standard_normal(n).astype(F32) for n in sizes] for _ in range(3)]
    host.append([np.abs(rng.standard_normal(n)).astype(F32) for n in sizes])
    p, g, m, v = ([put(a, "float32") for a in arrays] for arrays in host)
    cp, cg, cm, cv = ([a.copy() for a in arrays] for arrays in host)
    for step in (1, 2):
        optim.adamw_step(p, g, m, v, step=step, **ADAM, weight_decay=0.01, decoupled=True)
        cp, cm, cv = cpu_optim.adamw_step(cp, cg, cm, cv, step=step, **ADAM, weight_decay=0.01, decoupled=True)
    for name, got, want in (("param", p, cp), ("m", m, cm), ("v", v, cv)):
        for device_array, cpu_array in zip(got, want):
            same = get(device_array).view(np.uint32) == cpu_array.view(np.uint32)
            assert same.all(), f"{name}: {int((~same).sum())} elements differ from the CPU backend"
