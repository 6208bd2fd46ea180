"""Fused optimizer-step kernels for the CPU backend.

``adamw_step`` runs torch's Adam/AdamW rule over every tensor of a parameter
group block by block (``CHUNK`` elements), with in-place ``out=`` NumPy
passes, so each block of a parameter, its gradient and its moments is loaded
once and stays in cache for the whole update.  float16/bfloat16 parameters
and gradients are widened to float32 per block and the parameter rounded back
once (nearest-even); the moments are float32 (float64 for float64 parameters).

The arithmetic is op for op the core's reference composition
(``ampcore.optim.adam.adamw_step_reference``), so both paths give the same bits.

With numba, a tensor whose parameter, gradient and moments share one dtype
(float32 master weights under AMP, or float64) is updated by one compiled,
vectorised pass (:mod:`._optim_numba`): the same operations in the same
order and dtype, so the same bits.  mlp's 1.9M float32 parameters: 16.6 -> 2.9 ms (best of 60)
per step on one thread (2-core Xeon under load, ``benchmarks/README.md``); a small model's six tensors (the
digits MLP's) 56 -> 24 us per call, with the per-tensor checks made once per group (2-core AMD EPYC Zen 5).
Other tensors, and every tensor without numba, take the blockwise NumPy passes.
"""

from __future__ import annotations

import functools
import math
import threading
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ampcore import dtypes as dt
from ampcore.kernels import check_adamw_step

from . import compiled
from .kernels import CHUNK


def _writable(a: np.ndarray) -> np.ndarray:
    """``a`` if it can be updated in place, else a private contiguous copy."""
    return a if a.flags.writeable and a.flags.c_contiguous else np.array(a, order="C", copy=True)


def _validate(
    params: Sequence[Any],
    grads: Sequence[Any],
    exp_avgs: Sequence[Any],
    exp_avg_sqs: Sequence[Any],
    step: int,
    hyper: dict[str, float],
) -> None:
    """Every check, before anything is written: NumPy arrays here, then the checks all backends share.

    A group whose tensors' shapes and dtypes passed once (:data:`_VALID`) has only its step and hyper-parameters
    checked again: the per-tensor checks were 12 us of a 70 us step of six small tensors, every step the same.
    """
    signature = _signature(params, grads, exp_avgs, exp_avg_sqs)
    if signature is not None and signature in _VALID:
        check_adamw_step((), (), (), (), step, hyper, shape_of=_shape, dtype_of=_dtype)
        return
    for i, arrays in enumerate(zip(params, grads, exp_avgs, exp_avg_sqs)):
        if not all(isinstance(a, np.ndarray) for a in arrays):
            raise TypeError(f"adamw_step tensor {i}: expected NumPy arrays")
    check_adamw_step(params, grads, exp_avgs, exp_avg_sqs, step, hyper, shape_of=_shape, dtype_of=_dtype)
    if signature is not None:
        if len(_VALID) >= _VALID_MAX:
            _VALID.clear()
        _VALID.add(signature)


# The signatures of groups that passed the per-tensor checks (a few per model: one per parameter group).
_VALID: set[tuple[Any, ...]] = set()
_VALID_MAX = 256


def _signature(*lists: Sequence[Any]) -> tuple[Any, ...] | None:
    """Each tensor's arrays' types, shapes and dtypes, for :data:`_VALID`; None for lists of different lengths."""
    if len({len(arrays) for arrays in lists}) != 1:
        return None
    return tuple(
        (type(a), a.shape, a.dtype) if type(a) is np.ndarray else (type(a),) for group in zip(*lists) for a in group
    )


def _shape(a: np.ndarray) -> tuple[int, ...]:
    return a.shape


def _dtype(a: np.ndarray) -> Any:
    return dt.as_dtype(a.dtype)


class _Buffers(threading.local):
    """Per-thread, per-dtype scratch blocks, reused across tensors, chunks and calls (no allocation per step)."""

    def __init__(self) -> None:
        self._by_dtype: dict[np.dtype, tuple[np.ndarray, np.ndarray, np.ndarray]] = {}

    def get(self, dtype: np.dtype, length: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        bufs = self._by_dtype.get(dtype)
        if bufs is None:
            bufs = self._by_dtype[dtype] = tuple(np.empty(CHUNK, dtype) for _ in range(3))  # type: ignore[assignment]
        return bufs[0][:length], bufs[1][:length], bufs[2][:length]


_BUFFERS = _Buffers()


@functools.cache
def _compiled() -> Any:
    """:mod:`._optim_numba` on the compiled path, else None."""
    return compiled.load("_optim_numba")


def _compiled_update(
    p: np.ndarray, g: np.ndarray, m: np.ndarray, v: np.ndarray, consts: dict[str, Any], packed: dict[np.dtype, Any]
) -> bool:
    """Update one tensor through the compiled loop; False (nothing written) where it does not apply.

    Every size takes it: one call costs about 1.5 us, the NumPy passes 14 ufunc calls (a 128-element bias took 10
    us that way).  ``packed`` holds the constants as an array of each dtype, made once per call."""
    loops = _compiled()
    dtype = m.dtype
    if loops is None or p.size == 0 or p.dtype != dtype or g.dtype != dtype or dtype.kind != "f":
        return False
    c = packed.get(dtype)
    if c is None:
        c = packed[dtype] = np.array([consts[name] for name in _CONSTS], dtype)
    flat_g = g.reshape(-1) if g.flags.c_contiguous else np.ascontiguousarray(g).reshape(-1)
    loops.adamw(
        p.reshape(-1), flat_g, m.reshape(-1), v.reshape(-1), c, consts["weight_decay"] != 0.0, consts["decoupled"]
    )
    return True


_CONSTS = ("decay", "weight_decay", "one_minus_beta1", "beta2", "one_minus_beta2", "bc2_sqrt", "eps", "step_size")


def _update_block(
    pc: np.ndarray, gc: np.ndarray, m: np.ndarray, v: np.ndarray, t: np.ndarray, gb: np.ndarray, c: dict[str, Any]
) -> None:
    """One block of torch's Adam(W) rule, in place on ``pc`` (the parameter in compute precision), ``m``, ``v``."""
    if c["weight_decay"]:
        if c["decoupled"]:
            np.multiply(pc, c["decay"], out=pc)
        else:
            np.multiply(pc, c["weight_decay"], out=t)
            np.add(gc, t, out=gb)
            gc = gb
    np.subtract(gc, m, out=t)  # m.lerp_(g, 1 - beta1)
    np.multiply(t, c["one_minus_beta1"], out=t)
    np.add(m, t, out=m)
    np.multiply(v, c["beta2"], out=v)  # v = beta2 * v + (1 - beta2) * g * g
    np.multiply(gc, gc, out=t)
    np.multiply(t, c["one_minus_beta2"], out=t)
    np.add(v, t, out=v)
    np.sqrt(v, out=t)  # denom = sqrt(v) / sqrt(1 - beta2**t) + eps
    np.divide(t, c["bc2_sqrt"], out=t)
    np.add(t, c["eps"], out=t)
    np.divide(m, t, out=t)  # p -= step_size * m / denom
    np.multiply(t, c["step_size"], out=t)
    np.subtract(pc, t, out=pc)


def adamw_step(
    params: Sequence[np.ndarray],
    grads: Sequence[np.ndarray],
    exp_avgs: Sequence[np.ndarray],
    exp_avg_sqs: Sequence[np.ndarray],
    *,
    step: int,
    lr: float,
    beta1: float,
    beta2: float,
    eps: float,
    weight_decay: float,
    decoupled: bool,
) -> tuple[list[np.ndarray], list[np.ndarray], list[np.ndarray]]:
    """Adam (``decoupled=False``: L2 term added to the gradient) or AdamW (``decoupled=True``:
    ``p *= 1 - lr * weight_decay``) over one parameter group, in place where the arrays allow.

    All inputs are validated before any array is written (ValueError/TypeError).
    """
    hyper = dict(lr=float(lr), beta1=float(beta1), beta2=float(beta2), eps=float(eps), weight_decay=float(weight_decay))
    _validate(params, grads, exp_avgs, exp_avg_sqs, step, hyper)
    bias_correction1 = 1.0 - hyper["beta1"] ** step
    consts = dict(
        weight_decay=hyper["weight_decay"],
        decoupled=bool(decoupled),
        decay=1.0 - hyper["lr"] * hyper["weight_decay"],
        one_minus_beta1=1.0 - hyper["beta1"],
        beta2=hyper["beta2"],
        one_minus_beta2=1.0 - hyper["beta2"],
        bc2_sqrt=math.sqrt(1.0 - hyper["beta2"] ** step),
        eps=hyper["eps"],
        step_size=hyper["lr"] / bias_correction1,
    )
    out_p, out_m, out_v = (
        [_writable(p) for p in params],
        [_writable(m) for m in exp_avgs],
        [_writable(v) for v in exp_avg_sqs],
    )
    bufs, packed = _BUFFERS, {}
    with np.errstate(all="ignore"):  # inf/NaN propagate as IEEE values, as on a device
        for p, g, m, v in zip(out_p, grads, out_m, out_v):
            if not _compiled_update(p, g, m, v, consts, packed):
                _update_tensor(p, g, m, v, consts, bufs)
    return out_p, out_m, out_v


def _update_tensor(
    p: np.ndarray, g: np.ndarray, m: np.ndarray, v: np.ndarray, consts: dict[str, Any], bufs: _Buffers
) -> None:
    cdt = m.dtype
    pf, mf, vf = p.reshape(-1), m.reshape(-1), v.reshape(-1)
    gf = g.reshape(-1)  # a copy if g is not contiguous; only read
    widen_p = p.dtype != cdt
    for start in range(0, pf.size, CHUNK):
        stop = min(start + CHUNK, pf.size)
        t, gb, pb = bufs.get(cdt, stop - start)
        if widen_p:
            np.copyto(pb, pf[start:stop])
            pc = pb
        else:
            pc = pf[start:stop]
        gc = gf[start:stop]
        if gc.dtype != cdt:
            np.copyto(gb, gc)
            gc = gb
        _update_block(pc, gc, mf[start:stop], vf[start:stop], t, gb, consts)
        if widen_p:
            pf[start:stop] = pc  # one round-to-nearest-even into float16/bfloat16


OPTIM_KERNELS: dict[str, Callable[..., Any]] = {"adamw_step": adamw_step}


def adamw_step_amp(
    params: Sequence[np.ndarray],
    grads: Sequence[np.ndarray],
    exp_avgs: Sequence[np.ndarray],
    exp_avg_sqs: Sequence[np.ndarray],
    steps: np.ndarray,
    skip: np.ndarray,
    *,
    lr: float,
    beta1: float,
    beta2: float,
    eps: float,
    weight_decay: float,
    decoupled: bool,
) -> tuple[list[np.ndarray], list[np.ndarray], list[np.ndarray], np.ndarray]:
    """:func:`adamw_step` that reads the step count and the skip flag on the device (host memory here):
    nothing changes where ``skip[0] != 0``, else one step numbered ``steps[0] + 1`` and ``steps + 1`` returned."""
    if not (isinstance(steps, np.ndarray) and isinstance(skip, np.ndarray) and steps.size == 1 and skip.size == 1):
        raise TypeError("adamw_step_amp: steps and skip must be 1-element NumPy arrays")
    if skip.reshape(-1)[0] != 0:
        _validate(params, grads, exp_avgs, exp_avg_sqs, 1, {})
        return list(params), list(exp_avgs), list(exp_avg_sqs), steps
    step = int(steps.reshape(-1)[0]) + 1
    new_p, new_m, new_v = adamw_step(
        params,
        grads,
        exp_avgs,
        exp_avg_sqs,
        step=step,
        lr=lr,
        beta1=beta1,
        beta2=beta2,
        eps=eps,
        weight_decay=weight_decay,
        decoupled=decoupled,
    )
    return new_p, new_m, new_v, np.full_like(steps, step)


OPTIM_KERNELS["adamw_step_amp"] = adamw_step_amp
