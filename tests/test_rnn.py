"""nn.RNN, nn.LSTM, nn.GRU, their cells and nn.utils.rnn (issue 37): a torch state dict loads, and the outputs,
final states and gradients are torch's in float32 to float32 precision; packed sequences as torch packs them;
autocast as torch's on the CPU, and the CUDA lists' float16 on a device autocast with them."""

from __future__ import annotations

import numpy as np
import pytest

import ampcore
import ampcore.nn as nn
from ampcore.nn.utils import rnn as U

torch = pytest.importorskip("torch")
TU = torch.nn.utils.rnn
RNG = np.random.default_rng(2)
# float32 throughout: one rounding is 2**-24 of a value; five steps of two layers, each a few roundings deep,
# stay within 2**-19 of torch's (measured: 3e-7 at worst); a wrong gate order or bias is off by 1e-2 or more.
TOL = 2.0**-19


def _pair(name, **kwargs):
    theirs = getattr(torch.nn, name)(**kwargs)
    ours = getattr(nn, name)(**kwargs)
    assert [k for k, _ in ours.state_dict().items()] == list(theirs.state_dict())
    ours.load_state_dict({k: ampcore.tensor(v.detach().numpy()) for k, v in theirs.state_dict().items()})
    return ours, theirs


def _states(h):
    return h if isinstance(h, tuple) else (h,)


CONFIGS = [
    {},
    {"num_layers": 2, "bidirectional": True},
    {"batch_first": True},
    {"bias": False},
    {"num_layers": 3},
]


@pytest.mark.parametrize("config", CONFIGS, ids=lambda c: ",".join(f"{k}={v}" for k, v in c.items()) or "default")
@pytest.mark.parametrize("name", ["RNN", "LSTM", "GRU"])
def test_outputs_states_and_gradients_are_torchs(name, config):
    ours, theirs = _pair(name, input_size=4, hidden_size=6, **config)
    x = RNG.standard_normal((5, 3, 4)).astype(np.float32)
    ax, tx = ampcore.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    (ao, ah), (to, th) = ours(ax), theirs(tx)
    np.testing.assert_allclose(ao.detach().numpy(), to.detach().numpy(), rtol=TOL, atol=TOL)
    for a, t in zip(_states(ah), _states(th)):
        np.testing.assert_allclose(a.detach().numpy(), t.detach().numpy(), rtol=TOL, atol=TOL)
    w = RNG.standard_normal(to.shape).astype(np.float32)
    ((ao * ampcore.tensor(w)).sum() + sum((s * s).sum() for s in _states(ah))).backward()
    ((to * torch.tensor(w)).sum() + sum((s * s).sum() for s in _states(th))).backward()
    np.testing.assert_allclose(ax.grad.numpy(), tx.grad.numpy(), rtol=TOL, atol=TOL)
    grads = dict(theirs.named_parameters())
    for n, p in ours.named_parameters():
        np.testing.assert_allclose(p.grad.numpy(), grads[n].grad.numpy(), rtol=TOL, atol=4 * TOL, err_msg=n)


@pytest.mark.parametrize("name", ["RNN", "LSTM", "GRU"])
def test_initial_state_unbatched_input_and_relu(name):
    kwargs = {"nonlinearity": "relu"} if name == "RNN" else {}
    ours, theirs = _pair(name, input_size=4, hidden_size=6, num_layers=2, **kwargs)
    x = RNG.standard_normal((5, 4)).astype(np.float32)
    h0 = [RNG.standard_normal((2, 6)).astype(np.float32) for _ in range(2 if name == "LSTM" else 1)]
    ah0 = tuple(ampcore.tensor(h) for h in h0) if name == "LSTM" else ampcore.tensor(h0[0])
    th0 = tuple(torch.tensor(h) for h in h0) if name == "LSTM" else torch.tensor(h0[0])
    (ao, ah), (to, th) = ours(ampcore.tensor(x), ah0), theirs(torch.tensor(x), th0)
    np.testing.assert_allclose(ao.detach().numpy(), to.detach().numpy(), rtol=TOL, atol=TOL)
    for a, t in zip(_states(ah), _states(th)):
        np.testing.assert_allclose(a.detach().numpy(), t.detach().numpy(), rtol=TOL, atol=TOL)


def test_lstm_with_projections():
    ours, theirs = _pair("LSTM", input_size=4, hidden_size=6, proj_size=3, num_layers=2, bidirectional=True)
    x = RNG.standard_normal((5, 2, 4)).astype(np.float32)
    (ao, (ah, ac)), (to, (th, tc)) = ours(ampcore.tensor(x)), theirs(torch.tensor(x))
    assert ao.shape == tuple(to.shape) == (5, 2, 6) and ah.shape == (4, 2, 3) and ac.shape == (4, 2, 6)
    for a, t in ((ao, to), (ah, th), (ac, tc)):
        np.testing.assert_allclose(a.detach().numpy(), t.detach().numpy(), rtol=TOL, atol=TOL)


@pytest.mark.parametrize("name", ["RNNCell", "LSTMCell", "GRUCell"])
def test_cells_are_torchs(name):
    ours, theirs = _pair(name, input_size=4, hidden_size=6)
    x = RNG.standard_normal((3, 4)).astype(np.float32)
    h = RNG.standard_normal((3, 6)).astype(np.float32)
    state = (ampcore.tensor(h), ampcore.tensor(h * 0.5)) if name == "LSTMCell" else ampcore.tensor(h)
    tstate = (torch.tensor(h), torch.tensor(h * 0.5)) if name == "LSTMCell" else torch.tensor(h)
    for a, t in (
        (ours(ampcore.tensor(x), state), theirs(torch.tensor(x), tstate)),
        (ours(ampcore.tensor(x[0])), theirs(torch.tensor(x[0]))),
    ):
        for ai, ti in zip(_states(a), _states(t)):
            np.testing.assert_allclose(ai.detach().numpy(), ti.detach().numpy(), rtol=TOL, atol=TOL)


LENGTHS = [3, 5, 1, 4]


def test_packing_is_torchs():
    x = RNG.standard_normal((5, 4, 3)).astype(np.float32)
    for enforce in (False,):
        tp = TU.pack_padded_sequence(torch.tensor(x), LENGTHS, enforce_sorted=enforce)
        ap = U.pack_padded_sequence(ampcore.tensor(x), LENGTHS, enforce_sorted=enforce)
        np.testing.assert_array_equal(ap.data.numpy(), tp.data.numpy())
        assert ap.batch_sizes.tolist() == tp.batch_sizes.tolist()
        assert ap.sorted_indices.tolist() == tp.sorted_indices.tolist()
        tpad, tl = TU.pad_packed_sequence(tp, batch_first=True, padding_value=-1.0, total_length=6)
        apad, al = U.pad_packed_sequence(ap, batch_first=True, padding_value=-1.0, total_length=6)
        np.testing.assert_array_equal(apad.numpy(), tpad.numpy())
        assert al.tolist() == tl.tolist()
    seqs = [RNG.standard_normal((n, 2)).astype(np.float32) for n in (4, 2, 3)]
    for side in ("right", "left"):
        np.testing.assert_array_equal(
            U.pad_sequence([ampcore.tensor(s) for s in seqs], True, 9.0, side).numpy(),
            TU.pad_sequence([torch.tensor(s) for s in seqs], True, 9.0, side).numpy(),
        )
    packed = U.pack_sequence([ampcore.tensor(s) for s in seqs], enforce_sorted=False)
    tpacked = TU.pack_sequence([torch.tensor(s) for s in seqs], enforce_sorted=False)
    np.testing.assert_array_equal(packed.data.numpy(), tpacked.data.numpy())
    assert [u.shape for u in U.unpack_sequence(packed)] == [(4, 2), (2, 2), (3, 2)]
    with pytest.raises(ValueError, match="sorted longest first"):
        U.pack_padded_sequence(ampcore.tensor(x), LENGTHS)


@pytest.mark.parametrize("name", ["RNN", "LSTM", "GRU"])
def test_packed_sequences_run_as_torchs(name):
    ours, theirs = _pair(name, input_size=3, hidden_size=5, num_layers=2, bidirectional=True)
    x = RNG.standard_normal((5, 4, 3)).astype(np.float32)
    ax, tx = ampcore.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    ao, ah = ours(U.pack_padded_sequence(ax, LENGTHS, enforce_sorted=False))
    to, th = theirs(TU.pack_padded_sequence(tx, LENGTHS, enforce_sorted=False))
    apad, _ = U.pad_packed_sequence(ao)
    tpad, _ = TU.pad_packed_sequence(to)
    np.testing.assert_allclose(apad.detach().numpy(), tpad.detach().numpy(), rtol=TOL, atol=TOL)
    for a, t in zip(_states(ah), _states(th)):
        np.testing.assert_allclose(a.detach().numpy(), t.detach().numpy(), rtol=TOL, atol=TOL)
    (apad.sum() + sum((s * s).sum() for s in _states(ah))).backward()
    (tpad.sum() + sum((s * s).sum() for s in _states(th))).backward()
    np.testing.assert_allclose(ax.grad.numpy(), tx.grad.numpy(), rtol=TOL, atol=TOL)


@pytest.mark.parametrize("name", ["RNN", "LSTM", "GRU", "RNNCell", "LSTMCell", "GRUCell"])
def test_cpu_autocast_gives_torchs_dtypes(name):
    """torch's CPU autocast: an LSTM layer is one lower-precision op (mkldnn_rnn_layer), RNN steps lower-precision
    cells; GRU, LSTMCell and GRUCell come out float32 (their float32 state promotes the gate arithmetic)."""
    cell = name.endswith("Cell")
    ours, theirs = _pair(name, input_size=4, hidden_size=6)
    x = RNG.standard_normal((3, 4) if cell else (5, 3, 4)).astype(np.float32)
    with ampcore.autocast("cpu", dtype=ampcore.bfloat16):
        out = ours(ampcore.tensor(x))
    with torch.autocast("cpu", dtype=torch.bfloat16):
        tout = theirs(torch.tensor(x))
    ours_dtypes = [t.dtype.name for t in _flat(out)]
    torch_dtypes = [str(t.dtype).removeprefix("torch.") for t in _flat(tout)]
    assert ours_dtypes == torch_dtypes


def _flat(out):
    if isinstance(out, tuple):
        return [t for part in out for t in _flat(part)]
    return [out]


@pytest.mark.parametrize("name", ["RNN", "LSTM", "GRU"])
def test_cuda_lists_run_every_step_in_float16(name, opencl_device):
    """On a device autocast with torch's CUDA lists (opencl), every step is an RNNCell / LSTMCell / GRUCell, which
    those lists run in float16, as torch's cuDNN path does; the values stay near the float32 ones."""
    device = f"opencl:{opencl_device}"
    layer = getattr(nn, name)(4, 6, num_layers=2)
    x = ampcore.randn(5, 3, 4, device="cpu")
    reference, _ = layer(x)
    layer.to(device)
    with ampcore.autocast("opencl", dtype=ampcore.float16, trace=True) as region:
        out, state = layer(x.to(device))
    assert out.dtype is ampcore.float16 and all(s.dtype is ampcore.float16 for s in _states(state))
    assert f"{name}Cell" in region.trace.ops() and "mkldnn_rnn_layer" not in region.trace.ops()
    np.testing.assert_allclose(out.float().numpy(), reference.detach().numpy(), atol=2e-3)


def test_bad_arguments_are_named():
    with pytest.raises(ValueError, match="proj_size"):
        nn.GRU(4, 6, proj_size=2)
    with pytest.raises(ValueError, match="hidden_size"):
        nn.LSTM(4, 0)
    layer = nn.LSTM(4, 6)
    with pytest.raises(ValueError, match="expected hidden state of shape"):
        layer(ampcore.zeros(5, 3, 4), (ampcore.zeros(1, 2, 6), ampcore.zeros(1, 2, 6)))
    with pytest.raises(ValueError, match="input size 5 is not input_size=4"):
        layer(ampcore.zeros(5, 3, 5))
