"""Hypothesis fuzzing of the ops that ``test_fuzz_ops.py`` and ``test_fuzz_nn_ops.py`` leave out (CPU backend).

Covered here, each against a float64 NumPy reference evaluated on the inputs as stored, in
float64/float32/float16/bfloat16, with zero-size axes where the op allows them and inf/NaN/signed zeros/
subnormals/max-finite values where the op defines them:

* convolution and pooling: conv1d (stride, padding incl. 'same', dilation, groups), max_pool2d (dilation,
  padding, unbatched input) and avg_pool2d (count_include_pad, divisor_override);
* batch_norm in training (batch statistics, and the in-place running-stats update with the unbiased variance
  checked against the reference) and in evaluation (running statistics);
* activations: prelu (one or per-channel weight), softmin;
* losses: binary_cross_entropy (outside autocast), binary_cross_entropy_with_logits (weight, pos_weight),
  kl_div (all four reductions, log_target), huber_loss (weight), poisson_nll_loss (log_input, full),
  margin_ranking_loss, soft_margin_loss, hinge_embedding_loss, cosine_embedding_loss, triplet_margin_loss (p, swap);
* products: mm, bmm, dot, addmm, baddbmm (alpha/beta, beta=0 ignoring NaN input), bilinear, tensordot;
* addcmul/addcdiv (three-way broadcasting), ``ops.index_add`` (duplicate indices), ``F.mean`` and the
  nn.functional wrappers of the primitives (exp, log, sqrt, rsqrt, sigmoid, tanh, pow).

References follow each op's documented rounding: an op that computes float16/bfloat16 in float32 and rounds
once is compared with the float64 formula rounded once; an op documented to round intermediate results in the
input dtype (addmm's ``alpha * product``, addcmul in float32/float64) has those roundings in its reference.
Where a float32 accumulator overflows although the float64 formula does not, the values are restricted and
the reason is given beside the restriction.

Fuzz budget: 1,110 examples (``EXAMPLES``), plus 20 table-driven bad-input cases (``BAD_INPUTS``); the one
bug they found (conv1d's error named its internal conv2d shapes) is fixed.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from functional_reference import conv2d as conv2d_reference
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp
from test_fuzz_nn_ops import finite_max, tame
from test_fuzz_ops import DTYPES, ERR, _accumulator_max, arrays, as_tensor, assert_raises_naming, check

import ampcore
from ampcore import dtypes as dt
from ampcore import ops
from ampcore.conformance import op_reference as opref
from ampcore.conformance.references import BINARY_REFERENCE, UNARY_REFERENCE, round_to, to_f64
from ampcore.nn import functional as F

EXAMPLES = {
    "conv1d": 50,
    "batch_norm": 60,
    "max_pool": 50,
    "avg_pool": 50,
    "prelu": 40,
    "softmin": 40,
    "bce": 50,
    "bce_logits": 50,
    "kl_div": 50,
    "huber": 40,
    "poisson": 50,
    "margin_ranking": 40,
    "soft_margin": 40,
    "hinge": 40,
    "cosine_embedding": 40,
    "triplet": 50,
    "mm_bmm_dot": 60,
    "addmm": 50,
    "bilinear": 40,
    "tensordot": 40,
    "addc": 60,
    "index_add": 40,
    "mean": 40,
    "primitives": 40,
}
FUZZ = dict(deadline=None, derandomize=True)
REDUCTIONS = ["none", "sum", "mean"]
small_shapes = hnp.array_shapes(min_dims=0, max_dims=3, min_side=0, max_side=4)


def np_dtype(dtype: str) -> np.dtype:
    return dt.as_dtype(dtype).numpy


def reduce_ref(per: np.ndarray, reduction: str) -> np.ndarray:
    with ERR():
        if reduction == "none":
            return per
        if reduction == "sum":
            return np.asarray(np.sum(per))
        return np.asarray(np.mean(per) if per.size else np.nan)


def fits_accumulator(per: np.ndarray, dtype: str, reduction: str) -> bool:
    """The finite terms of a reduced loss sum within the accumulator's range (else it overflows there first)."""
    if reduction == "none":
        return True
    with ERR():
        return float(np.abs(np.where(np.isfinite(per), per, 0.0)).sum(initial=0.0)) < _accumulator_max(dtype) / 2


def compute_limit(dtype: str) -> float:
    """Largest magnitude kept where a float32 (or float64) intermediate squares or multiplies two values:
    float32/bfloat16 values up to ~3e38 overflow that intermediate although the float64 formula does not."""
    return {"float64": math.inf, "float16": math.inf, "float32": 1e18, "bfloat16": 1e18}[dtype]


def rounded(x: np.ndarray, dtype: str) -> np.ndarray:
    with ERR():
        return to_f64(round_to(np.asarray(x, np.float64), dtype))


# =========================================================================== conv1d
@settings(max_examples=EXAMPLES["conv1d"], **FUZZ)
@given(
    st.sampled_from(DTYPES),
    st.integers(0, 2),
    st.sampled_from([(1, 1), (2, 1), (2, 2), (4, 2)]),
    st.integers(1, 2),
    st.integers(1, 3),
    st.integers(1, 6),
    st.integers(1, 2),
    st.integers(1, 2),
    st.sampled_from([0, 1, 2, "same", "valid"]),
    st.booleans(),
    st.booleans(),
    st.booleans(),
    st.data(),
)
def test_conv1d_matches_float64_reference(
    dtype, n, cg, o_per_group, k, length, stride, dilation, padding, with_bias, unbatched, specials, data
):
    c, groups = cg
    o = o_per_group * groups
    if padding == "same":
        stride = 1
    p_total = dilation * (k - 1) if padding == "same" else 2 * (0 if padding == "valid" else padding)
    assume(length + p_total >= dilation * (k - 1) + 1)
    unbatched = unbatched and n == 1
    x = data.draw(arrays(dtype, (n, c, length), specials))
    w = data.draw(arrays(dtype, (o, c // groups, k), specials))
    b = data.draw(arrays(dtype, (o,), specials)) if with_bias else None
    terms = (c // groups) * k
    lx, lw, lb = finite_max(x), finite_max(w), finite_max(b) if with_bias else 0.0
    with ERR():  # as for conv2d: a product or partial sum past the accumulator's range overflows there first
        assume(lx * lw * terms + lb < _accumulator_max(dtype) / 2)
    out = F.conv1d(
        as_tensor(x[0] if unbatched else x),
        as_tensor(w),
        as_tensor(b) if with_bias else None,
        stride=stride,
        padding=padding,
        dilation=dilation,
        groups=groups,
    )
    lo = dilation * (k - 1) // 2 if padding == "same" else p_total // 2
    hi = p_total - lo
    x64 = np.pad(to_f64(x), ((0, 0), (0, 0), (lo, hi)))  # 'same' puts the odd extra element at the end
    with ERR():
        ref = conv2d_reference(
            x64[:, :, None, :],
            to_f64(w)[:, :, None, :],
            None if b is None else to_f64(b),
            (1, stride),
            (0, 0),
            (1, dilation),
            groups,
        )[:, :, 0, :]
    check(
        out,
        ref[0] if unbatched else ref,
        dtype,
        terms + 1,
        scale=max(lx, 1.0) * max(lw, 1.0) + lb,
        what=f"conv1d x{x.shape} w{w.shape} stride {stride} pad {padding} dil {dilation} groups {groups}",
    )


# =========================================================================== batch_norm
@settings(max_examples=EXAMPLES["batch_norm"], **FUZZ)
@given(
    st.sampled_from(DTYPES),
    st.integers(0, 4),
    st.integers(1, 3),
    hnp.array_shapes(min_dims=0, max_dims=2, min_side=0, max_side=3),
    st.booleans(),
    st.booleans(),
    st.sampled_from([0.1, 0.5, 1.0]),
    st.data(),
)
def test_batch_norm_matches_float64_reference_and_updates_running_stats(
    dtype, n, c, spatial, training, affine, momentum, data
):
    # Restricted finite magnitudes (1e4, as layer_norm in test_fuzz_nn_ops): the centred squares are taken in
    # the float32 (float64) accumulator.  Running statistics are float32 for float16/bfloat16 input (a low-
    # precision model's buffers; the variance of such values does not fit float16).  inf/NaN stay in.
    shape = (n, c) + spatial
    count = n * int(np.prod(spatial))
    x = tame(data.draw(arrays(dtype, shape)), 1e4)
    stats_dtype = "float32" if dtype in ("float16", "bfloat16") else dtype
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1)))
    rm0 = round_to(rng.standard_normal(c), stats_dtype)
    rv0 = round_to(rng.uniform(0.1, 3.0, c), stats_dtype)
    w = tame(data.draw(arrays(dtype, (c,), specials=False)), 1e3) if affine else None
    b = tame(data.draw(arrays(dtype, (c,), specials=False)), 1e3) if affine else None
    rm, rv = as_tensor(rm0.copy()), as_tensor(rv0.copy())

    def call():
        return F.batch_norm(
            as_tensor(x),
            rm,
            rv,
            None if w is None else as_tensor(w),
            None if b is None else as_tensor(b),
            training=training,
            momentum=momentum,
        )

    if training and count == 1:
        with pytest.raises(ValueError, match="more than 1 value per channel"):
            call()
        return
    out = call()
    x64 = to_f64(x)
    axes = tuple(i for i in range(x.ndim) if i != 1)
    stat = (1, c) + (1,) * len(spatial)
    with ERR():
        if training:
            mean = np.mean(x64, axes, keepdims=True) if count else np.zeros(stat)
            var = np.mean((x64 - mean) ** 2, axes, keepdims=True) if count else np.zeros(stat)
        else:
            mean, var = to_f64(rm0).reshape(stat), to_f64(rv0).reshape(stat)
        ref = (x64 - mean) / np.sqrt(var + 1e-5)
        if affine:
            ref = ref * to_f64(w).reshape(stat) + to_f64(b).reshape(stat)
    m = count if training else 1
    scale = (max(finite_max(w), 1.0) if affine else 1.0) * math.sqrt(max(m, 1)) + (finite_max(b) if affine else 0.0)
    check(out, ref, dtype, m + 2, scale=scale, what=f"batch_norm {shape} training={training}")
    if not training or count == 0:  # evaluation and an empty batch leave the running statistics alone
        np.testing.assert_array_equal(rm.numpy(), rm0)
        np.testing.assert_array_equal(rv.numpy(), rv0)
        return
    with ERR():
        batch_mean = mean.reshape(c)
        unbiased = var.reshape(c) * count / (count - 1)
        ref_rm = (1 - momentum) * to_f64(rm0) + momentum * batch_mean
        ref_rv = (1 - momentum) * to_f64(rv0) + momentum * unbiased
    mag = finite_max(x64) + 3.0
    check(rm, ref_rm, stats_dtype, count + 4, scale=mag, what=f"running_mean after {shape}")
    check(rv, ref_rv, stats_dtype, count + 4, scale=mag * mag, what=f"running_var after {shape}")


# =========================================================================== pooling
def pool_reference(
    x: np.ndarray,
    kernel: tuple[int, int],
    stride: tuple[int, int],
    padding: tuple[int, int],
    dilation: tuple[int, int],
    mode: str,
    count_include_pad: bool = True,
    divisor: int | None = None,
) -> np.ndarray:
    """max/avg pooling of (..., H, W) by an explicit loop over output positions (padding: -inf / 0)."""
    h, w = x.shape[-2:]
    (kh, kw), (sh, sw), (ph, pw), (dh, dw) = kernel, stride, padding, dilation
    lead = ((0, 0),) * (x.ndim - 2)
    xp = np.pad(x, lead + ((ph, ph), (pw, pw)), constant_values=-np.inf if mode == "max" else 0.0)
    real = np.pad(np.ones((h, w)), ((ph, ph), (pw, pw)))
    ho, wo = (h + 2 * ph - dh * (kh - 1) - 1) // sh + 1, (w + 2 * pw - dw * (kw - 1) - 1) // sw + 1
    out = np.zeros(x.shape[:-2] + (ho, wo))
    for r in range(ho):
        for s in range(wo):
            rows = slice(r * sh, r * sh + dh * (kh - 1) + 1, dh)
            cols = slice(s * sw, s * sw + dw * (kw - 1) + 1, dw)
            window = xp[..., rows, cols]
            if mode == "max":
                out[..., r, s] = window.max(axis=(-2, -1)) if window.size else -np.inf
            else:
                count = divisor or (kh * kw if count_include_pad else real[rows, cols].sum())
                out[..., r, s] = window.sum(axis=(-2, -1)) / count
    return out


@st.composite
def pool_problems(draw, dilate: bool):
    """(input shape, kernel, stride, padding, dilation) with at least one output position."""
    kernel = (draw(st.integers(1, 3)), draw(st.integers(1, 3)))
    dilation = (draw(st.integers(1, 2)), draw(st.integers(1, 2))) if dilate else (1, 1)
    padding = tuple(draw(st.integers(0, (d * (k - 1) + 1) // 2)) for k, d in zip(kernel, dilation))
    stride = (draw(st.integers(1, 3)), draw(st.integers(1, 3)))
    hw = tuple(draw(st.integers(max(1, d * (k - 1) + 1 - 2 * p), 6)) for k, d, p in zip(kernel, dilation, padding))
    lead = draw(st.sampled_from([(), (0,), (1,), (2,)])) + (draw(st.integers(0, 2)),)  # (C,) or (N, C)
    return lead + hw, kernel, stride, padding, dilation


@settings(max_examples=EXAMPLES["max_pool"], **FUZZ)
@given(st.sampled_from(DTYPES), pool_problems(dilate=True), st.data())
def test_max_pool2d_selects_exactly_the_float64_maximum(dtype, problem, data):
    shape, kernel, stride, padding, dilation = problem
    x = data.draw(arrays(dtype, shape))
    out = F.max_pool2d(as_tensor(x), kernel, stride, padding, dilation)
    with ERR():
        ref = pool_reference(to_f64(x), kernel, stride, padding, dilation, "max")  # NaN propagates, as torch
    check(out, ref, dtype, what=f"max_pool2d {shape} k{kernel} s{stride} p{padding} d{dilation}")


@settings(max_examples=EXAMPLES["avg_pool"], **FUZZ)
@given(st.sampled_from(DTYPES), pool_problems(dilate=False), st.booleans(), st.sampled_from([None, 1, 5]), st.data())
def test_avg_pool2d_matches_float64_reference(dtype, problem, count_include_pad, divisor, data):
    shape, kernel, stride, padding, _ = problem
    x = data.draw(arrays(dtype, shape))
    # the window sum runs in float32 (float64): a sum past its range overflows there first (bfloat16, float32)
    with ERR():
        assume(finite_max(x) * kernel[0] * kernel[1] < _accumulator_max(dtype) / 2)
    out = F.avg_pool2d(
        as_tensor(x), kernel, stride, padding, count_include_pad=count_include_pad, divisor_override=divisor
    )
    with ERR():
        ref = pool_reference(to_f64(x), kernel, stride, padding, (1, 1), "avg", count_include_pad, divisor)
    n = kernel[0] * kernel[1]
    check(
        out,
        ref,
        dtype,
        n + 1,
        scale=finite_max(x) * n / (divisor or 1),
        what=f"avg_pool2d {shape} k{kernel} s{stride} p{padding} cip={count_include_pad} div={divisor}",
    )


# =========================================================================== activations
@settings(max_examples=EXAMPLES["prelu"], **FUZZ)
@given(
    st.sampled_from(DTYPES), hnp.array_shapes(min_dims=0, max_dims=4, min_side=0, max_side=3), st.booleans(), st.data()
)
def test_prelu_matches_float64_reference_on_any_values(dtype, shape, per_channel, data):
    channels = shape[1] if len(shape) > 1 else 1
    per_channel = per_channel and len(shape) >= 1
    x = data.draw(arrays(dtype, shape))
    w = data.draw(arrays(dtype, (channels,) if per_channel else (1,)))
    out = F.prelu(as_tensor(x), as_tensor(w))
    x64, w64 = to_f64(x), to_f64(w)
    wb = (
        w64.reshape((1, channels) + (1,) * (len(shape) - 2))
        if per_channel and len(shape) > 1
        else w64.reshape(w64.shape if per_channel else ())
    )
    with ERR():
        ref = np.where(x64 > 0, x64, wb * x64)  # NaN is not > 0: w * NaN = NaN
    check(out, ref, dtype, what=f"prelu {shape} weight {w.shape}")


@settings(max_examples=EXAMPLES["softmin"], **FUZZ)
@given(st.sampled_from(DTYPES), hnp.array_shapes(min_dims=1, max_dims=3, min_side=1, max_side=5), st.data())
def test_softmin_is_softmax_of_the_negation_with_its_non_finite_rule(dtype, shape, data):
    x = data.draw(arrays(dtype, shape))
    axis = data.draw(st.integers(-len(shape), len(shape) - 1))
    out = F.softmin(as_tensor(x), dim=axis)
    neg = -to_f64(x)
    with ERR():
        ref = opref.softmax(neg, axis % len(shape))
    # as softmax (test_fuzz_ops): a row holding NaN or +inf of -x, or only -inf, is NaN throughout
    nan_row = (np.isnan(neg) | np.isposinf(neg)).any(axis, keepdims=True) | np.isneginf(neg).all(axis, keepdims=True)
    check(out, np.where(nan_row, np.nan, ref), dtype, shape[axis], what=f"softmin({dtype}{shape}, dim={axis})")


def test_softmin_over_an_empty_dim_is_empty():
    assert F.softmin(ampcore.zeros(2, 0), dim=1).shape == (2, 0)


# =========================================================================== binary cross-entropy
def probabilities(rng: np.random.Generator, shape: tuple[int, ...], dtype: str) -> np.ndarray:
    """Values in [0, 1] including exactly 0, 1 and the smallest subnormal."""
    p = rng.random(shape)
    p = np.where(rng.random(shape) < 0.2, rng.choice([0.0, 1.0, float(dt.finfo(dtype).tiny) / 4, 0.5], shape), p)
    return round_to(p, dtype)


@settings(max_examples=EXAMPLES["bce"], **FUZZ)
@given(st.sampled_from(DTYPES), small_shapes, st.sampled_from(REDUCTIONS), st.booleans(), st.booleans(), st.data())
def test_binary_cross_entropy_matches_float64_reference_with_torch_log_clamp(
    dtype, shape, reduction, with_weight, nan_input, data
):
    # Inputs are probabilities (torch raises on values outside [0, 1]); a NaN input propagates.
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1)))
    p = probabilities(rng, shape, dtype)
    if nan_input and p.size:
        p.flat[0] = np.nan
    y = probabilities(rng, shape, dtype)
    w = round_to(rng.uniform(0, 2, shape), dtype) if with_weight else None
    out = F.binary_cross_entropy(as_tensor(p), as_tensor(y), None if w is None else as_tensor(w), reduction=reduction)
    p64, y64 = to_f64(p), to_f64(y)
    with ERR():
        log_p = np.where(np.isnan(p64), np.nan, np.maximum(np.log(p64), -100.0))
        log_q = np.where(np.isnan(p64), np.nan, np.maximum(np.log1p(-p64), -100.0))
        per = -(y64 * log_p + (1 - y64) * log_q)
        if with_weight:
            per = per * to_f64(w)
    per = rounded(per, dtype)  # computed in float32 (or better), rounded once to the dtype, then reduced
    check(
        out,
        reduce_ref(per, reduction),
        dtype,
        max(per.size, 1) + 4,
        scale=100.0 * (2.0 if with_weight else 1.0),
        what=f"binary_cross_entropy {dtype}{shape} {reduction}",
    )


@settings(max_examples=EXAMPLES["bce_logits"], **FUZZ)
@given(st.sampled_from(DTYPES), small_shapes, st.sampled_from(REDUCTIONS), st.booleans(), st.booleans(), st.data())
def test_binary_cross_entropy_with_logits_matches_stable_float64_formula(
    dtype, shape, reduction, with_weight, with_pos_weight, data
):
    x = data.draw(arrays(dtype, shape))  # any logits: inf and NaN follow the documented stable formula
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1)))
    y = probabilities(rng, shape, dtype)
    w = round_to(rng.uniform(0, 2, shape), dtype) if with_weight else None
    pw_shape = shape[-1:] if shape else ()
    pw = round_to(rng.uniform(0.5, 3, pw_shape), dtype) if with_pos_weight else None
    x64, y64 = to_f64(x), to_f64(y)
    with ERR():
        soft = np.log1p(np.exp(-np.abs(x64)))
        if with_pos_weight:
            log_weight = (
                rounded((to_f64(pw) - 1.0) * y64 + 1.0, dtype) if dtype != "float64" else (to_f64(pw) - 1.0) * y64 + 1.0
            )  # pos_weight is combined with the target in the input dtype
            per = (1 - y64) * x64 + log_weight * (soft + np.maximum(-x64, 0.0))
        else:
            per = np.maximum(x64, 0.0) - x64 * y64 + soft
        if with_weight:
            per = per * to_f64(w)
    per = rounded(per, dtype)
    assume(fits_accumulator(per, dtype, reduction))
    out = F.binary_cross_entropy_with_logits(
        as_tensor(x),
        as_tensor(y),
        None if w is None else as_tensor(w),
        reduction=reduction,
        pos_weight=None if pw is None else as_tensor(pw),
    )
    scale = (
        (finite_max(x) + 1.0)
        * (finite_max(w) if with_weight else 1.0)
        * (finite_max(pw) + 1 if with_pos_weight else 1.0)
    )
    check(
        out,
        reduce_ref(per, reduction),
        dtype,
        max(per.size, 1) + 6,
        scale=scale,
        what=f"bce_with_logits {dtype}{shape} {reduction} w={with_weight} pw={with_pos_weight}",
    )


# =========================================================================== kl_div, huber, poisson
@settings(max_examples=EXAMPLES["kl_div"], **FUZZ)
@given(
    st.sampled_from(DTYPES),
    small_shapes,
    st.sampled_from(["none", "sum", "mean", "batchmean"]),
    st.booleans(),
    st.data(),
)
def test_kl_div_matches_float64_reference_with_zero_log_zero_as_zero(dtype, shape, reduction, log_target, data):
    lim = compute_limit(dtype)  # t * x and t log t in the float32 compute dtype
    x = tame(data.draw(arrays(dtype, shape)), lim)
    t = tame(data.draw(arrays(dtype, shape)), lim)
    if not log_target:
        t = np.abs(t)  # probabilities (0 included): log of a negative target is NaN, not a distribution
    x64, t64 = to_f64(x), to_f64(t)
    with ERR():
        if log_target:
            terms = (np.exp(t64) * t64, np.exp(t64) * x64)
        else:
            terms = (t64 * np.log(np.where(t64 == 0, 1.0, t64)), t64 * x64)
        # torch's definition, exp(t) * (t - x) for a log target: where exp(t) overflows the result is inf, which
        # the two-term difference would turn into inf - inf = NaN.
        per = np.exp(t64) * (t64 - x64) if log_target else terms[0] - terms[1]
    assume(fits_accumulator(per, dtype, "sum" if reduction != "none" else "none"))
    with ERR():
        if reduction == "batchmean":
            total = np.sum(per)
            ref = np.asarray(total if x.ndim == 0 else (total / shape[0] if shape[0] else np.nan))
        else:
            ref = reduce_ref(per, reduction)
    out = F.kl_div(as_tensor(x), as_tensor(t), reduction=reduction, log_target=log_target)
    scale = finite_max(*terms) + 1.0  # the two terms cancel: the error is relative to them
    check(
        out,
        ref,
        dtype,
        max(per.size, 1) + 3,
        scale=scale,
        what=f"kl_div {dtype}{shape} {reduction} log_target={log_target}",
    )


@settings(max_examples=EXAMPLES["huber"], **FUZZ)
@given(
    st.sampled_from(DTYPES),
    small_shapes,
    st.sampled_from(REDUCTIONS),
    st.sampled_from([0.5, 1.0, 2.0]),
    st.booleans(),
    st.data(),
)
def test_huber_loss_matches_float64_reference(dtype, shape, reduction, delta, with_weight, data):
    lim = compute_limit(dtype)  # d * d in the float32 compute dtype
    a, b = tame(data.draw(arrays(dtype, shape)), lim), tame(data.draw(arrays(dtype, shape)), lim)
    w = tame(data.draw(arrays(dtype, shape, specials=False)), 1e3) if with_weight else None
    with ERR():
        d = np.abs(to_f64(a) - to_f64(b))
        per = np.where(d < delta, 0.5 * d * d, delta * (d - 0.5 * delta))
        if with_weight:
            per = per * to_f64(w)
    assume(fits_accumulator(per, dtype, reduction))
    out = F.huber_loss(
        as_tensor(a), as_tensor(b), reduction=reduction, delta=delta, weight=None if w is None else as_tensor(w)
    )
    check(
        out,
        reduce_ref(per, reduction),
        dtype,
        max(per.size, 1) + 3,
        scale=1.0,
        what=f"huber_loss {dtype}{shape} {reduction} delta={delta}",
    )


@settings(max_examples=EXAMPLES["poisson"], **FUZZ)
@given(st.sampled_from(DTYPES), small_shapes, st.sampled_from(REDUCTIONS), st.booleans(), st.booleans(), st.data())
def test_poisson_nll_loss_matches_float64_reference(dtype, shape, reduction, log_input, full, data):
    # Restricted: log-rates to |x| <= 60 (exp(x) past float32's range would overflow the compute dtype while
    # exp(x) - t x is still finite in float64); rates >= 0.  inf/NaN stay in.
    x = tame(data.draw(arrays(dtype, shape)), 60.0 if log_input else compute_limit(dtype))
    if not log_input:
        x = np.abs(x)
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1)))
    t = round_to(np.where(rng.random(shape) < 0.5, rng.integers(0, 6, shape), rng.uniform(0, 10, shape)), dtype)
    x64, t64 = to_f64(x), to_f64(t)
    with ERR():
        terms = [np.exp(x64), t64 * x64] if log_input else [x64, t64 * np.log(x64 + 1e-8)]
        per = terms[0] - terms[1]
        if full:
            safe = np.where(t64 <= 1, 1.0, t64)
            stirling = safe * np.log(safe) - safe + 0.5 * np.log(2 * math.pi * safe)
            per = per + np.where(t64 <= 1, 0.0, stirling)
            terms.append(safe * np.log(safe))
    assume(fits_accumulator(per, dtype, reduction))
    out = F.poisson_nll_loss(as_tensor(x), as_tensor(t), log_input=log_input, full=full, reduction=reduction)
    check(
        out,
        reduce_ref(per, reduction),
        dtype,
        max(per.size, 1) + 4,
        scale=finite_max(*terms) + 1.0,
        what=f"poisson_nll_loss {dtype}{shape} {reduction} log_input={log_input} full={full}",
    )


# =========================================================================== margin / embedding losses
def signs(rng: np.random.Generator, shape: tuple[int, ...], dtype: str) -> np.ndarray:
    return np.asarray(rng.choice([-1.0, 1.0], shape), np_dtype(dtype))


def same_ndim_broadcast(num: int):
    """Shapes that broadcast and have the same number of dimensions (what the ranking losses require)."""

    def pad(bs):
        nd = len(bs.result_shape)
        return tuple((1,) * (nd - len(s)) + tuple(s) for s in bs.input_shapes), bs.result_shape

    return hnp.mutually_broadcastable_shapes(num_shapes=num, min_dims=1, max_dims=3, min_side=0, max_side=3).map(pad)


@settings(max_examples=EXAMPLES["margin_ranking"], **FUZZ)
@given(
    st.sampled_from(DTYPES),
    same_ndim_broadcast(3),
    st.sampled_from(REDUCTIONS),
    st.sampled_from([0.0, 0.5, -1.0]),
    st.data(),
)
def test_margin_ranking_loss_broadcasts_and_matches_float64_reference(dtype, shapes, reduction, margin, data):
    (s1, s2, st_), result = shapes
    a, b = data.draw(arrays(dtype, s1)), data.draw(arrays(dtype, s2))
    t = signs(np.random.default_rng(data.draw(st.integers(0, 2**32 - 1))), st_, dtype)
    with ERR():
        v = -to_f64(t) * (to_f64(a) - to_f64(b)) + margin
        per = np.broadcast_to(np.where(v < 0, 0.0, v), result)  # NaN is kept
    assume(fits_accumulator(per, dtype, reduction))
    out = F.margin_ranking_loss(as_tensor(a), as_tensor(b), as_tensor(t), margin=margin, reduction=reduction)
    check(
        out,
        reduce_ref(per, reduction),
        dtype,
        max(per.size, 1) + 3,
        scale=finite_max(a, b) + 1.0,
        what=f"margin_ranking_loss {s1} {s2} {st_} {reduction}",
    )


@settings(max_examples=EXAMPLES["soft_margin"], **FUZZ)
@given(st.sampled_from(DTYPES), small_shapes, st.sampled_from(REDUCTIONS), st.data())
def test_soft_margin_loss_is_finite_where_the_naive_formula_overflows(dtype, shape, reduction, data):
    x = data.draw(arrays(dtype, shape))
    t = signs(np.random.default_rng(data.draw(st.integers(0, 2**32 - 1))), shape, dtype)
    with ERR():
        per = np.logaddexp(0.0, -to_f64(t) * to_f64(x))  # log(1 + exp(z)) without overflow
    assume(fits_accumulator(per, dtype, reduction))
    out = F.soft_margin_loss(as_tensor(x), as_tensor(t), reduction=reduction)
    check(
        out,
        reduce_ref(per, reduction),
        dtype,
        max(per.size, 1) + 3,
        scale=1.0,
        what=f"soft_margin_loss {dtype}{shape} {reduction}",
    )


@settings(max_examples=EXAMPLES["hinge"], **FUZZ)
@given(st.sampled_from(DTYPES), small_shapes, st.sampled_from(REDUCTIONS), st.sampled_from([1.0, 0.0, 2.5]), st.data())
def test_hinge_embedding_loss_follows_torch_rule_for_every_target_value(dtype, shape, reduction, margin, data):
    x = data.draw(arrays(dtype, shape))
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1)))
    t = np.asarray(rng.choice([-1.0, 1.0, 1.0, -1.0, 0.5], shape), np_dtype(dtype))  # 0.5: both terms kept
    x64, t64 = to_f64(x), to_f64(t)
    with ERR():
        hinge = margin - x64
        per = np.where(t64 != 1, np.where(hinge < 0, 0.0, hinge), 0.0) + np.where(t64 != -1, x64, 0.0)
    assume(fits_accumulator(per, dtype, reduction))
    out = F.hinge_embedding_loss(as_tensor(x), as_tensor(t), margin=margin, reduction=reduction)
    check(
        out,
        reduce_ref(per, reduction),
        dtype,
        max(per.size, 1) + 3,
        scale=finite_max(x) + margin,
        what=f"hinge_embedding_loss {dtype}{shape} {reduction} margin={margin}",
    )


@settings(max_examples=EXAMPLES["cosine_embedding"], **FUZZ)
@given(
    st.sampled_from(DTYPES),
    st.sampled_from([None, 0, 1, 3]),
    st.integers(0, 4),
    st.sampled_from(REDUCTIONS),
    st.sampled_from([0.0, 0.3, -0.5]),
    st.data(),
)
def test_cosine_embedding_loss_matches_float64_reference(dtype, n, d, reduction, margin, data):
    # Restricted as cosine_similarity in test_fuzz_nn_ops (|x| <= 1e4): the squared norms accumulate in float32.
    shape = (d,) if n is None else (n, d)
    a, b = tame(data.draw(arrays(dtype, shape)), 1e4), tame(data.draw(arrays(dtype, shape)), 1e4)
    t = signs(np.random.default_rng(data.draw(st.integers(0, 2**32 - 1))), shape[:-1], dtype)
    a64, b64, t64 = to_f64(a), to_f64(b), to_f64(t)
    with ERR():
        cos = (a64 * b64).sum(-1) / np.sqrt(((a64 * a64).sum(-1) + 1e-12) * ((b64 * b64).sum(-1) + 1e-12))
        over = cos - margin
        per = np.where(t64 == 1, 1.0 - cos, 0.0) + np.where(t64 == -1, np.where(over < 0, 0.0, over), 0.0)
    out = F.cosine_embedding_loss(as_tensor(a), as_tensor(b), as_tensor(t), margin=margin, reduction=reduction)
    check(
        out,
        reduce_ref(per, reduction),
        dtype,
        d + max(per.size, 1) + 4,
        scale=1.0 + abs(margin),
        what=f"cosine_embedding_loss {shape} {reduction} margin={margin}",
    )


@settings(max_examples=EXAMPLES["triplet"], **FUZZ)
@given(
    st.sampled_from(DTYPES),
    same_ndim_broadcast(3),
    st.sampled_from(REDUCTIONS),
    st.sampled_from([1, 2, 3]),
    st.booleans(),
    st.sampled_from([1.0, 0.2]),
    st.data(),
)
def test_triplet_margin_loss_matches_float64_reference(dtype, shapes, reduction, p, swap, margin, data):
    # Restricted as normalize in test_fuzz_nn_ops (|x| <= 1e4): sum |d|**p runs in the float32 accumulator.
    (sa, sp, sn), result = shapes
    a, pos, neg = (tame(data.draw(arrays(dtype, s)), 1e4) for s in (sa, sp, sn))
    eps = 1e-6

    def dist(u, v):
        # torch's pairwise_distance broadcasts each pair on its own: with anchor (1,), positive (0,) and
        # negative (1,), d(anchor, negative) runs over one element, not over the triple's empty broadcast.
        return np.sum(np.abs(u - v + eps) ** p, -1) ** (1.0 / p)

    with ERR():
        a64, p64, n64 = to_f64(a), to_f64(pos), to_f64(neg)
        d_pos, d_neg = dist(a64, p64), dist(a64, n64)
        if swap:
            d_pn = dist(p64, n64)
            d_neg = np.where(np.isnan(d_neg) | np.isnan(d_pn), np.nan, np.minimum(d_neg, d_pn))
        v = margin + d_pos - d_neg
        per = np.where(v < 0, 0.0, v)
    out = F.triplet_margin_loss(
        as_tensor(a), as_tensor(pos), as_tensor(neg), margin=margin, p=p, swap=swap, reduction=reduction
    )
    check(
        out,
        reduce_ref(per, reduction),
        dtype,
        result[-1] + max(per.size, 1) + 4,
        scale=finite_max(d_pos, d_neg) + 1.0,
        what=f"triplet_margin_loss {sa} {sp} {sn} p={p} swap={swap}",
    )


# =========================================================================== products
def _products_fit(dtype: str, k: int, *operands: np.ndarray) -> tuple[bool, float]:
    """(a product of k terms of these operands stays within the accumulator, the scale of the result)."""
    big = [max(finite_max(o), 1.0) for o in operands]
    with ERR():
        ok = float(np.prod([finite_max(o) for o in operands])) * max(k, 1) < _accumulator_max(dtype) / 2
    return ok, float(np.prod(big))


@settings(max_examples=EXAMPLES["mm_bmm_dot"], **FUZZ)
@given(
    st.sampled_from(["mm", "bmm", "dot"]),
    st.sampled_from(DTYPES),
    st.integers(0, 3),
    st.integers(0, 4),
    st.integers(0, 4),
    st.integers(0, 4),
    st.booleans(),
    st.data(),
)
def test_mm_bmm_and_dot_match_float64_reference(name, dtype, batch, m, k, n, specials, data):
    shapes = {"mm": ((m, k), (k, n)), "bmm": ((batch, m, k), (batch, k, n)), "dot": ((k,), (k,))}[name]
    a, b = data.draw(arrays(dtype, shapes[0], specials)), data.draw(arrays(dtype, shapes[1], specials))
    ok, scale = _products_fit(dtype, k, a, b)
    assume(ok)
    out = getattr(F, name)(as_tensor(a), as_tensor(b))
    with ERR():
        ref = np.matmul(to_f64(a), to_f64(b))
    check(out, ref, dtype, k, scale=scale, what=f"{name} {shapes}")


@settings(max_examples=EXAMPLES["addmm"], **FUZZ)
@given(
    st.sampled_from(["addmm", "baddbmm"]),
    st.sampled_from(DTYPES),
    st.integers(0, 2),
    st.integers(0, 3),
    st.integers(0, 4),
    st.integers(0, 3),
    st.sampled_from([1.0, 0.0, 0.5, -1.0]),
    st.sampled_from([1.0, 0.5, -2.0]),
    st.integers(0, 3),
    st.booleans(),
    st.data(),
)
def test_addmm_and_baddbmm_scale_and_add_like_the_float64_reference(
    name, dtype, batch, m, k, n, beta, alpha, input_kind, specials, data
):
    lead = (batch,) if name == "baddbmm" else ()
    full = lead + (m, n)
    input_shape = [full, full[-1:], (), lead + (1, n)][input_kind]  # broadcasting input
    c = data.draw(arrays(dtype, input_shape))  # NaN/inf in input too: with beta = 0 they are ignored, as torch
    a = data.draw(arrays(dtype, lead + (m, k), specials))
    b = data.draw(arrays(dtype, lead + (k, n), specials))
    ok, scale = _products_fit(dtype, k, a, b)
    assume(ok)
    out = getattr(F, name)(as_tensor(c), as_tensor(a), as_tensor(b), beta=beta, alpha=alpha)
    # documented: the product in the dtype, then alpha * product and beta * input each rounded, then added
    with ERR():
        product = rounded(np.matmul(to_f64(a), to_f64(b)), dtype)
        if alpha != 1:
            product = rounded(product * alpha, dtype)
        ref = product if beta == 0 else product + (to_f64(c) if beta == 1 else rounded(to_f64(c) * beta, dtype))
    check(
        out,
        np.broadcast_to(ref, full),
        dtype,
        k + 3,
        scale=scale * abs(alpha) + finite_max(c),
        what=f"{name} input{input_shape} {a.shape}@{b.shape} beta={beta} alpha={alpha}",
    )


@settings(max_examples=EXAMPLES["bilinear"], **FUZZ)
@given(
    st.sampled_from(DTYPES),
    hnp.array_shapes(min_dims=0, max_dims=2, min_side=0, max_side=3),
    st.integers(0, 3),
    st.integers(0, 3),
    st.integers(0, 3),
    st.booleans(),
    st.booleans(),
    st.data(),
)
def test_bilinear_matches_float64_reference(dtype, batch, n1, n2, n_out, with_bias, specials, data):
    x1 = data.draw(arrays(dtype, batch + (n1,), specials))
    x2 = data.draw(arrays(dtype, batch + (n2,), specials))
    w = data.draw(arrays(dtype, (n_out, n1, n2), specials))
    bias = data.draw(arrays(dtype, (n_out,), specials)) if with_bias else None
    ok, scale = _products_fit(dtype, max(n1, 1) * max(n2, 1), x1, x2, w)
    assume(ok)
    out = F.bilinear(as_tensor(x1), as_tensor(x2), as_tensor(w), None if bias is None else as_tensor(bias))
    with ERR():  # the documented order: x1 A_o for every o first, then the product with x2
        partial = np.einsum("...i,oij->...oj", to_f64(x1), to_f64(w))
        ref = np.einsum("...oj,...j->...o", partial, to_f64(x2))
        if with_bias:
            ref = ref + to_f64(bias)
    check(
        out,
        ref,
        dtype,
        n1 * n2 + 2,
        scale=scale + (finite_max(bias) if with_bias else 0.0),
        what=f"bilinear {x1.shape} {x2.shape} {w.shape}",
    )


@st.composite
def tensordot_problems(draw):
    """(shape a, shape b, dims argument, NumPy axes) with matching contracted sizes."""
    a_shape = draw(hnp.array_shapes(min_dims=0, max_dims=3, min_side=0, max_side=3))
    if draw(st.booleans()):
        k = draw(st.integers(0, len(a_shape)))
        free_b = draw(hnp.array_shapes(min_dims=0, max_dims=2, min_side=0, max_side=3))
        b_shape = a_shape[len(a_shape) - k :] + free_b
        return a_shape, b_shape, k, k
    k = draw(st.integers(0, len(a_shape)))
    dims_a = draw(st.permutations(range(len(a_shape))))[:k]
    b_nd = k + draw(st.integers(0, 2))
    dims_b = draw(st.permutations(range(b_nd)))[:k]
    b_shape = [draw(st.integers(0, 3)) for _ in range(b_nd)]
    for i, j in zip(dims_a, dims_b):
        b_shape[j] = a_shape[i]
    neg = draw(st.booleans())  # negative dimensions too
    dims = ([d - len(a_shape) if neg else d for d in dims_a], [d - b_nd if neg else d for d in dims_b])
    return a_shape, tuple(b_shape), dims, (list(dims_a), list(dims_b))


@settings(max_examples=EXAMPLES["tensordot"], **FUZZ)
@given(st.sampled_from(DTYPES), tensordot_problems(), st.booleans(), st.data())
def test_tensordot_matches_numpy_tensordot_in_float64(dtype, problem, specials, data):
    a_shape, b_shape, dims, np_axes = problem
    a, b = data.draw(arrays(dtype, a_shape, specials)), data.draw(arrays(dtype, b_shape, specials))
    k = int(
        np.prod(
            [a_shape[i] for i in (range(len(a_shape) - dims, len(a_shape)) if isinstance(dims, int) else np_axes[0])]
        )
    )
    ok, scale = _products_fit(dtype, k, a, b)
    assume(ok)
    out = F.tensordot(as_tensor(a), as_tensor(b), dims=dims)
    with ERR():
        ref = np.tensordot(to_f64(a), to_f64(b), axes=np_axes)
    check(out, ref, dtype, k, scale=scale, what=f"tensordot {a_shape} {b_shape} dims={dims}")


# =========================================================================== addcmul / addcdiv, index_add, mean
@settings(max_examples=EXAMPLES["addc"], **FUZZ)
@given(
    st.sampled_from(["addcmul", "addcdiv"]),
    st.sampled_from(DTYPES),
    hnp.mutually_broadcastable_shapes(num_shapes=3, min_dims=0, max_dims=3, min_side=0, max_side=3),
    st.sampled_from([1, 0.5, -2.0]),
    st.data(),
)
def test_addcmul_and_addcdiv_broadcast_and_round_as_documented(name, dtype, shapes, value, data):
    a, b, c = (data.draw(arrays(dtype, s)) for s in shapes.input_shapes)
    out = getattr(F, name)(as_tensor(a), as_tensor(b), as_tensor(c), value=value)
    low = dtype in ("float16", "bfloat16")
    # float16/bfloat16: computed in float32, rounded once; float32/float64: each operation rounds in the dtype
    r = (lambda v: rounded(v, "float32")) if low else (lambda v: rounded(v, dtype))
    op = np.multiply if name == "addcmul" else np.divide
    with ERR():
        scaled = to_f64(b) if value == 1 else r(to_f64(b) * value)
        ref = r(to_f64(a) + r(op(scaled, to_f64(c))))
    assert out.shape == shapes.result_shape
    check(out, ref, dtype, 1 if low else 2, what=f"{name} {shapes.input_shapes} value={value}")


@settings(max_examples=EXAMPLES["index_add"], **FUZZ)
@given(
    st.sampled_from(DTYPES),
    hnp.array_shapes(min_dims=1, max_dims=3, min_side=0, max_side=4),
    st.integers(1, 4),
    st.data(),
)
def test_index_add_sums_duplicate_indices_like_numpy_add_at(dtype, shape, size, data):
    x = data.draw(arrays(dtype, shape))
    axis = data.draw(st.integers(-len(shape), len(shape) - 1))
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1)))
    idx = rng.integers(-size if data.draw(st.booleans()) else 0, size, shape[axis])  # duplicates and negatives
    x64 = to_f64(x)
    ref = np.zeros(shape[: axis % len(shape)] + (size,) + shape[axis % len(shape) + 1 :])
    with ERR():
        np.add.at(np.moveaxis(ref, axis, 0), idx % size, np.moveaxis(x64, axis, 0))
    # duplicates may accumulate in the dtype itself: keep partial sums within its range
    assume(finite_max(x) * max(shape[axis], 1) < float(dt.finfo(dtype).max) / 2)
    out = ops.index_add(as_tensor(x), ampcore.tensor(idx), axis, size)
    check(
        out,
        ref,
        dtype,
        shape[axis] + 1,
        scale=finite_max(x),
        what=f"index_add {shape} axis {axis} into {size} with {idx.tolist()}",
    )


@settings(max_examples=EXAMPLES["mean"], **FUZZ)
@given(
    st.sampled_from(DTYPES), hnp.array_shapes(min_dims=1, max_dims=3, min_side=0, max_side=4), st.booleans(), st.data()
)
def test_mean_matches_float64_reference_and_is_nan_over_nothing(dtype, shape, keepdim, data):
    x = data.draw(arrays(dtype, shape))
    nd = len(shape)
    dim = data.draw(
        st.none() | st.integers(-nd, nd - 1) | st.lists(st.integers(0, nd - 1), min_size=1, unique=True).map(tuple)
    )
    x64 = to_f64(x)
    axes = tuple(range(nd)) if dim is None else ((dim % nd,) if isinstance(dim, int) else dim)
    # the sum runs in float32 (float64): a sum past its range overflows there first
    with ERR():
        assume(np.abs(np.where(np.isfinite(x64), x64, 0)).sum(initial=0.0) < _accumulator_max(dtype) / 2)
    out = F.mean(as_tensor(x), dim, keepdim)
    with ERR():
        count = int(np.prod([shape[a] for a in axes]))
        ref = (
            np.sum(x64, axis=axes, keepdims=keepdim) / count
            if count
            else np.full(np.sum(x64, axis=axes, keepdims=keepdim).shape, np.nan)
        )
    if dim is None and not keepdim:
        ref = np.asarray(ref)
    check(out, ref, dtype, max(count, 1) + 1, scale=finite_max(x), what=f"mean({dtype}{shape}, dim={dim})")


PRIMITIVES = ["exp", "log", "sqrt", "rsqrt", "sigmoid", "tanh", "pow"]


@settings(max_examples=EXAMPLES["primitives"], **FUZZ)
@given(
    st.sampled_from(PRIMITIVES),
    st.sampled_from(DTYPES),
    hnp.mutually_broadcastable_shapes(num_shapes=2, min_dims=0, max_dims=3, min_side=0, max_side=3),
    st.data(),
)
def test_functional_primitive_wrappers_match_float64_reference_on_any_values(name, dtype, shapes, data):
    x = data.draw(arrays(dtype, shapes.input_shapes[0]))
    if name == "pow":
        y = data.draw(arrays(dtype, shapes.input_shapes[1]))
        out = F.pow(as_tensor(x), as_tensor(y))
        with ERR():
            ref = BINARY_REFERENCE["pow"](to_f64(x), to_f64(y))
    else:
        out = getattr(F, name)(as_tensor(x))
        with ERR():
            ref = UNARY_REFERENCE[name](to_f64(x))
    check(out, ref, dtype, what=f"F.{name}({dtype}{shapes.input_shapes})")


# =========================================================================== documented errors for bad inputs
def _z(*shape, dtype="float32"):
    return ampcore.zeros(*shape, dtype=dtype)


BAD_INPUTS = [
    # (id, call, error type, strings the message must contain)
    ("conv1d-channels", lambda: F.conv1d(_z(1, 3, 5), _z(2, 4, 3)), ValueError, ["(1, 3, 5)", "(2, 4, 3)"]),
    ("conv1d-ndim", lambda: F.conv1d(_z(1, 3, 5, 5), _z(2, 3, 3)), ValueError, ["(1, 3, 5, 5)", "(2, 3, 3)"]),
    ("conv1d-kernel", lambda: F.conv1d(_z(1, 1, 2), _z(1, 1, 3)), ValueError, ["(1, 1, 3)", "(1, 1, 2)"]),
    ("batch_norm-stats", lambda: F.batch_norm(_z(2, 3), _z(4), _z(3)), ValueError, ["running_mean", "(4,)", "(3,)"]),
    ("batch_norm-one-value", lambda: F.batch_norm(_z(1, 3), None, None, training=True), ValueError, ["1"]),
    ("batch_norm-eval-no-stats", lambda: F.batch_norm(_z(2, 3), None, None), ValueError, ["running_mean"]),
    ("max_pool2d-ndim", lambda: F.max_pool2d(_z(4, 4), 2), ValueError, ["(4, 4)"]),
    ("avg_pool2d-kernel", lambda: F.avg_pool2d(_z(1, 1, 2, 2), 3), ValueError, ["(3, 3)", "(1, 1, 2, 2)"]),
    ("prelu-weight", lambda: F.prelu(_z(2, 3), _z(4)), ValueError, ["4", "(2, 3)"]),
    ("prelu-dtype", lambda: F.prelu(_z(2, 3), _z(1, dtype="float16")), TypeError, ["float16", "float32"]),
    ("bce-shape", lambda: F.binary_cross_entropy(_z(2, 3), _z(3, 2)), ValueError, ["(2, 3)", "(3, 2)"]),
    ("bce-logits-shape", lambda: F.binary_cross_entropy_with_logits(_z(2), _z(3)), ValueError, ["(2,)", "(3,)"]),
    ("kl_div-reduction", lambda: F.kl_div(_z(2), _z(2), reduction="avg"), ValueError, ["'avg'", "batchmean"]),
    ("huber-weight", lambda: F.huber_loss(_z(2, 3), _z(2, 3), weight=_z(3)), ValueError, ["(3,)", "(2, 3)"]),
    ("margin_ranking-ndim", lambda: F.margin_ranking_loss(_z(2, 3), _z(3), _z(3)), ValueError, ["(2, 3)", "(3,)"]),
    ("cosine_embedding-target", lambda: F.cosine_embedding_loss(_z(2, 3), _z(2, 3), _z(2, 1)), ValueError, ["(2, 1)"]),
    ("bmm-batch", lambda: F.bmm(_z(2, 3, 4), _z(3, 4, 5)), ValueError, ["(2, 3, 4)", "(3, 4, 5)"]),
    ("addmm-input", lambda: F.addmm(_z(3, 3), _z(2, 4), _z(4, 5)), ValueError, ["(3, 3)", "(2, 5)"]),
    ("dot-length", lambda: F.dot(_z(3), _z(4)), ValueError, ["3", "4"]),
    ("tensordot-sizes", lambda: F.tensordot(_z(2, 3), _z(4, 5), dims=1), ValueError, ["3", "4"]),
]


# Bugs found (still open): the case fails for the reason given, and the test turns red once it is fixed.
@pytest.mark.parametrize("call, error, names", [c[1:] for c in BAD_INPUTS], ids=[c[0] for c in BAD_INPUTS])
def test_bad_inputs_raise_the_documented_error_naming_them(call, error, names):
    assert_raises_naming(call, error, names)


def test_the_fuzz_budget_is_what_the_report_counts():
    assert sum(EXAMPLES.values()) == 1110
    assert len(BAD_INPUTS) == 20
