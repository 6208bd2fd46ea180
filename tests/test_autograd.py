import numpy as np
import pytest

import ampcore
from ampcore import dtypes as dt


def test_gradients_accumulate_across_backward_calls():
    x = ampcore.tensor([1.0, 2.0], requires_grad=True)
    (x * x).sum().backward()
    (x * 3.0).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), [5.0, 7.0])


def test_diamond_graph_sums_both_paths():
    x = ampcore.tensor(3.0, requires_grad=True)
    y = x * 2.0
    z = y * y + y  # dz/dx = (2y + 1) * 2
    z.backward()
    assert x.grad.item() == pytest.approx((2 * 6 + 1) * 2)


def test_second_backward_without_retain_graph_raises_clearly():
    x = ampcore.tensor([1.0], requires_grad=True)
    y = (x.exp() * 2.0).sum()
    y.backward()
    with pytest.raises(RuntimeError, match="retain_graph=True"):
        y.backward()
    z = (x.exp() * 2.0).sum()
    z.backward(retain_graph=True)
    z.backward()


def test_backward_on_non_scalar_needs_a_gradient():
    x = ampcore.ones(3, requires_grad=True)
    with pytest.raises(RuntimeError, match=r"scalar output, got shape \(3,\)"):
        (x * 2.0).backward()
    (x * 2.0).backward(ampcore.ones(3))
    np.testing.assert_array_equal(x.grad.numpy(), [2.0, 2.0, 2.0])


def test_backward_without_grad_raises():
    with pytest.raises(RuntimeError, match="requires_grad"):
        ampcore.ones(2).sum().backward()


def test_no_grad_records_nothing_and_restores():
    x = ampcore.ones(2, requires_grad=True)
    with ampcore.no_grad():
        y = x * 2.0
        assert not ampcore.is_grad_enabled()
        with ampcore.enable_grad():
            assert (x * 2.0).requires_grad
    assert ampcore.is_grad_enabled()
    assert y.grad_fn is None and not y.requires_grad


def test_no_grad_as_decorator():
    @ampcore.no_grad()
    def f(t):
        return t * 2.0

    assert not f(ampcore.ones(1, requires_grad=True)).requires_grad


def test_detach_cuts_the_graph():
    x = ampcore.ones(2, requires_grad=True)
    d = (x * 2.0).detach()
    assert d.grad_fn is None and not d.requires_grad


def test_leaf_gradients_are_separate_arrays():
    # a + b sends the same upstream array to both leaves; each leaf must own its .grad
    # (the scaler unscales gradients in place).
    a = ampcore.ones(3, requires_grad=True)
    b = ampcore.ones(3, requires_grad=True)
    (a + b).sum().backward()
    assert a.grad._data is not b.grad._data
    a.grad._data *= 2.0
    np.testing.assert_array_equal(b.grad.numpy(), [1.0, 1.0, 1.0])


def test_float32_parameter_gets_float32_grad_through_low_precision_compute():
    w = ampcore.randn(4, 3, requires_grad=True)
    x = ampcore.randn(2, 4).to("bfloat16")
    y = x @ w.to("bfloat16")
    assert y.dtype is dt.bfloat16
    y.float().sum().backward()
    assert w.grad.dtype is dt.float32
    expected = x.float().numpy().T @ np.ones((2, 3), np.float32)
    np.testing.assert_allclose(w.grad.numpy(), expected, rtol=2**-7, atol=2**-7)


def test_integer_outputs_are_not_differentiable():
    x = ampcore.randn(3, 4, requires_grad=True)
    assert not x.argmax(1).requires_grad
    assert not (x > 0).requires_grad


def test_in_place_rebase_keeps_earlier_consumers_gradients():
    x = ampcore.tensor([-1.0, 2.0], requires_grad=True)
    y = x * 3.0
    z = y * y  # consumes y before the in-place op: dz/dx = 18 x
    ampcore.nn.functional.relu(y, inplace=True)
    (z.sum() + y.sum()).backward()  # y is now relu(3x): d/dx = 3 * (x > 0)
    np.testing.assert_allclose(x.grad.numpy(), [18 * -1.0 + 0.0, 18 * 2.0 + 3.0])


def test_add_and_mul_in_place_are_differentiable_for_non_leaves():
    x = ampcore.tensor([1.0, 2.0], requires_grad=True)
    y = x * 2.0
    y.mul_(x).add_(1.0)  # y = 2x^2 + 1
    y.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), [4.0, 8.0])
    with pytest.raises(RuntimeError, match="leaf tensor"):
        x.add_(1.0)


def test_the_graph_keeps_only_what_ops_save_not_every_intermediate_tensor():
    """An intermediate no op saved is freed once the caller drops it (torch's graph does the same).

    ``sum`` saves only a shape and ``mul`` by a constant nothing of its input,
    so ``h`` must not be kept alive by the graph: keeping it held every
    activation of a model until backward.
    """
    import gc
    import weakref

    x = ampcore.tensor(np.ones((8, 8), np.float32), requires_grad=True)
    h = x * 3.0
    loss = (h * 2.0).sum()
    ref = weakref.ref(h)
    del h
    gc.collect()
    assert ref() is None
    loss.backward()
    np.testing.assert_array_equal(x.grad.numpy(), np.full((8, 8), 6.0, np.float32))


def test_detect_overflow_keeps_the_inputs_it_reports():
    x = ampcore.tensor(np.ones((4,), np.float32), requires_grad=True)
    with ampcore.amp.detect_overflow():
        h = x * 3.0
        y = h * 2.0
    assert y.grad_fn.inputs[0] is h
    z = h * 2.0
    assert z.grad_fn.inputs == (None, None)


def test_saved_bytes_counts_each_saved_buffer_once_and_leaves_out_the_excluded():
    from ampcore.autograd import saved_bytes

    w = ampcore.tensor(np.ones((8, 8), np.float32), requires_grad=True)
    x = ampcore.tensor(np.ones((4, 8), np.float32), requires_grad=True)
    h = (x @ w).relu()  # matmul saves x and w; relu saves its output h
    loss = (h * h).sum()  # mul saves h twice: one buffer, counted once
    assert saved_bytes(loss) == 4 * (4 * 8 + 8 * 8 + 4 * 8)
    assert saved_bytes(loss, exclude=[w]) == 4 * (4 * 8 + 4 * 8)
    assert saved_bytes(ampcore.tensor(np.ones(3, np.float32))) == 0  # no graph


def test_saved_bytes_sees_what_a_custom_function_saves():
    from ampcore.autograd import saved_bytes

    class Square(ampcore.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x * x

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            return 2 * x * g

    x = ampcore.tensor(np.ones(10, np.float32), requires_grad=True)
    assert saved_bytes(Square.apply(x).sum(), exclude=[]) == 40
    assert saved_bytes(Square.apply(x).sum(), exclude=[x]) == 0


def test_grad_mode_is_per_thread_and_on_in_a_new_thread() -> None:
    """grad_mode sets its default on each thread (the op path reads it without a fallback)."""
    import threading

    import ampcore

    seen: list[bool] = []
    with ampcore.no_grad():
        worker = threading.Thread(target=lambda: seen.append(ampcore.is_grad_enabled()))
        worker.start()
        worker.join()
        assert not ampcore.is_grad_enabled()
    assert seen == [True]
