"""Capabilities match behaviour: what the backend claims to store and compute works, what it does not claim is
refused with an error that names the dtype, and storage-only dtypes still convert to and from float32."""

from __future__ import annotations

import numpy as np
import pytest

import ampcore
from ampcore import dtypes as dt

ALL = [d.name for d in dt.ALL_DTYPES]


@pytest.mark.conformance(op="unclaimed dtype refused")
@pytest.mark.parametrize("dtype", ALL)
def test_unclaimed_dtype_is_refused_naming_it(backend, dtype):
    """Creating, converting to, or loading a dtype the backend does not claim raises TypeError naming it."""
    d = dt.as_dtype(dtype)
    if backend.stores(d):
        x = ampcore.zeros(3, dtype=d, device=backend.device)
        assert x.dtype is d and x.device.type == backend.name
        return
    with pytest.raises(TypeError, match=d.name):
        ampcore.zeros(3, dtype=d, device=backend.device)
    with pytest.raises(TypeError, match=d.name):
        ampcore.tensor(np.zeros(3), dtype=d, device=backend.device)
    with pytest.raises(TypeError, match=d.name):
        ampcore.ones(3, device=backend.device).to(d)


@pytest.mark.conformance(op="claimed dtype computes")
@pytest.mark.parametrize("dtype", [d.name for d in dt.FLOAT_DTYPES])
def test_claimed_compute_dtype_computes(backend, dtype):
    """A dtype claimed native or emulated runs arithmetic and keeps its dtype."""
    backend.require_compute(dtype)
    d = dt.as_dtype(dtype)
    x = backend.tensor([1.0, 2.0, 3.0], d)
    y = (x * 2 + 1).sum()
    assert y.dtype is d and float(y.item()) == 15.0


@pytest.mark.conformance(op="storage-only converts")
@pytest.mark.parametrize("dtype", [d.name for d in dt.FLOAT_DTYPES])
def test_storage_only_dtype_converts_to_and_from_float32(backend, dtype):
    """A dtype stored but not computed (say bfloat16 storage on a device without bfloat16 math) still casts:
    autocast and checkpoints rely on the conversion."""
    d = dt.as_dtype(dtype)
    backend.require_storage(d, dt.float32)
    values = np.array([0.5, -2.0, 1024.0, 0.0], np.float32)
    x = backend.tensor(values, dt.float32).to(d)
    assert x.dtype is d
    back = x.to(dt.float32)
    assert np.array_equal(back.numpy(), values), f"{values} -> {d.name} -> float32 gave {back.numpy()}"


@pytest.mark.conformance(op="autocast available")
def test_autocast_is_available_exactly_for_computed_low_precision(backend):
    """``is_autocast_available`` follows the claims: the device type supports autocast in its autocast dtype."""
    caps = backend.capabilities
    if caps.autocast_dtype is None:
        pytest.skip("not supported: the backend names no autocast dtype")
    assert ampcore.is_autocast_available(backend.backend.device_type)
    with ampcore.autocast(backend.backend.device_type):
        assert ampcore.get_autocast_dtype(backend.backend.device_type) is caps.autocast_dtype
