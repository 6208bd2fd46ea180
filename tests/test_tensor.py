import numpy as np
import pytest

import ampcore
from ampcore import dtypes as dt


def test_python_data_gets_torch_default_dtypes():
    assert ampcore.tensor([1.0, 2.0]).dtype is dt.float32
    assert ampcore.tensor([1, 2]).dtype is dt.int64
    assert ampcore.tensor([True]).dtype is dt.bool_
    assert ampcore.tensor(np.zeros(3)).dtype is dt.float64  # NumPy arrays keep their dtype
    assert ampcore.from_numpy(np.zeros(3, np.float16)).dtype is dt.float16


def test_creation_functions_shapes_and_values():
    assert ampcore.zeros(2, 3).shape == (2, 3)
    assert ampcore.ones((4,), dtype="bfloat16").dtype is dt.bfloat16
    np.testing.assert_array_equal(ampcore.full((2,), 7.0).numpy(), [7.0, 7.0])
    np.testing.assert_array_equal(ampcore.arange(5).numpy(), np.arange(5))
    assert ampcore.arange(0, 1, 0.25).dtype is dt.float32
    assert ampcore.zeros_like(ampcore.ones(3, dtype="float16")).dtype is dt.float16


def test_seeded_random_is_reproducible_and_distributed():
    a = ampcore.randn(1000, generator=ampcore.Generator(7)).numpy()
    b = ampcore.randn(1000, generator=ampcore.Generator(7)).numpy()
    np.testing.assert_array_equal(a, b)
    assert abs(a.mean()) < 0.15 and 0.85 < a.std() < 1.15
    u = ampcore.rand(1000, generator=ampcore.Generator(1)).numpy()
    assert u.min() >= 0.0 and u.max() < 1.0
    ampcore.manual_seed(3)
    c = ampcore.rand(4).numpy()
    ampcore.manual_seed(3)
    np.testing.assert_array_equal(c, ampcore.rand(4).numpy())


def test_item_numpy_tolist():
    t = ampcore.tensor([[1.5, 2.0]])
    assert t[0, 1].item() == 2.0
    assert t.tolist() == [[1.5, 2.0]]
    assert isinstance(ampcore.tensor(3.0, dtype="bfloat16").item(), float)
    with pytest.raises(ValueError, match=r"one element.*\(1, 2\)"):
        t.item()


def test_to_dtype_and_nbytes_of_low_precision():
    t = ampcore.ones(10, 10)
    assert t.nbytes == 400
    assert t.to("bfloat16").nbytes == 200
    assert t.half().nbytes == 200
    assert t.to(dtype=dt.float64).dtype is dt.float64


def test_operators_promote_like_torch():
    h = ampcore.ones(2, dtype="float16")
    f = ampcore.ones(2)
    assert (h + f).dtype is dt.float32
    assert (h * 2.0).dtype is dt.float16  # Python scalars are weak
    assert (ampcore.tensor([1, 2]) * 2.5).dtype is dt.float32
    assert (ampcore.tensor([1, 2]) / 2).dtype is dt.float32
    assert (ampcore.tensor([1, 2]) + 1).dtype is dt.int64
    assert (f > 0).dtype is dt.bool_
    np.testing.assert_allclose((2.0 - f).numpy(), [1.0, 1.0])
    np.testing.assert_allclose((2.0 ** ampcore.tensor([1.0, 3.0])).numpy(), [2.0, 8.0])


def test_broadcast_mismatch_names_both_shapes():
    with pytest.raises(ValueError, match=r"\(2, 3\) and \(4,\)"):
        ampcore.ones(2, 3) + ampcore.ones(4)


def test_matmul_mismatch_names_both_shapes():
    with pytest.raises(ValueError, match=r"\(2, 3\) and \(4, 5\)"):
        ampcore.ones(2, 3) @ ampcore.ones(4, 5)


def test_matmul_handles_vectors_and_batches_like_numpy():
    rng = np.random.default_rng(0)
    for sa, sb in [((3,), (3,)), ((2, 3), (3,)), ((3,), (3, 4)), ((5, 2, 3), (3, 4)), ((1, 2, 3), (6, 3, 4))]:
        a, b = rng.standard_normal(sa), rng.standard_normal(sb)
        out = ampcore.tensor(a) @ ampcore.tensor(b)
        np.testing.assert_allclose(out.numpy(), a @ b, rtol=1e-12)


def test_indexing_matches_numpy():
    a = np.arange(60.0).reshape(3, 4, 5)
    t = ampcore.tensor(a)
    for idx in [
        1,
        (slice(None), 2),
        (Ellipsis, 1),
        (None, 0),
        (slice(1, None), slice(None, None, -2)),
        (-1, slice(0, 4, 3), 2),
        (slice(10, 20),),
    ]:
        np.testing.assert_array_equal(t[idx].numpy(), a[idx])
    np.testing.assert_array_equal(t[ampcore.tensor([2, 0, 2])].numpy(), a[[2, 0, 2]])
    np.testing.assert_array_equal(t[:, [3, 1]].numpy(), a[:, [3, 1]])
    with pytest.raises(IndexError, match="out of bounds"):
        t[3]
    with pytest.raises(IndexError, match="too many indices"):
        t[0, 0, 0, 0]


def test_reshape_permute_and_friends():
    t = ampcore.arange(24).reshape(2, 3, 4)
    assert t.reshape(-1, 4).shape == (6, 4)
    assert t.permute(2, 0, 1).shape == (4, 2, 3)
    assert t.transpose(0, 2).shape == (4, 3, 2)
    assert t.unsqueeze(1).shape == (2, 1, 3, 4)
    assert t.unsqueeze(1).squeeze(1).shape == (2, 3, 4)
    assert t.flatten(1).shape == (2, 12)
    assert ampcore.ones(3, 1).expand(3, 4).shape == (3, 4)
    with pytest.raises(ValueError, match=r"shape \(5, -1\) is invalid for a tensor of shape \(2, 3, 4\)"):
        t.reshape(5, -1)
    with pytest.raises(ValueError, match="permutation"):
        t.permute(0, 0, 1)


def test_reductions():
    a = np.random.default_rng(1).standard_normal((3, 4)).astype(np.float32)
    t = ampcore.tensor(a)
    np.testing.assert_allclose(t.sum().item(), a.sum(), rtol=1e-6)
    np.testing.assert_allclose(t.mean(1).numpy(), a.mean(1), rtol=1e-6)
    np.testing.assert_allclose(t.var(0).numpy(), a.var(0, ddof=1), rtol=1e-5)
    values, indices = t.max(1)
    np.testing.assert_array_equal(values.numpy(), a.max(1))
    np.testing.assert_array_equal(indices.numpy(), a.argmax(1))
    np.testing.assert_array_equal(t.min(0).indices.numpy(), a.argmin(0))
    np.testing.assert_allclose(t.cumsum(1).numpy(), a.cumsum(1), rtol=1e-6)
    assert ampcore.tensor([True, True, False]).sum().item() == 2
    with pytest.raises(TypeError, match="int64"):
        ampcore.arange(3).mean()
    with pytest.raises(IndexError, match="dimension 2"):
        t.sum(2)


def test_in_place_methods_rebind_and_refuse_on_graph_leaves():
    t = ampcore.zeros(2, 3)
    t[0, 1:] = 5.0
    t.add_(1.0)
    np.testing.assert_array_equal(t.numpy(), [[1, 6, 6], [1, 1, 1]])
    t.copy_(ampcore.tensor([1.0, 2.0, 3.0]))
    np.testing.assert_array_equal(t.numpy(), [[1, 2, 3], [1, 2, 3]])
    w = ampcore.ones(2, requires_grad=True)
    with pytest.raises(RuntimeError, match="no_grad"):
        w.mul_(2.0)
    with ampcore.no_grad():
        w.mul_(2.0)
    np.testing.assert_array_equal(w.numpy(), [2.0, 2.0])


def test_clone_owns_its_storage():
    t = ampcore.ones(3)
    c = t.clone()
    c[0] = 9.0
    assert t.numpy()[0] == 1.0


def test_only_float_tensors_require_grad():
    with pytest.raises(TypeError, match="int64"):
        ampcore.tensor([1, 2], requires_grad=True)


def test_repr_shows_dtype_and_device():
    r = repr(ampcore.ones(2, dtype="bfloat16"))
    assert "bfloat16" in r and "device='cpu'" in r


def test_truth_value_of_many_elements_is_ambiguous():
    with pytest.raises(ValueError, match="ambiguous"):
        bool(ampcore.ones(2))


def test_deepcopy_copies_storage_and_keeps_subclass():
    import copy

    model = ampcore.nn.Linear(3, 2)
    model.weight.grad = ampcore.ones(2, 3)
    twin = copy.deepcopy(model)
    assert type(twin.weight) is type(model.weight) and twin.weight.requires_grad
    assert twin.weight._data is not model.weight._data
    np.testing.assert_array_equal(twin.weight.numpy(), model.weight.numpy())
    np.testing.assert_array_equal(twin.weight.grad.numpy(), 1.0)
    state = copy.deepcopy(model.state_dict())
    with ampcore.no_grad():
        model.weight.fill_(0.0)
    assert np.any(state["weight"].numpy() != 0.0)


def test_bool_masks_invert_with_tilde_and_refuse_negation():
    mask = ampcore.tensor([True, False])
    np.testing.assert_array_equal((~mask).numpy(), [False, True])
    with pytest.raises(TypeError, match="~"):
        _ = -mask


def test_where_with_two_scalars_uses_default_dtypes():
    out = ampcore.where(ampcore.tensor([True, False]), 1.0, 2.0)
    assert out.dtype is dt.float32
    np.testing.assert_array_equal(out.numpy(), [1.0, 2.0])


@pytest.mark.parametrize("d", ["float16", "bfloat16"])
def test_low_precision_mean_does_not_overflow_in_the_sum(d):
    x = ampcore.full((100_000,), 2.0, dtype=d)  # the float16 sum (200000) is beyond 65504
    m = x.mean()
    assert m.dtype.name == d and m.item() == 2.0
    x.requires_grad_()
    x.mean().backward()
    assert x.grad.dtype.name == d


def test_tensors_and_parameters_pickle_with_values_dtype_device_and_requires_grad():
    import pickle

    from ampcore import nn

    for d in ("float32", "bfloat16", "float16", "int64", "bool"):
        t = ampcore.tensor([1.5, -2.0, 0.0], dtype=d)
        back = pickle.loads(pickle.dumps(t))
        assert type(back) is ampcore.Tensor and back.dtype == t.dtype and back.device == t.device
        assert back.numpy().tobytes() == t.numpy().tobytes()
    p = nn.Parameter(ampcore.randn(2, 3))
    p.tag = "mine"
    back = pickle.loads(pickle.dumps(p))
    assert isinstance(back, nn.Parameter) and back.requires_grad and back.tag == "mine"
    assert back.numpy().tobytes() == p.numpy().tobytes()
    layer = nn.Linear(3, 2)
    fresh = nn.Linear(3, 2)
    fresh.load_state_dict(pickle.loads(pickle.dumps(layer.state_dict())))
    assert fresh.weight.numpy().tobytes() == layer.weight.numpy().tobytes()


def test_a_tensor_with_autograd_history_is_not_pickled():
    import pickle

    y = ampcore.ones(2, requires_grad=True) * 2
    with pytest.raises(RuntimeError, match=r"only leaf tensors can be pickled.*t\.detach\(\)"):
        pickle.dumps(y)
    assert pickle.loads(pickle.dumps(y.detach())).numpy().tolist() == [2.0, 2.0]


# --------------------------------------------------------------------------- __format__
@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16", "float64"])
def test_format_spec_formats_a_one_element_tensors_value(dtype):
    loss = ampcore.tensor(2.718281828, dtype=dtype)
    assert f"{loss:.2f}" == f"{loss.item():.2f}" == "2.72"
    assert f"{ampcore.tensor([[1.5]], dtype=dtype):>6}" == "   1.5"
    assert f"{ampcore.tensor(7):04d}" == "0007"


def test_format_without_a_spec_is_str_and_a_spec_on_many_elements_raises():
    t = ampcore.tensor([1.0, 2.0])
    assert f"{t}" == str(t) and format(ampcore.tensor(3.0)) == str(ampcore.tensor(3.0))
    with pytest.raises(TypeError, match=r"unsupported format string '.4f' passed to Tensor.__format__.*shape \(2,\)"):
        f"{t:.4f}"


# --------------------------------------------------------------------------- to(), pin_memory, .cuda()/.opencl()
def test_to_accepts_non_blocking_and_copy():
    x = ampcore.tensor([1.0, 2.0], requires_grad=True)
    assert x.to("cpu", non_blocking=True) is x and x.to(ampcore.float32, non_blocking=False) is x
    c = x.to("cpu", copy=True)
    assert c is not x and c.tolist() == [1.0, 2.0]
    c.sum().backward()  # the copy is differentiable, as torch's
    assert x.grad.tolist() == [1.0, 1.0]
    assert x.to(ampcore.float16, copy=True).dtype is ampcore.float16


def test_pin_memory_is_self_on_cpu_and_nothing_is_page_locked():
    x = ampcore.ones(3)
    assert x.pin_memory() is x and x.is_pinned() is False


def test_pin_memory_of_a_device_tensor_raises(register_fake):
    fake = register_fake()
    with pytest.raises(RuntimeError, match=f"cannot pin a tensor on '{fake.name}(:0)?': only cpu tensors"):
        ampcore.ones(2, device=fake.name).pin_memory()


@pytest.mark.parametrize("method", ["cuda", "opencl"])
def test_cuda_and_opencl_name_a_missing_backend(method, monkeypatch):
    from ampcore.plugins import UnknownBackendError, registry

    def missing(device):
        raise UnknownBackendError(method, ["cpu"])

    x = ampcore.ones(2)
    monkeypatch.setattr(registry, "resolve", missing)
    with pytest.raises(ampcore.BackendUnavailableError, match=f"backend '{method}' is not installed: pip install"):
        getattr(x, method)()


def test_cuda_rejects_a_device_of_another_type():
    pytest.importorskip("ampcore_cuda")
    with pytest.raises(ValueError, match=r"\.cuda\(\) got a device of another type: 'cpu'"):
        ampcore.ones(2).cuda("cpu")


@pytest.mark.parametrize(
    "values, body",
    [  # each body is what torch 2.x prints for torch.tensor(values)
        ([0.775, 1.0848], "tensor([0.7750, 1.0848]"),
        ([1.0, 2.0], "tensor([1., 2.]"),
        ([1e-5, 1.0], "tensor([1.0000e-05, 1.0000e+00]"),
        ([float("nan"), 1.5], "tensor([   nan, 1.5000]"),
        ([float("inf"), -2.0, 3.25], "tensor([    inf, -2.0000,  3.2500]"),
        ([[1.5, -2.25], [3.0, 100.125]], "tensor([[  1.5000,  -2.2500],\n        [  3.0000, 100.1250]]"),
        (0.775, "tensor(0.7750"),
        ([1, 2, 30], "tensor([ 1,  2, 30]"),
    ],
)
def test_repr_formats_numbers_as_torch_does(values, body):
    text = repr(ampcore.tensor(values))
    assert text.startswith(body + ", dtype="), text
