"""ampcore.optim: SGD/Adam/AdamW against NumPy float64 references of torch's rules, the fused kernel against
the reference composition, float32 state for low-precision parameters, and the state-dict round trip."""

from __future__ import annotations

import copy

import numpy as np
import pytest

import ampcore
from ampcore import dtypes as dt
from ampcore import nn, optim
from ampcore.conformance.op_reference import adam_steps, sgd_steps
from ampcore.optim.adam import adamw_step_reference

EPS32 = float(np.finfo(np.float32).eps)
STEPS = 6


@pytest.fixture(autouse=True)
def _seed():
    ampcore.manual_seed(0)


def grad_sequence(shape, steps=STEPS, seed=1):
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(shape) for _ in range(steps)]


def run(optimizer_cls, p0, grads, dtype=dt.float32, **kwargs):
    """Step ``optimizer_cls`` over the given gradient sequence; returns (param, optimizer)."""
    p = nn.Parameter(ampcore.tensor(p0, dtype=dtype))
    opt = optimizer_cls([p], **kwargs)
    for g in grads:
        p.grad = ampcore.tensor(g, dtype=dtype)
        opt.step()
    return p, opt


def sgd_reference(p, grads, lr, momentum=0.0, dampening=0.0, weight_decay=0.0, nesterov=False):
    """The parameter after torch's SGD steps, in float64 (the conformance suite's reference)."""
    *_, (last, _) = sgd_steps(
        p, grads, lr=lr, momentum=momentum, dampening=dampening, weight_decay=weight_decay, nesterov=nesterov
    )
    return last


def adam_reference(p, grads, lr, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0, decoupled=False, amsgrad=False):
    """(param, exp_avg, exp_avg_sq) after torch's Adam/AdamW steps, in float64."""
    *_, last = adam_steps(
        p,
        grads,
        lr=lr,
        beta1=betas[0],
        beta2=betas[1],
        eps=eps,
        weight_decay=weight_decay,
        decoupled=decoupled,
        amsgrad=amsgrad,
    )
    return last


def assert_close32(actual, expected, scale=1.0):
    np.testing.assert_allclose(np.asarray(actual, np.float64), expected, rtol=64 * EPS32, atol=64 * EPS32 * scale)


# --------------------------------------------------------------------------- rules vs NumPy float64
@pytest.mark.parametrize(
    "kwargs",
    [
        dict(lr=0.1),
        dict(lr=0.05, momentum=0.9),
        dict(lr=0.05, momentum=0.9, dampening=0.3, weight_decay=0.1),
        dict(lr=0.05, momentum=0.8, nesterov=True, weight_decay=0.01),
    ],
)
def test_sgd_matches_torchs_rule_in_float64(kwargs):
    p0 = np.random.default_rng(0).standard_normal((4, 3))
    grads = grad_sequence((4, 3))
    p, opt = run(optim.SGD, p0, grads, **kwargs)
    assert_close32(p.numpy(), sgd_reference(p0, grads, **kwargs), scale=4.0)
    if kwargs.get("momentum"):
        assert opt.state[p]["momentum_buffer"].dtype is dt.float32
    else:
        assert p not in opt.state


@pytest.mark.parametrize(
    "cls,kwargs",
    [
        (optim.Adam, dict(lr=1e-2)),
        (optim.Adam, dict(lr=1e-2, betas=(0.8, 0.99), weight_decay=0.1, eps=1e-6)),
        (optim.Adam, dict(lr=1e-2, amsgrad=True)),
        (optim.AdamW, dict(lr=1e-2)),
        (optim.AdamW, dict(lr=3e-2, weight_decay=0.5, betas=(0.5, 0.9))),
        (optim.AdamW, dict(lr=1e-2, amsgrad=True, weight_decay=0.1)),
    ],
)
def test_adam_and_adamw_match_torchs_rule_in_float64(cls, kwargs):
    p0 = np.random.default_rng(0).standard_normal((5, 7))
    grads = grad_sequence((5, 7))
    p, opt = run(cls, p0, grads, **kwargs)
    ref_p, ref_m, ref_v = adam_reference(
        p0,
        grads,
        decoupled=cls is optim.AdamW,
        weight_decay=kwargs.pop("weight_decay", 0.01 if cls is optim.AdamW else 0),
        **kwargs,
    )
    assert_close32(p.numpy(), ref_p, scale=4.0)
    state = opt.state[p]
    assert state["step"] == STEPS
    assert_close32(state["exp_avg"].numpy(), ref_m)
    assert_close32(state["exp_avg_sq"].numpy(), ref_v)


def test_adamw_defaults_are_torchs():
    opt = optim.AdamW([nn.Parameter(ampcore.zeros(1))])
    group = opt.param_groups[0]
    assert (group["lr"], group["betas"], group["eps"], group["weight_decay"]) == (1e-3, (0.9, 0.999), 1e-8, 1e-2)
    assert optim.Adam([nn.Parameter(ampcore.zeros(1))]).param_groups[0]["weight_decay"] == 0.0


# --------------------------------------------------------------------------- fused kernel vs reference composition
@pytest.mark.parametrize("dtype", [dt.float32, dt.bfloat16, dt.float16, dt.float64])
@pytest.mark.parametrize("decoupled", [True, False])
def test_fused_cpu_kernel_equals_the_reference_composition_bit_for_bit(dtype, decoupled):
    k = ampcore.get_backend("cpu").kernels
    assert k.has("adamw_step")
    rng = np.random.default_rng(2)
    shapes = [(70_000,), (3, 5), (130, 1100)]  # crosses chunk boundaries and ends in a partial chunk
    state = np.float64 if dtype is dt.float64 else np.float32
    params = [rng.standard_normal(s).astype(dtype.numpy) for s in shapes]
    grads = [rng.standard_normal(s).astype(dtype.numpy) for s in shapes]
    m = [rng.standard_normal(s).astype(state) * 0.1 for s in shapes]
    v = [np.abs(rng.standard_normal(s)).astype(state) * 0.01 for s in shapes]
    grads[2] = np.asfortranarray(grads[2])  # a transposed-layout gradient is read correctly
    hyper = dict(step=3, lr=1e-2, beta1=0.9, beta2=0.99, eps=1e-8, weight_decay=0.05, decoupled=decoupled)
    ref = adamw_step_reference(k, params, grads, m, v, **hyper)
    fused = k.adamw_step([a.copy() for a in params], grads, [a.copy() for a in m], [a.copy() for a in v], **hyper)
    for ref_list, fused_list in zip(ref, fused):
        for r, f in zip(ref_list, fused_list):
            assert f.dtype == r.dtype
            np.testing.assert_array_equal(f, r)


def test_fused_kernel_validates_everything_before_writing():
    k = ampcore.get_backend("cpu").kernels
    p = [np.ones(4, np.float32), np.ones(3, np.float32)]
    g = [np.ones(4, np.float32), np.ones(2, np.float32)]
    m = [np.zeros(4, np.float32), np.zeros(3, np.float32)]
    v = [np.zeros(4, np.float32), np.zeros(3, np.float32)]
    hyper = dict(step=1, lr=0.1, beta1=0.9, beta2=0.999, eps=1e-8, weight_decay=0.0, decoupled=True)
    with pytest.raises(ValueError, match="shapes differ"):
        k.adamw_step(p, g, m, v, **hyper)
    assert (p[0] == 1).all() and not m[0].any()
    with pytest.raises(TypeError, match="moments must be float32"):
        k.adamw_step(p[:1], g[:1], [np.zeros(4, np.float16)], v[:1], **hyper)
    with pytest.raises(ValueError, match="step must be an int >= 1"):
        k.adamw_step(p[:1], g[:1], m[:1], v[:1], **{**hyper, "step": 0})


@pytest.mark.parametrize("dtype", [dt.float32, dt.bfloat16])
def test_optimizer_fused_path_and_reference_path_give_the_same_bits(dtype, monkeypatch):
    p0 = np.random.default_rng(3).standard_normal((40, 30))
    grads = grad_sequence((40, 30))
    fused, _ = run(optim.AdamW, p0, grads, dtype=dtype, lr=1e-2, weight_decay=0.1)
    k = ampcore.get_backend("cpu").kernels
    has = k.has
    monkeypatch.setattr(k, "has", lambda name: name != "adamw_step" and has(name))
    reference, opt = run(optim.AdamW, p0, grads, dtype=dtype, lr=1e-2, weight_decay=0.1)
    np.testing.assert_array_equal(fused.numpy(), reference.numpy())
    assert opt.state[reference]["exp_avg"].dtype is dt.float32


# --------------------------------------------------------------------------- low precision
def test_state_is_float32_for_bfloat16_params_and_the_update_is_rounded_once():
    p0 = np.random.default_rng(4).standard_normal((8, 8))
    p0 = p0.astype(dt.bfloat16.numpy).astype(np.float64)  # exactly representable start
    grads = [g.astype(dt.bfloat16.numpy).astype(np.float64) for g in grad_sequence((8, 8), steps=1)]
    p, opt = run(optim.AdamW, p0, grads, dtype=dt.bfloat16, lr=1e-2)
    state = opt.state[p]
    assert p.dtype is dt.bfloat16
    assert state["exp_avg"].dtype is dt.float32 and state["exp_avg_sq"].dtype is dt.float32
    ref_p, ref_m, ref_v = adam_reference(p0, grads, lr=1e-2, weight_decay=1e-2, decoupled=True)
    assert_close32(state["exp_avg"].numpy(), ref_m)
    assert_close32(state["exp_avg_sq"].numpy(), ref_v)
    # a float32 update rounded once: within half a bf16 ulp of the exact result, not a bf16 chain of roundings
    ulp = np.spacing(np.abs(ref_p).astype(dt.bfloat16.numpy)).astype(np.float64)
    assert (np.abs(p.numpy().astype(np.float64) - ref_p) <= 0.5 * ulp + 1e-6 * np.abs(ref_p)).all()


def test_sgd_momentum_buffer_is_float32_for_float16_params_and_float64_for_float64():
    for dtype, state in ((dt.float16, dt.float32), (dt.float64, dt.float64)):
        p, opt = run(optim.SGD, np.ones(3), grad_sequence((3,), steps=2), dtype=dtype, lr=0.1, momentum=0.9)
        assert p.dtype is dtype and opt.state[p]["momentum_buffer"].dtype is state


# --------------------------------------------------------------------------- state dict
def make_model_and_opt(cls=optim.AdamW, **kwargs):
    ampcore.manual_seed(5)
    model = nn.Sequential(nn.Linear(6, 8), nn.ReLU(), nn.Linear(8, 3))
    groups = [{"params": [model[0].weight, model[0].bias]}, {"params": model[2].parameters(), "lr": 3e-3}]
    return model, cls(groups, lr=1e-2, **kwargs)


def train_steps(model, opt, n, seed):
    rng = np.random.default_rng(seed)
    for _ in range(n):
        x = ampcore.tensor(rng.standard_normal((10, 6)).astype(np.float32))
        y = ampcore.tensor(rng.integers(0, 3, 10))
        opt.zero_grad()
        nn.functional.cross_entropy(model(x), y).backward()
        opt.step()


@pytest.mark.parametrize(
    "cls,kwargs", [(optim.AdamW, {}), (optim.Adam, dict(amsgrad=True)), (optim.SGD, dict(momentum=0.9, nesterov=True))]
)
def test_state_dict_round_trip_continues_bit_identically(cls, kwargs):
    model, opt = make_model_and_opt(cls, **kwargs)
    train_steps(model, opt, 3, seed=0)
    saved_model, saved_opt = model.state_dict(), opt.state_dict()
    assert sorted(saved_opt["state"]) == [0, 1, 2, 3]
    assert [g["params"] for g in saved_opt["param_groups"]] == [[0, 1], [2, 3]]
    train_steps(model, opt, 3, seed=1)

    model2, opt2 = make_model_and_opt(cls, **kwargs)
    model2.load_state_dict(saved_model)
    opt2.load_state_dict(saved_opt)
    assert opt2.param_groups[1]["lr"] == 3e-3
    train_steps(model2, opt2, 3, seed=1)
    for a, b in zip(model.parameters(), model2.parameters()):
        np.testing.assert_array_equal(a.numpy(), b.numpy())


def test_state_dict_values_are_copies():
    model, opt = make_model_and_opt()
    train_steps(model, opt, 1, seed=0)
    saved = opt.state_dict()
    before = saved["state"][0]["exp_avg"].numpy().copy()
    train_steps(model, opt, 1, seed=1)
    np.testing.assert_array_equal(saved["state"][0]["exp_avg"].numpy(), before)
    assert saved["state"][0]["step"] == 1


def opt_snapshot(opt):
    state = {
        i: {k: (v.numpy().copy() if isinstance(v, ampcore.Tensor) else v) for k, v in st.items()}
        for i, st in opt.state_dict()["state"].items()
    }
    return state, copy.deepcopy([dict(g.items()) for g in opt.state_dict()["param_groups"]])


@pytest.mark.parametrize(
    "corrupt,match",
    [
        (lambda sd: sd["param_groups"].pop(), "1 parameter group.*this optimizer has 2"),
        (lambda sd: sd["param_groups"][1]["params"].pop(), "group 1 has 1 parameter"),
        (lambda sd: sd["state"][3].__setitem__("exp_avg", ampcore.zeros(5)), r"shape \(5,\).*shape \(3,\)"),
        (lambda sd: sd["state"][0].pop("exp_avg_sq"), "missing key.*exp_avg_sq"),
        (lambda sd: sd["state"][0].__setitem__("momentum_buffer", ampcore.zeros(8, 6)), "unexpected key"),
        (lambda sd: sd["state"][1].__setitem__("step", -1), "non-negative integer"),
        (lambda sd: sd["state"].__setitem__(9, {}), "parameter id 9"),
        (lambda sd: sd["param_groups"][0].__setitem__("lr", -1.0), "invalid learning rate -1.0"),
    ],
)
def test_bad_state_dict_raises_and_changes_nothing(corrupt, match):
    model, opt = make_model_and_opt()
    train_steps(model, opt, 2, seed=0)
    bad = opt.state_dict()
    train_steps(model, opt, 1, seed=1)
    before_state, before_groups = opt_snapshot(opt)
    corrupt(bad)
    with pytest.raises(optim.StateDictError, match=match):
        opt.load_state_dict(bad)
    after_state, after_groups = opt_snapshot(opt)
    assert after_groups == before_groups and after_state.keys() == before_state.keys()
    for i in before_state:
        for key, value in before_state[i].items():
            np.testing.assert_array_equal(after_state[i][key], value)


# --------------------------------------------------------------------------- groups, errors, atomicity
@pytest.mark.parametrize(
    "cls,kwargs,match",
    [
        (optim.SGD, dict(lr=-0.1), "invalid learning rate -0.1"),
        (optim.SGD, dict(momentum=-1), "invalid momentum value -1"),
        (optim.SGD, dict(nesterov=True), "Nesterov"),
        (optim.Adam, dict(lr=-1e-3), "invalid learning rate -0.001"),
        (optim.Adam, dict(betas=(1.0, 0.999)), "beta parameter at index 0: 1.0|invalid beta parameter at index 0 1.0"),
        (optim.AdamW, dict(betas=(0.9, -0.1)), "index 1 -0.1"),
        (optim.AdamW, dict(eps=-1e-8), "invalid epsilon value -1e-08"),
        (optim.AdamW, dict(weight_decay=-0.5), "invalid weight_decay value -0.5"),
    ],
)
def test_bad_hyper_parameters_raise_value_error_naming_the_value(cls, kwargs, match):
    with pytest.raises(ValueError, match=match):
        cls([nn.Parameter(ampcore.zeros(2))], **kwargs)


def test_param_groups_validation():
    p, q = nn.Parameter(ampcore.zeros(2)), nn.Parameter(ampcore.zeros(3))
    with pytest.raises(ValueError, match="empty parameter list"):
        optim.SGD([], lr=0.1)
    with pytest.raises(ValueError, match="more than one parameter group"):
        optim.SGD([{"params": [p]}, {"params": [p, q]}], lr=0.1)
    with pytest.raises(TypeError, match="iterable"):
        optim.SGD(p, lr=0.1)
    with pytest.raises(ValueError, match="leaf"):
        optim.SGD([p * 2.0], lr=0.1)
    opt = optim.SGD([p], lr=0.1)
    opt.add_param_group({"params": q, "lr": 0.5})
    assert [g["lr"] for g in opt.param_groups] == [0.1, 0.5] and opt.param_groups[1]["momentum"] == 0.0


def test_step_skips_parameters_without_gradients_and_supports_a_closure():
    p, q = nn.Parameter(ampcore.ones(2)), nn.Parameter(ampcore.ones(2))
    opt = optim.Adam([p, q], lr=0.1)

    def closure():
        opt.zero_grad()
        loss = (p * p).sum()
        loss.backward()
        return loss

    loss = opt.step(closure)
    assert loss.item() == 2.0
    assert q not in opt.state and (q.numpy() == 1).all()
    np.testing.assert_allclose(p.numpy(), [0.9, 0.9], rtol=1e-6)


def test_a_bad_gradient_raises_before_anything_changes():
    p, q = nn.Parameter(ampcore.ones(2)), nn.Parameter(ampcore.ones(3))
    opt = optim.AdamW([{"params": [p]}, {"params": [q]}], lr=0.1)
    p.grad, q.grad = ampcore.ones(2), ampcore.ones(4)
    with pytest.raises(ValueError, match=r"shape \(4,\) does not match its parameter of shape \(3,\)"):
        opt.step()
    assert (p.numpy() == 1).all() and opt.state == {}


def bits(opt):
    """Every parameter and every state_dict value of ``opt`` as (dtype, bytes) or the plain value."""

    def as_bits(v):
        return (v.dtype, v.numpy().tobytes()) if isinstance(v, ampcore.Tensor) else v

    params = [as_bits(p) for g in opt.param_groups for p in g["params"]]
    return params, {i: {k: as_bits(v) for k, v in st.items()} for i, st in opt.state_dict()["state"].items()}


def fail_then_recover(register_fake, cls, kwargs, kernel, layout, warmup):
    """``cls`` over a cpu and a fake-backend parameter (``layout``: one group or a group each); after
    ``warmup`` good steps, make the fake's next ``kernel`` call fail.  Asserts the failing step changes
    no bit of any parameter or state and that the next step equals that of a twin that never failed."""
    fake = register_fake()
    rng = np.random.default_rng(7)
    grads = [(rng.standard_normal(3), rng.standard_normal(2)) for _ in range(warmup + 1)]

    def make():
        a, b = nn.Parameter(ampcore.tensor([1.0, 2.0, 3.0])), nn.Parameter(ampcore.tensor([4.0, 5.0], device=fake.name))
        groups = [{"params": [a, b]}] if layout == "one group" else [{"params": [a]}, {"params": [b], "lr": 0.05}]
        return a, b, cls(groups, **kwargs)

    def step(a, b, opt, g):
        a.grad, b.grad = (
            ampcore.tensor(g[0], dtype=dt.float32),
            ampcore.tensor(g[1], dtype=dt.float32, device=fake.name),
        )
        opt.step()

    (a, b, opt), (a2, b2, twin) = make(), make()
    for g in grads[:-1]:
        step(a, b, opt, g)
        step(a2, b2, twin, g)
    before = bits(opt)
    fake.fail_on = (kernel, fake.calls.get(kernel, 0) + 1)
    with pytest.raises(RuntimeError, match=f"injected failure in call .* of kernel {kernel!r}"):
        step(a, b, opt, grads[-1])
    assert bits(opt) == before
    fake.fail_on = None
    step(a, b, opt, grads[-1])
    step(a2, b2, twin, grads[-1])
    assert bits(opt) == bits(twin) != before


@pytest.mark.parametrize("warmup", [0, 2])
@pytest.mark.parametrize(
    "cls,kwargs,kernel",
    [
        (optim.SGD, dict(lr=0.1, momentum=0.9), "sub"),
        (optim.SGD, dict(lr=0.1, momentum=0.9, nesterov=True, weight_decay=0.1), "sub"),
        (optim.Adam, dict(lr=0.1), "sqrt"),
        (optim.AdamW, dict(lr=0.1, amsgrad=True), "maximum"),
    ],
)
def test_a_failing_second_group_leaves_the_first_group_and_all_state_unchanged(
    register_fake, cls, kwargs, kernel, warmup
):
    fail_then_recover(register_fake, cls, kwargs, kernel, "a group each", warmup)


@pytest.mark.parametrize("layout", ["one group", "a group each"])
@pytest.mark.parametrize("cls", [optim.Adam, optim.AdamW])
def test_a_failing_step_leaves_the_in_place_fused_update_uncommitted(register_fake, cls, layout):
    assert ampcore.get_backend("cpu").kernels.has("adamw_step")  # the cpu parameter takes the in-place path
    fail_then_recover(register_fake, cls, dict(lr=0.1, weight_decay=0.1), "sqrt", layout, warmup=2)


def test_the_step_never_writes_through_an_array_shared_with_another_tensor():
    src = ampcore.ones(4)
    p = nn.Parameter(ampcore.zeros(4))
    with ampcore.no_grad():
        p.copy_(src)  # may share src's array
    alias = nn.Parameter(src)  # shares src's array too
    opt = optim.AdamW([p, alias], lr=0.1)
    for _ in range(2):
        p.grad, alias.grad = ampcore.ones(4), ampcore.ones(4)
        opt.step()
    np.testing.assert_array_equal(src.numpy(), np.ones(4))
    assert (p.numpy() < 1).all() and (alias.numpy() < 1).all()


def test_zero_grad_sets_to_none_or_zero():
    p = nn.Parameter(ampcore.ones(2))
    opt = optim.SGD([p], lr=0.1)
    p.grad = ampcore.ones(2)
    opt.zero_grad(set_to_none=False)
    assert p.grad is not None and not p.grad.numpy().any()
    opt.zero_grad()
    assert p.grad is None


# --------------------------------------------------------------------------- end to end
def test_small_mlp_learns_a_synthetic_classification_task_with_adamw():
    rng = np.random.default_rng(0)
    centers = rng.standard_normal((4, 16)) * 1.5
    labels = rng.integers(0, 4, 512)
    x = ampcore.tensor((centers[labels] + rng.standard_normal((512, 16))).astype(np.float32))
    y = ampcore.tensor(labels)
    ampcore.manual_seed(0)
    model = nn.Sequential(nn.Linear(16, 64), nn.ReLU(), nn.Linear(64, 4))
    opt = optim.AdamW(model.parameters(), lr=1e-2)
    loss_fn = nn.CrossEntropyLoss()
    for _ in range(60):
        opt.zero_grad()
        loss = loss_fn(model(x), y)
        loss.backward()
        opt.step()
    accuracy = (model(x).argmax(1).numpy() == labels).mean()
    assert accuracy > 0.9, accuracy
