"""Shared by the tests of ampcore.nn.functional: assert_close with the suite's tolerance rule, input
makers, and float64 NumPy reference implementations written independently of
ampcore (explicit loops, einsum, log-sum-exp).
"""

from __future__ import annotations

import math

import numpy as np

import ampcore
from ampcore import dtypes as dt
from ampcore.conformance.tolerance import assert_close as conformance_assert_close
from ampcore.conformance.tolerance import tolerance  # noqa: F401 - re-exported: the tests use ref.tolerance

FLOATS = (dt.float32, dt.float16, dt.bfloat16)
LOW = (dt.float16, dt.bfloat16)


def assert_close(actual: ampcore.Tensor, expected: np.ndarray, n: int = 1) -> None:
    """``actual`` (any dtype) matches the float64 ``expected`` within tolerance(actual.dtype, n): the
    conformance suite's rule (:mod:`ampcore.conformance.tolerance`), relative to the result's magnitude and
    at least 1, the scale of the standard-normal test inputs."""
    conformance_assert_close(actual.numpy(), expected, actual.dtype, n)


def randn(
    *shape: int, seed: int = 0, dtype: dt.DType = dt.float32, requires_grad: bool = False, positive: bool = False
) -> ampcore.Tensor:
    """A seeded standard-normal tensor (|x| + 0.5 if ``positive``), rounded to ``dtype``."""
    a = np.random.default_rng(seed).standard_normal(shape)
    if positive:
        a = np.abs(a) + 0.5
    return ampcore.tensor(a.astype(dtype.numpy), dtype=dtype, requires_grad=requires_grad)


def distinct(*shape: int, seed: int = 0, dtype: dt.DType = dt.float64, requires_grad: bool = True) -> ampcore.Tensor:
    """Values with no ties (a shuffled ramp, spacing 0.1): max-pooling gradients are then well defined."""
    a = np.random.default_rng(seed).permutation(int(np.prod(shape))).reshape(shape) * 0.1 - 1.0
    return ampcore.tensor(a, dtype=dtype, requires_grad=requires_grad)


def f64(t: ampcore.Tensor) -> np.ndarray:
    """A tensor's exact values as float64."""
    return t.numpy().astype(np.float64)


# --------------------------------------------------------------------------- references
def softmax(x: np.ndarray, axis: int) -> np.ndarray:
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def log_softmax(x: np.ndarray, axis: int) -> np.ndarray:
    m = x.max(axis=axis, keepdims=True)
    return x - m - np.log(np.exp(x - m).sum(axis=axis, keepdims=True))


def gelu(x: np.ndarray, approximate: str = "none") -> np.ndarray:
    if approximate == "tanh":
        return 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x**3)))
    erf = np.vectorize(math.erf)(x / math.sqrt(2)) if x.size else x
    return 0.5 * x * (1 + erf)


def conv2d(
    x: np.ndarray,
    w: np.ndarray,
    b: np.ndarray | None,
    stride: tuple[int, int],
    padding: tuple[int, int],
    dilation: tuple[int, int],
    groups: int,
) -> np.ndarray:
    """Direct convolution: an explicit loop over output positions, einsum over each window."""
    n, c, h, wd = x.shape
    o, cg, kh, kw = w.shape
    (sh, sw), (ph, pw), (dh, dw) = stride, padding, dilation
    xp = np.pad(x, ((0, 0), (0, 0), (ph, ph), (pw, pw)))
    ho = (h + 2 * ph - dh * (kh - 1) - 1) // sh + 1
    wo = (wd + 2 * pw - dw * (kw - 1) - 1) // sw + 1
    out = np.zeros((n, o, ho, wo))
    og = o // groups
    for r in range(ho):
        for s in range(wo):
            window = xp[:, :, r * sh : r * sh + dh * (kh - 1) + 1 : dh, s * sw : s * sw + dw * (kw - 1) + 1 : dw]
            for g in range(groups):
                patch = window[:, g * cg : (g + 1) * cg]
                out[:, g * og : (g + 1) * og, r, s] = np.einsum("nchw,ochw->no", patch, w[g * og : (g + 1) * og])
    return out if b is None else out + b.reshape(1, o, 1, 1)


def conv2d_vjp(
    x: np.ndarray, w: np.ndarray, g: np.ndarray, stride: tuple[int, int], padding: tuple[int, int]
) -> tuple[np.ndarray, np.ndarray]:
    """Input and weight gradients of an ungrouped, undilated conv2d for output gradient ``g``, by direct loops."""
    (sh, sw), (ph, pw) = stride, padding
    kh, kw = w.shape[2:]
    xp = np.pad(x, ((0, 0), (0, 0), (ph, ph), (pw, pw)))
    gxp, gw = np.zeros_like(xp), np.zeros_like(w)
    for r in range(g.shape[2]):
        for s in range(g.shape[3]):
            window = (slice(None), slice(None), slice(r * sh, r * sh + kh), slice(s * sw, s * sw + kw))
            gw += np.einsum("no,nchw->ochw", g[:, :, r, s], xp[window])
            gxp[window] += np.einsum("no,ochw->nchw", g[:, :, r, s], w)
    return gxp[:, :, ph : ph + x.shape[2], pw : pw + x.shape[3]], gw


def pool2d(
    x: np.ndarray, kernel: int, stride: int, padding: int, mode: str, count_include_pad: bool = True
) -> np.ndarray:
    """max or avg pooling by an explicit loop over output positions."""
    n, c, h, w = x.shape
    fill = -np.inf if mode == "max" else 0.0
    xp = np.pad(x, ((0, 0), (0, 0), (padding, padding), (padding, padding)), constant_values=fill)
    real = np.pad(np.ones((h, w)), padding)
    ho, wo = (h + 2 * padding - kernel) // stride + 1, (w + 2 * padding - kernel) // stride + 1
    out = np.zeros((n, c, ho, wo))
    for r in range(ho):
        for s in range(wo):
            rows, cols = slice(r * stride, r * stride + kernel), slice(s * stride, s * stride + kernel)
            window = xp[:, :, rows, cols]
            if mode == "max":
                out[:, :, r, s] = window.max(axis=(2, 3))
            else:
                count = kernel * kernel if count_include_pad else real[rows, cols].sum()
                out[:, :, r, s] = window.sum(axis=(2, 3)) / count
    return out


def cross_entropy(
    logits: np.ndarray,
    target: np.ndarray,
    weight: np.ndarray | None = None,
    ignore_index: int = -100,
    reduction: str = "mean",
    label_smoothing: float = 0.0,
) -> np.ndarray:
    """torch's cross_entropy for class-index targets, class axis 1, via an explicit log-sum-exp per row."""
    c = logits.shape[1]
    flat = np.moveaxis(logits, 1, -1).reshape(-1, c)
    t = target.reshape(-1)
    w = np.ones(c) if weight is None else weight
    losses, weights = [], []
    for row, k in zip(flat, t):
        if k == ignore_index:
            losses.append(0.0)
            weights.append(0.0)
            continue
        m = row.max()
        logp = row - m - math.log(sum(math.exp(v - m) for v in row))
        nll = -logp[k] * w[k]
        smooth = -(logp * w).sum()
        losses.append((1 - label_smoothing) * nll + label_smoothing / c * smooth)
        weights.append(w[k])
    losses_a = np.array(losses)
    if reduction == "none":
        return losses_a.reshape(target.shape)
    if reduction == "sum":
        return losses_a.sum()
    return losses_a.sum() / sum(weights)


def attention(
    q: np.ndarray, k: np.ndarray, v: np.ndarray, mask: np.ndarray | None = None, scale: float | None = None
) -> np.ndarray:
    """softmax(q k^T * scale + mask) v by einsum; a bool mask keeps True positions."""
    scale = 1 / math.sqrt(q.shape[-1]) if scale is None else scale
    s = np.einsum("...le,...se->...ls", q, k) * scale
    if mask is not None:
        s = np.where(mask, s, -np.inf) if mask.dtype == bool else s + mask
    return np.einsum("...ls,...se->...le", softmax(s, -1), v)
