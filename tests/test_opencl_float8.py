"""Float8 on every OpenCL device: bytes converted with integer arithmetic, bit-exact against ml_dtypes.

The conformance suite's float8 checks run the same on each device (``ampcore conformance --backend opencl``);
here the native ``quantize_float8`` kernel is called directly, on every float16 and bfloat16 value.
"""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("pyopencl")

from opencl_devices import get, put, state

import ampcore
from ampcore import dtypes as dt
from ampcore.conformance.float8_data import FLOAT8_TARGETS, SOURCES, expected_quantize, same_bits
from ampcore_opencl import float8 as cl_float8

pytestmark = pytest.mark.usefixtures("opencl_device")  # every test on every OpenCL device


def test_capabilities_claim_float8_emulated_and_store_it(opencl_device):
    caps = ampcore.get_backend("opencl").capabilities(opencl_device)
    assert caps.float8 == "emulated" and set(dt.FLOAT8_DTYPES) <= caps.storable
    assert not set(dt.FLOAT8_DTYPES) & (caps.native | caps.emulated)


@pytest.mark.parametrize("saturate", [True, False], ids=["saturate", "overflow"])
@pytest.mark.parametrize("dtype", FLOAT8_TARGETS, ids=lambda d: d.name)
@pytest.mark.parametrize("source", list(SOURCES))
def test_quantize_kernel_is_bit_exact_against_ml_dtypes(source, dtype, saturate):
    values = SOURCES[source]()
    x = put(values, dt.as_dtype(values.dtype))
    scale = put(np.float32(0.75), dt.float32)
    q, amax = cl_float8.quantize_float8(x, scale, dtype, saturate)
    same_bits(get(q), expected_quantize(values, np.float32(0.75), dtype, saturate), f"{source} -> {dtype.name}")
    assert np.isnan(get(amax))  # every sample holds a NaN


def test_quantize_kernel_per_row_and_per_column_scales_and_amax():
    rng = np.random.default_rng(3)
    x = rng.standard_normal((7, 130)).astype(np.float32) * 50
    for scale in (rng.uniform(0.5, 4, (7, 1)), rng.uniform(0.5, 4, (1, 130)), rng.uniform(0.5, 4, (130,))):
        scale = scale.astype(np.float32)
        q, amax = cl_float8.quantize_float8(put(x, dt.float32), put(scale, dt.float32), dt.float8_e4m3fn, True)
        same_bits(get(q), expected_quantize(x, scale, dt.float8_e4m3fn, True), f"scale of shape {scale.shape}")
        assert get(amax) == np.abs(x).max()
    zeros = cl_float8.quantize_float8(
        put(np.zeros(5, np.float32), dt.float32), put(np.float32(1), dt.float32), dt.float8_e5m2, True
    )
    assert get(zeros[1]) == 0.0 and state() is not None
