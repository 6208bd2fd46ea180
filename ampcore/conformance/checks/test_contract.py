"""The backend registers cleanly: every primitive present, only known kernel names, sane metadata."""

from __future__ import annotations

import pytest

from ampcore import dtypes as dt
from ampcore.kernels import FLOAT8_KERNELS, FUSED, PRIMITIVES


@pytest.mark.conformance(op="primitives present")
def test_every_primitive_kernel_is_implemented(backend):
    """Every primitive, ``elementwise`` included (or, for a backend written before it, every one of the
    elementwise kernels it replaces: ampcore.kernels.ELEMENTWISE_KERNELS)."""
    missing = sorted(backend.kernels.missing_primitives())
    assert not missing, f"{backend.name!r} lacks primitive kernels {missing}; every backend implements all of them"
    assert PRIMITIVES - {"elementwise"} <= set(backend.kernels.names())


@pytest.mark.conformance(op="fused pairs")
def test_fused_kernels_come_in_forward_backward_pairs(backend):
    present = {n for n in FUSED if backend.kernels.has(n)}
    unpaired = sorted(
        n
        for n in present
        if n not in ("adamw_step", "adamw_step_amp")
        and n not in FLOAT8_KERNELS
        and (n.removesuffix("_backward") if n.endswith("_backward") else f"{n}_backward") not in present
    )
    assert not unpaired, f"fused kernels {unpaired} lack their forward/backward partner: the core cannot mix them"


@pytest.mark.conformance(op="capabilities consistent")
def test_capabilities_are_consistent(backend):
    caps = backend.capabilities
    assert caps.device_name, "capabilities().device_name is empty"
    assert dt.float32 in caps.storable and dt.float32 in caps.native, (
        "every backend must store and compute float32 natively (the master-weight dtype)"
    )
    assert caps.native <= caps.storable and caps.emulated <= caps.storable, (
        "native and emulated dtypes must be storable"
    )
    both = sorted(d.name for d in caps.native & caps.emulated)
    assert not both, f"{both} are claimed both native and emulated"
    if caps.autocast_dtype is not None:
        assert caps.autocast_dtype in dt.LOW_PRECISION_DTYPES and backend.computes(caps.autocast_dtype), (
            f"autocast dtype {caps.autocast_dtype.name} must be a low-precision dtype the backend computes"
        )
    assert caps.policy in ("cpu", "cuda"), f"policy {caps.policy!r} names no built-in cast-policy table"
    for d, ops in caps.fallback_ops.items():
        assert d in dt.LOW_PRECISION_DTYPES and isinstance(ops, frozenset), (
            f"fallback_ops maps {d!r} to {ops!r}; expected a low-precision dtype -> frozenset of op names"
        )


@pytest.mark.conformance(op="introspection")
@pytest.mark.parametrize("dtype", [d.name for d in dt.ALL_DTYPES])
def test_device_count_and_dtype_introspection(backend, dtype):
    backend.require_storage(dtype)
    assert backend.backend.device_count() > backend.index
    x = backend.put([[1, 0, 1]], dtype)
    assert backend.backend.dtype_of(x) is dt.as_dtype(dtype)
    assert backend.backend.shape_of(x) == (1, 3)
