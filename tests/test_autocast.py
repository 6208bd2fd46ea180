"""autocast: torch.autocast parity (each bullet of the contract), the weight-cast cache, traces,
custom ops and Functions, and per-thread state."""

from __future__ import annotations

import threading
import warnings

import numpy as np
import pytest

import ampcore
from ampcore import amp, nn
from ampcore import dtypes as dt
from ampcore import policy as P
from ampcore.autograd import Function
from ampcore.nn import functional as F

bf16, f16, f32, f64 = dt.bfloat16, dt.float16, dt.float32, dt.float64


def rand(*shape: int, dtype: dt.DType = f32, requires_grad: bool = False) -> ampcore.Tensor:
    rng = np.random.default_rng(sum(shape) + 7)
    return ampcore.tensor(rng.standard_normal(shape), dtype=dtype, requires_grad=requires_grad)


# --------------------------------------------------------------------------- context manager, decorator, dtype
def test_context_manager_runs_lower_ops_in_the_backends_preferred_dtype():
    x, w = rand(4, 8), rand(3, 8)
    with ampcore.autocast("cpu") as region:
        y = F.linear(x, w)
    assert region.enabled and region.fast_dtype == bf16  # the CPU backend prefers bfloat16
    assert y.dtype == bf16
    assert F.linear(x, w).dtype == f32  # off again after the block


@pytest.mark.parametrize("dtype", [bf16, f16, "float16"])
def test_explicit_dtype_is_used(dtype):
    with ampcore.autocast("cpu", dtype=dtype):
        assert (rand(2, 3) @ rand(3, 2)).dtype == dt.as_dtype(dtype)


def test_decorator_form_applies_per_call_and_keeps_the_function_name():
    @ampcore.autocast("cpu", dtype=f16)
    def forward(a, b):
        """docs"""
        return a @ b, ampcore.is_autocast_enabled("cpu")

    out, enabled = forward(rand(2, 3), rand(3, 2))
    assert out.dtype == f16 and enabled
    assert forward.__name__ == "forward" and forward.__doc__ == "docs"
    assert not ampcore.is_autocast_enabled("cpu")


def test_is_enabled_and_get_dtype_follow_the_region():
    assert not ampcore.is_autocast_enabled("cpu")
    assert ampcore.get_autocast_dtype("cpu") == bf16  # the backend's preference outside any region
    with ampcore.autocast("cpu", dtype=f16):
        assert ampcore.is_autocast_enabled("cpu") and ampcore.get_autocast_dtype("cpu") == f16
    assert ampcore.is_autocast_available("cpu")
    with pytest.raises(RuntimeError, match="unknown backend 'no_such_backend'"):  # as torch raises
        ampcore.is_autocast_available("no_such_backend")


# --------------------------------------------------------------------------- nesting and restoring
def test_nested_regions_and_inner_disable_restore_the_outer_state_exactly():
    a, b = rand(2, 3), rand(3, 2)
    with ampcore.autocast("cpu", dtype=f16):
        with ampcore.autocast("cpu", dtype=bf16):
            assert (a @ b).dtype == bf16
            with ampcore.autocast("cpu", enabled=False):
                assert (a @ b).dtype == f32 and not ampcore.is_autocast_enabled("cpu")
            assert (a @ b).dtype == bf16
        assert (a @ b).dtype == f16 and ampcore.get_autocast_dtype("cpu") == f16
    assert (a @ b).dtype == f32


def test_leaving_through_an_exception_restores_state():
    with pytest.raises(KeyError):
        with ampcore.autocast("cpu"):
            raise KeyError("boom")
    assert not ampcore.is_autocast_enabled("cpu")
    assert (rand(2, 3) @ rand(3, 2)).dtype == f32


def test_regions_are_per_device_type(register_fake):
    other = register_fake(autocast_dtype=f16)
    x_other = ampcore.ones(2, 2, device=other.name)
    with ampcore.autocast(other.name):
        assert (x_other @ x_other).dtype == f16
        with pytest.warns(UserWarning, match=f"autocast\\('{other.name}'\\) does not cover 'cpu' tensors"):
            assert (rand(2, 2) @ rand(2, 2)).dtype == f32  # cpu has no region open
        assert not ampcore.is_autocast_enabled("cpu") and ampcore.is_autocast_enabled(other.name)


def test_thread_state_is_private_to_each_thread():
    barrier = threading.Barrier(2)
    seen: dict[str, list] = {"a": [], "b": []}

    def worker(key: str, enabled: bool, dtype: dt.DType) -> None:
        with ampcore.autocast("cpu", dtype=dtype, enabled=enabled):
            for _ in range(20):
                barrier.wait()  # interleave the two threads' ops
                seen[key].append(((rand(2, 3) @ rand(3, 2)).dtype, ampcore.is_autocast_enabled("cpu")))

    threads = [
        threading.Thread(target=worker, args=("a", True, f16)),
        threading.Thread(target=worker, args=("b", False, bf16)),
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert seen["a"] == [(f16, True)] * 20
    assert seen["b"] == [(f32, False)] * 20
    assert not ampcore.is_autocast_enabled("cpu")  # the main thread never entered a region


def test_new_threads_start_with_autocast_off():
    result = []
    with ampcore.autocast("cpu"):
        t = threading.Thread(target=lambda: result.append(ampcore.is_autocast_enabled("cpu")))
        t.start()
        t.join()
    assert result == [False]


# --------------------------------------------------------------------------- eligibility
def test_only_floating_non_float64_inputs_are_cast():
    with ampcore.autocast("cpu", trace=True) as region:
        assert (rand(2, 3, dtype=f64) @ rand(3, 2, dtype=f64)).dtype == f64
        ids = ampcore.tensor([1, 2, 3])
        assert (ids + 1).dtype == dt.int64
        y = F.cross_entropy(rand(3, 4), ids)  # fp32 op: the int64 target stays int64
    assert y.dtype == f32
    record = region.trace[0]
    assert record.cast_to is None and record.reason == "not autocast: no float16/bfloat16/float32 inputs"


def test_float64_inputs_of_a_mixed_call_are_left_alone():
    with ampcore.autocast("cpu", trace=True) as region:
        out = ampcore.cat([rand(2, dtype=f64), rand(2, dtype=bf16)])
    assert region.trace[0].cast_to == "bfloat16"  # widest eligible input; float64 is not eligible
    assert out.dtype == f64  # cat's own promotion still applies


def test_in_place_ops_are_not_autocast(register_fake):
    lower_add = P.get("cpu").override(lower=["add", "relu"])
    with ampcore.autocast("cpu", policy=lower_add, trace=True) as region:
        x = rand(3)
        assert (x + x).dtype == bf16  # the out-of-place op is routed
        x.add_(rand(3))
        assert x.dtype == f32
        h = rand(3) * 1.0
        F.relu(h, inplace=True)
        assert h.dtype == f32
    in_place = [r for r in region.trace if r.op in ("add_", "relu_")]
    assert [r.op for r in in_place] == ["add_", "relu_"]
    assert all("not autocast: in-place" in r.reason for r in in_place)


def test_out_calls_are_not_autocast_and_write_into_out():
    a, b = rand(2, 3), rand(3, 2)
    out = ampcore.empty(2, 2)
    with ampcore.autocast("cpu", trace=True) as region:
        result = ampcore.matmul(a, b, out=out)
    assert result is out and out.dtype == f32
    np.testing.assert_allclose(out.numpy(), a.numpy() @ b.numpy(), rtol=1e-6)
    assert region.trace[0].reason == "not autocast: out= call (lower op)"


def test_out_errors_name_the_problem():
    a = rand(2, 3)
    with pytest.raises(ValueError, match=r"out= has shape \(3,\) but the result has shape \(2, 3\)"):
        ampcore.matmul(a, rand(3, 3), out=ampcore.empty(3))
    with pytest.raises(TypeError, match="result type float32 can't be cast to the out= dtype int64"):
        ampcore.matmul(a, rand(3, 3), out=ampcore.zeros(2, 3, dtype=dt.int64))
    with pytest.raises(RuntimeError, match="out= does not support automatic differentiation"):
        ampcore.matmul(rand(2, 3, requires_grad=True), rand(3, 3), out=ampcore.empty(2, 3))
    with pytest.raises(TypeError, match="out= must be a Tensor"):
        ampcore.matmul(a, rand(3, 3), out=np.empty((2, 3)))


@pytest.mark.parametrize(
    "call",
    [
        lambda x: x.sum(dtype=f32),
        lambda x: F.softmax(x, 1, dtype=f32),
        lambda x: F.softmax(x, 1, f32),  # dtype given positionally
        lambda x: F.log_softmax(x, dim=1, dtype=f32),
    ],
)
def test_calls_with_an_explicit_dtype_are_not_autocast_and_respect_it(call):
    policy = P.get("cpu").override(lower=["sum", "softmax", "log_softmax"])
    with ampcore.autocast("cpu", policy=policy, trace=True) as region:
        out = call(rand(2, 3))
    assert out.dtype == f32
    assert region.trace[0].reason.startswith("not autocast: explicit dtype= call")


def test_unlisted_ops_run_in_their_inputs_types_including_low_precision_from_upstream():
    x, w = rand(4, 8), rand(3, 8)
    with ampcore.autocast("cpu"):
        h = F.linear(x, w)  # lower -> bfloat16
        g = F.gelu(h)  # unlisted: stays bfloat16
        mixed = h + rand(4, 3)  # unlisted, natively promotes bf16 + fp32 -> fp32
        assert F.gelu(x).dtype == f32
    assert (h.dtype, g.dtype, mixed.dtype) == (bf16, bf16, f32)


def test_ops_inside_a_composite_are_not_autocast_again():
    """cross_entropy (fp32) calls log_softmax; with log_softmax made LOWER the loss must still be fp32
    throughout: only the outermost op's decision applies."""
    policy = P.get("cpu").override(lower=["log_softmax", "sum", "exp"])
    logits = rand(5, 4)
    with ampcore.autocast("cpu", policy=policy, trace=True) as region:
        loss = F.cross_entropy(logits, ampcore.tensor([0, 1, 2, 3, 0]))
    assert loss.dtype == f32
    assert region.trace.ops() == ["cross_entropy"]
    np.testing.assert_allclose(loss.item(), F.cross_entropy(logits, ampcore.tensor([0, 1, 2, 3, 0])).item(), rtol=1e-6)


# --------------------------------------------------------------------------- gradients
def test_fp32_parameter_used_in_a_low_precision_matmul_gets_an_fp32_grad_of_the_right_value():
    x = rand(8, 16)
    w = rand(4, 16, requires_grad=True)
    with ampcore.autocast("cpu", dtype=f16):
        y = F.linear(x, w)
        loss = y.float().sum()
    loss.backward()
    assert y.dtype == f16 and w.grad.dtype == f32
    # d(sum(x @ w.T))/dw = column sums of x, broadcast over rows; x was rounded to float16 on the way in.
    expected = np.broadcast_to(x.half().float().numpy().sum(0), (4, 16))
    np.testing.assert_allclose(w.grad.numpy(), expected, rtol=2**-10 * 8, atol=1e-3)


# --------------------------------------------------------------------------- weight-cast cache
def _cast_calls(backend) -> int:
    return backend.calls.get("cast", 0)


def test_a_linear_called_twice_casts_its_weight_once(register_fake):
    fake = register_fake(autocast_dtype=bf16)
    layer = nn.Linear(8, 8).to(fake.name)
    x = ampcore.ones(2, 8, device=fake.name, dtype=bf16)  # already low precision: never cast
    with ampcore.autocast(fake.name):
        layer(x)
        first = _cast_calls(fake)
        layer(x)
        second = _cast_calls(fake) - first
    assert first == 2 and second == 0  # weight and bias cast once, then reused


def test_cache_disabled_casts_every_time(register_fake):
    fake = register_fake(autocast_dtype=bf16)
    layer = nn.Linear(8, 8).to(fake.name)
    x = ampcore.ones(2, 8, device=fake.name, dtype=bf16)
    with ampcore.autocast(fake.name, cache_enabled=False):
        assert not amp.is_autocast_cache_enabled(fake.name)
        layer(x)
        layer(x)
    assert _cast_calls(fake) == 4


def test_cache_is_cleared_when_the_outermost_region_exits_and_not_before():
    from ampcore.amp.state import thread_state

    layer = nn.Linear(4, 4)
    with ampcore.autocast("cpu"):
        with ampcore.autocast("cpu"):
            layer(rand(1, 4))
        assert len(thread_state.cast_cache) == 2
    assert len(thread_state.cast_cache) == 0


def test_cached_casts_keep_gradients_flowing_to_the_parameter():
    w = rand(3, 3, requires_grad=True)
    x = rand(2, 3)
    with ampcore.autocast("cpu"):
        loss = F.linear(x, w).float().sum() + F.linear(x, w).float().sum()
    loss.backward()
    with ampcore.autocast("cpu"):
        single = F.linear(x, rand(3, 3, requires_grad=True)).float().sum()
    expected = np.broadcast_to(2 * x.bfloat16().float().numpy().sum(0), (3, 3))
    np.testing.assert_allclose(w.grad.numpy(), expected, rtol=2**-7 * 4)
    assert single.dtype == f32


def test_a_cast_made_under_no_grad_is_not_reused_where_gradients_must_flow():
    w = rand(3, 3, requires_grad=True)
    x = rand(2, 3)
    with ampcore.autocast("cpu"):
        with ampcore.no_grad():
            F.linear(x, w)
        F.linear(x, w).float().sum().backward()
    assert w.grad is not None


def test_a_parameter_rebound_inside_the_region_is_cast_again():
    layer = nn.Linear(2, 2, bias=False)
    x = rand(1, 2)
    with ampcore.autocast("cpu"):
        before = layer(x)
        with ampcore.no_grad():
            layer.weight.copy_(layer.weight * 2.0)
        after = layer(x)
    np.testing.assert_allclose(after.float().numpy(), 2 * before.float().numpy(), rtol=2**-7 * 2)


# --------------------------------------------------------------------------- banned ops
def test_binary_cross_entropy_raises_inside_cuda_table_autocast_and_points_to_with_logits():
    p = ampcore.tensor([0.2, 0.8])
    t = ampcore.tensor([0.0, 1.0])
    with ampcore.autocast("cpu", policy=P.builtin("cuda")):
        with pytest.raises(amp.AutocastError, match="binary_cross_entropy_with_logits"):
            F.binary_cross_entropy(p, t)
        with pytest.raises(RuntimeError, match="nn.BCEWithLogitsLoss"):
            nn.BCELoss()(p, t)
        assert F.binary_cross_entropy_with_logits(p, t).dtype == f32
        with ampcore.autocast("cpu", enabled=False):
            assert F.binary_cross_entropy(p, t).dtype == f32
    assert F.binary_cross_entropy(p, t).dtype == f32


def test_binary_cross_entropy_runs_in_float32_under_cpu_autocast_as_in_torch():
    """torch's CPU autocast lists and registers binary_cross_entropy as float32; only CUDA (and XPU) ban it."""
    p = ampcore.tensor([0.2, 0.8], dtype=bf16)
    t = ampcore.tensor([0.0, 1.0], dtype=bf16)
    with ampcore.autocast("cpu", dtype=bf16, trace=True) as region:
        loss = F.binary_cross_entropy(p, t)
        module_loss = nn.BCELoss()(p.float(), t.float())
    assert loss.dtype == f32 and module_loss.dtype == f32
    assert region.trace[0].category == "fp32"
    expected = -(np.log(1 - 0.2) + np.log(0.8)) / 2
    np.testing.assert_allclose(loss.item(), expected, rtol=2**-7 * 4)


# --------------------------------------------------------------------------- unsupported dtypes and devices
def test_a_dtype_autocast_cannot_use_warns_and_disables():
    with pytest.warns(UserWarning, match="supports dtype float16 or bfloat16, got float64. Disabling autocast"):
        region = ampcore.autocast("cpu", dtype=f64)
    with region:
        assert not ampcore.is_autocast_enabled("cpu")
        assert (rand(2, 2) @ rand(2, 2)).dtype == f32


def test_strict_raises_instead_of_warning():
    with pytest.raises(ValueError, match="got float64.*strict=True"):
        ampcore.autocast("cpu", dtype=f64, strict=True)


def test_a_device_that_cannot_store_the_dtype_warns_naming_what_it_supports(register_fake):
    fake = register_fake(storable=[f32, f64, f16, dt.int64, dt.bool_], autocast_dtype=f16)
    with pytest.warns(UserWarning, match=r"cannot store and compute bfloat16; it supports float16"):
        assert not ampcore.autocast(fake.name, dtype=bf16).enabled
    with pytest.raises(ValueError, match="cannot store and compute bfloat16"):
        ampcore.autocast(fake.name, dtype=bf16, strict=True)


def test_an_unavailable_backend_warns_and_disables_or_raises_when_strict(register_fake):
    class Gone(ampcore.testing.FakeBackend):
        def availability(self):
            return ampcore.Availability(False, "no driver; pip install the-driver")

    gone = register_fake(cls=Gone)
    with pytest.warns(UserWarning, match="no driver; pip install the-driver"):
        assert not ampcore.autocast(gone.name).enabled
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert not ampcore.autocast(gone.name, enabled=False).enabled  # asked for off: nothing to warn about
    with pytest.raises(ampcore.BackendUnavailableError, match="no driver"):
        ampcore.autocast(gone.name, strict=True)


@pytest.mark.parametrize(
    "kwargs, error, message",
    [
        ({"device_type": "tpu"}, ampcore.UnknownBackendError, "'tpu'.*; installed backends are"),
        ({"device_type": "cpu:0"}, ValueError, "pass 'cpu', not 'cpu:0'"),
        ({"device_type": 0}, TypeError, "device_type must be a backend name"),
        ({"device_type": "cpu", "enabled": "yes"}, TypeError, "enabled must be True or False, got 'yes'"),
        ({"device_type": "cpu", "policy": "cpu"}, TypeError, "policy must be an ampcore.policy.Policy"),
        ({"device_type": "cpu", "trace": "all"}, TypeError, "trace must be True, False"),
        ({"device_type": "cpu", "dtype": "float8"}, ValueError, "float8"),
    ],
)
def test_bad_arguments_raise_naming_the_value(kwargs, error, message):
    with pytest.raises(error, match=message):
        ampcore.autocast(**kwargs)


# --------------------------------------------------------------------------- trace / explain
def test_trace_records_op_inputs_target_output_category_and_reason():
    model = nn.Sequential(nn.Linear(8, 4), nn.GELU())
    with ampcore.autocast("cpu", trace=True) as region:
        loss = F.cross_entropy(model(rand(2, 8)), ampcore.tensor([0, 3]))
        with ampcore.autocast("cpu", enabled=False):
            rand(2, 2) @ rand(2, 2)
    rows = [(r.op, r.input_dtypes, r.cast_to, r.output_dtypes, r.category) for r in region.trace]
    assert rows == [
        ("linear", ("float32", "float32", "float32"), "bfloat16", ("bfloat16",), "lower"),
        ("gelu", ("bfloat16",), None, ("bfloat16",), "unlisted"),
        ("cross_entropy", ("bfloat16", "int64"), "float32", ("float32",), "fp32"),
        ("matmul", ("float32", "float32"), None, ("float32",), "-"),
    ]
    assert region.trace[-1].reason == "autocast disabled in this block"
    table = str(region.trace)
    assert (
        "cross_entropy" in table
        and (
            "policy 'cpu': fp32 (torch docs cpu list (as cross_entropy_loss); "
            "torch 2.13 AutocastCPU registration (autocast_mode.cpp))"
        )
        in table
    )
    assert loss.dtype == f32
    assert region.trace[0].as_dict()["cast_to"] == "bfloat16"


def test_trace_renders_with_rich():
    from rich.console import Console

    with ampcore.autocast("cpu", trace=True) as region:
        rand(2, 2) @ rand(2, 2)
    console = Console(record=True, width=160)
    console.print(region.trace)
    text = console.export_text()
    assert "matmul" in text and "autocast trace" in text


def test_capability_fallback_runs_in_float32_and_the_trace_says_why(register_fake):
    fake = register_fake(autocast_dtype=bf16, fallback_ops={bf16: {"linear"}})
    x = ampcore.ones(2, 4, device=fake.name)
    w = ampcore.ones(3, 4, device=fake.name)
    with ampcore.autocast(fake.name, trace=True) as region:
        assert F.linear(x, w).dtype == f32
        assert ampcore.matmul(x, w.T).dtype == bf16
    assert region.trace[0].reason == "capability fallback: the device has no bfloat16 linear, runs in float32"
    assert region.trace[0].cast_to == "float32"


def test_explain_answers_without_running():
    d = amp.explain("linear", "float32", "float32", device_type="cpu")
    assert (d.category, d.target) == (P.LOWER, bf16)
    d = amp.explain("softmax", "bfloat16", device_type="cpu", dtype="float16", policy=P.builtin("cuda"))
    assert (d.category, d.target, d.reason) == (P.FP32, f32, "policy 'cuda': fp32 (torch docs cuda list)")
    assert amp.explain("cat", "float16", "bfloat16", device_type="cpu").target == f32
    assert amp.explain("cat", "bfloat16", "bfloat16", device_type="cpu").target == bf16


# --------------------------------------------------------------------------- user policies and custom ops
def test_a_user_policy_overrides_the_device_policy_for_one_region():
    policy = P.get("cpu").override(fp32=["linear"], lower=["gelu"])
    x, w = rand(2, 4), rand(3, 4)
    with ampcore.autocast("cpu", policy=policy):
        assert F.linear(x, w).dtype == f32
        assert F.gelu(x).dtype == bf16
    with ampcore.autocast("cpu"):
        assert F.linear(x, w).dtype == bf16


def test_custom_op_is_routed_with_its_registered_category():
    name = "scaled_norm_test_op"

    @ampcore.op(name, category="fp32")
    def scaled_norm(x, scale=1.0):
        return (x * x).sum().sqrt() * scale

    try:
        with ampcore.autocast("cpu", trace=True) as region:
            out = scaled_norm(rand(4, dtype=bf16))
        assert out.dtype == f32 and region.trace.ops() == [name]
        lowered = P.get("cpu").override(lower=[name])
        with ampcore.autocast("cpu", policy=lowered):
            assert scaled_norm(rand(4)).dtype == bf16
    finally:
        P.unregister(name)


def test_a_category_registered_after_regions_were_made_reaches_the_next_region():
    """autocast remembers how it resolved a device type; registering a category must still reach the next one."""
    name = "late_registered_test_op"

    @ampcore.op(name, category="lower")
    def doubled(x):
        return x + x

    try:
        with ampcore.autocast("cpu"):
            assert doubled(rand(4)).dtype == bf16  # the resolution is remembered from here on
        P.register(name, "fp32", device_type="cpu")
        with ampcore.autocast("cpu"):
            assert doubled(rand(4, dtype=bf16)).dtype == f32
    finally:
        P.unregister(name, device_type="cpu")
        P.unregister(name)


def test_custom_op_cannot_take_a_builtin_name():
    with pytest.raises(ValueError, match="'linear' is taken by a built-in composite op"):
        ampcore.op("linear")


# --------------------------------------------------------------------------- custom autograd Functions
class Square(Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x * x

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        return grad * 2.0 * x


def test_function_forward_and_backward():
    x = rand(5, requires_grad=True)
    y = Square.apply(x)
    y.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), 2 * x.numpy(), rtol=1e-6)
    assert y.grad_fn is not None and "Square" in y.grad_fn.name()


def test_function_backward_must_return_one_gradient_per_argument():
    class Bad(Function):
        @staticmethod
        def forward(ctx, x, y):
            return x + y

        @staticmethod
        def backward(ctx, grad):
            return grad

    with pytest.raises(RuntimeError, match="returned 1 gradients, but forward took 2"):
        Bad.apply(rand(2, requires_grad=True), rand(2)).sum().backward()


class MatmulFwdFp32(Function):
    seen: list = []

    @staticmethod
    @amp.custom_fwd(device_type="cpu", cast_inputs=f32)
    def forward(ctx, a, b):
        MatmulFwdFp32.seen.append((a.dtype, b.dtype, ampcore.is_autocast_enabled("cpu")))
        ctx.save_for_backward(a, b)
        return a @ b

    @staticmethod
    @amp.custom_bwd(device_type="cpu")
    def backward(ctx, grad):
        a, b = ctx.saved_tensors
        MatmulFwdFp32.seen.append(("backward", ampcore.is_autocast_enabled("cpu")))
        return grad @ b.T, a.T @ grad


class MatmulAutocast(Function):
    seen: list = []

    @staticmethod
    @amp.custom_fwd(device_type="cpu")
    def forward(ctx, a, b):
        ctx.save_for_backward(a, b)
        return a @ b

    @staticmethod
    @amp.custom_bwd(device_type="cpu")
    def backward(ctx, grad):
        a, b = ctx.saved_tensors
        MatmulAutocast.seen.append((ampcore.is_autocast_enabled("cpu"), ampcore.get_autocast_dtype("cpu")))
        return grad @ b.T, a.T @ grad


def test_custom_fwd_with_cast_inputs_runs_forward_in_that_dtype_with_autocast_off():
    MatmulFwdFp32.seen.clear()
    a = rand(2, 3, dtype=bf16, requires_grad=True)
    b = rand(3, 2, requires_grad=True)
    with ampcore.autocast("cpu"):
        out = MatmulFwdFp32.apply(a, b)
    out.float().sum().backward()
    assert out.dtype == f32
    assert MatmulFwdFp32.seen == [(f32, f32, False), ("backward", False)]
    assert a.grad.dtype == bf16 and b.grad.dtype == f32  # gradients come back in each input's dtype


def test_custom_fwd_without_cast_inputs_lets_ops_inside_autocast_and_bwd_reuses_the_state():
    MatmulAutocast.seen.clear()
    a, b = rand(2, 3, requires_grad=True), rand(3, 2, requires_grad=True)
    with ampcore.autocast("cpu", dtype=f16):
        out = MatmulAutocast.apply(a, b)
    out.float().sum().backward()  # outside the region: custom_bwd restores the forward's state
    assert out.dtype == f16
    assert MatmulAutocast.seen == [(True, f16)]


def test_custom_fwd_outside_a_region_ignores_cast_inputs():
    MatmulFwdFp32.seen.clear()
    out = MatmulFwdFp32.apply(rand(2, 3, dtype=bf16), rand(3, 2, dtype=bf16))
    assert out.dtype == bf16 and MatmulFwdFp32.seen == [(bf16, bf16, False)]


def test_custom_bwd_without_custom_fwd_is_a_clear_error():
    class Half(Function):
        @staticmethod
        def forward(ctx, x):
            return x * 1.0

        @staticmethod
        @amp.custom_bwd(device_type="cpu")
        def backward(ctx, grad):
            return grad

    with pytest.raises(RuntimeError, match="not decorated with custom_fwd"):
        Half.apply(rand(2, requires_grad=True)).sum().backward()


def test_custom_fwd_needs_a_device_type():
    with pytest.raises(TypeError, match="device_type="):
        amp.custom_fwd(lambda ctx: None, device_type=None)


def test_the_autocast_guide_examples_run(run_python):
    from pathlib import Path

    guide = (Path(__file__).resolve().parents[1] / "docs" / "autocast.md").read_text()
    blocks = [b.split("\n", 1)[1] for b in guide.split("```")[1::2] if b.startswith("python\n")]
    assert len(blocks) >= 4
    code = "\n".join(blocks) + "\nprint(rms_norm(x).dtype, MyMatmul.apply(x, x.T).dtype)\n"
    proc = run_python(code)
    assert proc.returncode == 0, proc.stderr
    assert "ampcore.float32" in proc.stdout
    assert "cross_entropy  bfloat16, int64" in proc.stdout and "(as cross_entropy_loss)" in proc.stdout


# --------------------------------------------------------------------------- torch's exception types (issue 27)
def test_an_unknown_device_type_raises_what_torch_and_ampcore_callers_catch():
    for call in (lambda: ampcore.autocast("not a real device"), lambda: ampcore.is_autocast_available("nope")):
        with pytest.raises(RuntimeError, match="installed backends are 'cpu'") as info:  # torch: RuntimeError
            call()
        assert isinstance(info.value, ValueError) and isinstance(info.value, ampcore.UnknownBackendError)
        assert isinstance(info.value, ampcore.amp.UnknownDeviceTypeError)


def test_a_device_object_as_device_type_is_a_value_error_and_a_type_error():
    with pytest.raises(ValueError, match=r"got device\('cpu'\) \(pass device.type, 'cpu'\)") as info:  # torch
        ampcore.autocast(device_type=ampcore.device("cpu"))
    assert isinstance(info.value, TypeError)


@pytest.mark.parametrize("other", [f16, bf16, ampcore.float32])
def test_matmul_of_float64_with_another_dtype_raises_as_torch_does(other):
    a, b = ampcore.ones(2, 3, dtype=ampcore.float64), ampcore.ones(3, 2, dtype=other)
    for product in (lambda: a @ b, lambda: ampcore.matmul(b.mT, a.mT), lambda: F.linear(a, b.mT)):
        with pytest.raises(RuntimeError, match=f"same dtype, got (float64 and {other.name}|{other.name} and float64)"):
            product()


def test_float64_input_to_linear_under_float16_autocast_raises_instead_of_running_in_float64():
    w = ampcore.randn(3, 4, requires_grad=True)
    x = ampcore.randn(2, 4, dtype=ampcore.float64)
    with ampcore.autocast("cpu", dtype=f16, trace=True) as region:
        with pytest.raises(RuntimeError, match="float64 and float16.*autocast leaves float64 inputs alone"):
            F.linear(x, w)
    assert [r.op for r in region.trace] == []  # nothing ran, nothing recorded as run in float16


def test_the_trace_says_a_float64_input_was_left_alone():
    with ampcore.autocast("cpu", dtype=bf16, trace=True) as region:
        out = ampcore.cat([rand(2, dtype=f64), rand(2)])  # the float32 input is cast, the float64 one is not
        ampcore.cat([rand(2), rand(2)])
    first, second = [r for r in region.trace if r.op == "cat"]
    assert out.dtype is ampcore.float64 and first.output_dtypes == ("float64",)
    assert first.cast_to == "float32" and "float64 input(s) left as they were" in first.reason
    assert "left as they were" not in second.reason


# --------------------------------------------------------------------------- a region on another device type
def test_a_region_warns_once_when_eligible_ops_run_on_a_device_type_it_does_not_cover(register_fake):
    fake = register_fake()
    w, x = ampcore.randn(3, 4, device=fake.name), ampcore.randn(2, 4, device=fake.name)
    with pytest.warns(UserWarning, match=f"autocast\\('cpu'\\) does not cover '{fake.name}' tensors: 'linear'") as seen:
        with ampcore.autocast("cpu", dtype=bf16):
            out = F.linear(x, w)
            F.linear(x, w)
            x @ w.mT
    assert len([r for r in seen if "does not cover" in str(r.message)]) == 1
    assert out.dtype is ampcore.float32  # it ran in its inputs' dtype, as the warning says
    with pytest.warns(UserWarning, match="does not cover"):  # a new region warns again
        with ampcore.autocast("cpu", dtype=bf16):
            F.linear(x, w)


def test_a_region_stays_silent_when_nothing_eligible_ran_elsewhere(register_fake):
    fake = register_fake()
    x = ampcore.randn(2, 4, device=fake.name)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with ampcore.autocast("cpu", dtype=bf16):
            (x + x).exp().sum()  # unlisted ops: autocast would not change them anyway
            F.linear(x.to("float64"), ampcore.randn(3, 4, device=fake.name, dtype="float64"))  # float64: not eligible
            F.linear(rand(2, 4), rand(3, 4))  # covered
        with ampcore.autocast("cpu", enabled=False):
            F.linear(x, ampcore.randn(3, 4, device=fake.name))
        F.linear(x, ampcore.randn(3, 4, device=fake.name))  # no region at all
