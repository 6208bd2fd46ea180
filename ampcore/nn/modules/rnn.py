"""The recurrent layers: RNN, LSTM and GRU (stacked, bidirectional, batch_first, dropout between layers, LSTM's
proj_size) and their cells RNNCell, LSTMCell and GRUCell, with torch's arguments, initialisation and
state-dict names (``weight_ih_l0``, ``weight_hh_l0_reverse``, ``bias_ih_l1``, ``weight_hr_l0``, ...), so a
torch state dict loads and gives torch's outputs.

The step math and the autocast behaviour are the ops' (:mod:`ampcore.nn.functional.rnn`).  Inputs are (L, N,
H_in), (N, L, H_in) with ``batch_first``, unbatched (L, H_in), or a PackedSequence.
"""

from __future__ import annotations

import math
from typing import Any

from ... import dtypes as dt
from ...creation import empty, zeros
from ...ops import cat, stack
from ...tensor import Tensor
from .. import functional as F
from .. import init
from ..functional import rnn as R
from ..module import Module
from ..parameter import Parameter
from ..utils.rnn import PackedSequence, pad_packed_sequence

__all__ = ["RNNBase", "RNN", "LSTM", "GRU", "RNNCellBase", "RNNCell", "LSTMCell", "GRUCell"]

_GATES = {"RNN_TANH": 1, "RNN_RELU": 1, "LSTM": 4, "GRU": 3}


class RNNBase(Module):
    """What RNN, LSTM and GRU share: the parameters per layer and direction, the input layouts, the scan."""

    def __init__(
        self,
        mode: str,
        input_size: int,
        hidden_size: int,
        num_layers: int = 1,
        bias: bool = True,
        batch_first: bool = False,
        dropout: float = 0.0,
        bidirectional: bool = False,
        proj_size: int = 0,
        device: Any = None,
        dtype: Any = None,
    ) -> None:
        super().__init__()
        name = type(self).__name__
        for what, value in (("input_size", input_size), ("hidden_size", hidden_size), ("num_layers", num_layers)):
            if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
                raise ValueError(f"{name}: {what} must be a positive int, got {value!r}")
        if not (isinstance(dropout, (int, float)) and 0 <= dropout <= 1) or isinstance(dropout, bool):
            raise ValueError(f"{name}: dropout must be a number in [0, 1], got {dropout!r}")
        if proj_size < 0 or (proj_size and mode != "LSTM"):
            raise ValueError(f"{name}: proj_size must be >= 0 and is only for LSTM, got {proj_size!r}")
        if proj_size >= hidden_size:
            raise ValueError(f"{name}: proj_size ({proj_size}) has to be smaller than hidden_size ({hidden_size})")
        self.mode, self.input_size, self.hidden_size, self.num_layers = mode, input_size, hidden_size, num_layers
        self.bias, self.batch_first, self.dropout = bias, batch_first, float(dropout)
        self.bidirectional, self.proj_size = bidirectional, proj_size
        directions = 2 if bidirectional else 1
        gate_size = _GATES[mode] * hidden_size
        real_hidden = proj_size or hidden_size
        self._flat_weights_names: list[str] = []
        for layer in range(num_layers):
            for direction in range(directions):
                width = input_size if layer == 0 else real_hidden * directions
                suffix = f"_l{layer}" + ("_reverse" if direction else "")
                shapes: list[tuple[str, tuple[int, ...]]] = [
                    (f"weight_ih{suffix}", (gate_size, width)),
                    (f"weight_hh{suffix}", (gate_size, real_hidden)),
                ]
                if bias:
                    shapes += [(f"bias_ih{suffix}", (gate_size,)), (f"bias_hh{suffix}", (gate_size,))]
                if proj_size:
                    shapes.append((f"weight_hr{suffix}", (proj_size, hidden_size)))
                for pname, shape in shapes:
                    setattr(self, pname, Parameter(empty(*shape, device=device, dtype=dtype)))
                    self._flat_weights_names.append(pname)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Every weight and bias from U(-1/sqrt(hidden_size), 1/sqrt(hidden_size)), as torch draws them."""
        bound = 1.0 / math.sqrt(self.hidden_size) if self.hidden_size > 0 else 0.0
        for p in self.parameters():
            init.uniform_(p, -bound, bound)

    def flatten_parameters(self) -> None:
        """torch's cuDNN weight compaction: there is nothing to compact here."""

    @property
    def _flat_weights(self) -> list[Tensor | None]:
        return [getattr(self, n) for n in self._flat_weights_names]

    @property
    def all_weights(self) -> list[list[Tensor | None]]:
        """The parameters per layer and direction, as torch lists them."""
        per = 4 if self.bias else 2
        per += 1 if self.proj_size else 0
        w = self._flat_weights
        return [list(w[i : i + per]) for i in range(0, len(w), per)]

    def _weights(self, layer: int, direction: int) -> list[Tensor | None]:
        suffix = f"_l{layer}" + ("_reverse" if direction else "")
        get = lambda n: getattr(self, n + suffix, None)  # noqa: E731
        return [get("weight_ih"), get("weight_hh"), get("bias_ih"), get("bias_hh"), get("weight_hr")]

    # ------------------------------------------------------------------ forward
    def _initial(self, hx: Any, batch: int, like: Tensor) -> tuple[Tensor, ...]:
        directions = 2 if self.bidirectional else 1
        real_hidden = self.proj_size or self.hidden_size
        if hx is None:
            h0 = zeros(self.num_layers * directions, batch, real_hidden, dtype=like.dtype, device=like.device)
            if self.mode != "LSTM":
                return (h0,)
            return h0, zeros(
                self.num_layers * directions, batch, self.hidden_size, dtype=like.dtype, device=like.device
            )
        states = tuple(hx) if self.mode == "LSTM" else (hx,)
        if self.mode == "LSTM" and len(states) != 2:
            raise ValueError(f"{type(self).__name__}: hx must be a pair (h_0, c_0), got {type(hx).__name__}")
        expected = [(self.num_layers * directions, batch, real_hidden)]
        if self.mode == "LSTM":
            expected.append((self.num_layers * directions, batch, self.hidden_size))
        for state, shape in zip(states, expected):
            if tuple(state.shape) != shape:
                raise ValueError(f"{type(self).__name__}: expected hidden state of shape {shape}, got {state.shape}")
        return states

    def forward(self, input: Any, hx: Any = None) -> tuple[Any, Any]:  # noqa: A002 - torch's argument name
        packed = isinstance(input, PackedSequence)
        lengths = None
        if packed:
            x, lens = pad_packed_sequence(PackedSequence(input.data, input.batch_sizes))  # the sorted order
            lengths = [int(n) for n in lens.numpy()]
            batched = True
        else:
            x = input
            batched = x.ndim == 3
            if x.ndim not in (2, 3):
                raise ValueError(f"{type(self).__name__}: expected a 2-D or 3-D input, got shape {x.shape}")
            if not batched:
                x = x.unsqueeze(1)
                if hx is not None:
                    hx = tuple(h.unsqueeze(1) for h in hx) if self.mode == "LSTM" else hx.unsqueeze(1)
            elif self.batch_first:
                x = x.transpose(0, 1)
        if x.shape[-1] != self.input_size:
            raise ValueError(f"{type(self).__name__}: input size {x.shape[-1]} is not input_size={self.input_size}")
        if packed and hx is not None and input.sorted_indices is not None:  # the caller's order -> the sorted one
            hx = (
                tuple(h.index_select(1, input.sorted_indices) for h in hx)
                if self.mode == "LSTM"
                else (hx.index_select(1, input.sorted_indices))
            )
        states = self._initial(hx, x.shape[1], x)
        out, final = self._scan(x, states, lengths)
        if packed:
            if input.unsorted_indices is not None:
                final = tuple(s.index_select(1, input.unsorted_indices) for s in final)
            data = _repack(out, input)
            return data, (final if self.mode == "LSTM" else final[0])
        if not batched:
            out, final = out.squeeze(1), tuple(s.squeeze(1) for s in final)
        elif self.batch_first:
            out = out.transpose(0, 1)
        return out, (final if self.mode == "LSTM" else final[0])

    def _scan(
        self, x: Tensor, states: tuple[Tensor, ...], lengths: list[int] | None
    ) -> tuple[Tensor, tuple[Tensor, ...]]:
        directions = 2 if self.bidirectional else 1
        finals: list[list[Tensor]] = [[] for _ in states]
        for layer in range(self.num_layers):
            outs = []
            for direction in range(directions):
                k = layer * directions + direction
                layer_state = tuple(s[k] for s in states)
                out, final = self._direction(x, layer, direction, layer_state, lengths)
                outs.append(out)
                for i, s in enumerate(final):
                    finals[i].append(s)
            x = outs[0] if directions == 1 else cat(outs, 2)
            if self.dropout and self.training and layer < self.num_layers - 1:
                x = F.dropout(x, self.dropout, True)
        return x, tuple(stack(f, 0) for f in finals)

    def _direction(
        self, x: Tensor, layer: int, direction: int, state: tuple[Tensor, ...], lengths: list[int] | None
    ) -> tuple[Tensor, tuple[Tensor, ...]]:
        weights = self._weights(layer, direction)
        if self.mode == "LSTM" and x.device.type == "cpu":  # torch's CPU path: the layer is one op
            out, h, c = R.lstm_layer(x, *weights[:4], state[0], state[1], bool(direction), lengths, weights[4])
            return out, (h, c)
        cell = {"LSTM": "lstm", "GRU": "gru"}.get(self.mode, "rnn")
        nonlinearity = "relu" if self.mode == "RNN_RELU" else "tanh"
        return R.cell_layer(cell, x, weights, state, bool(direction), lengths, nonlinearity)

    def extra_repr(self) -> str:
        s = f"{self.input_size}, {self.hidden_size}"
        if self.proj_size:
            s += f", proj_size={self.proj_size}"
        if self.num_layers != 1:
            s += f", num_layers={self.num_layers}"
        if not self.bias:
            s += ", bias=False"
        if self.batch_first:
            s += ", batch_first=True"
        if self.dropout:
            s += f", dropout={self.dropout}"
        if self.bidirectional:
            s += ", bidirectional=True"
        return s


def _repack(out: Tensor, like: PackedSequence) -> PackedSequence:
    """The (L, N_sorted, H) output of a packed input, packed as ``like`` is."""
    sizes = like.batch_sizes.numpy()
    steps, batch = out.shape[:2]
    positions = [t * batch + b for t, n in enumerate(sizes) for b in range(int(n))]
    data = out.reshape(steps * batch, *out.shape[2:]).index_select(0, out._new_tensor(positions, dt.int64))
    return PackedSequence(data, like.batch_sizes, like.sorted_indices, like.unsorted_indices)


class RNN(RNNBase):
    """torch.nn.RNN: ``h_t = tanh(x_t W_ih^T + b_ih + h_{t-1} W_hh^T + b_hh)`` (``nonlinearity='relu'``: relu),
    ``num_layers`` stacked, optionally bidirectional; returns ``(output, h_n)``."""

    def __init__(self, *args: Any, nonlinearity: str = "tanh", **kwargs: Any) -> None:
        if nonlinearity not in ("tanh", "relu"):
            raise ValueError(f"RNN: unknown nonlinearity {nonlinearity!r}; use 'tanh' or 'relu'")
        super().__init__("RNN_TANH" if nonlinearity == "tanh" else "RNN_RELU", *args, **kwargs)
        self.nonlinearity = nonlinearity

    def extra_repr(self) -> str:
        return super().extra_repr() + (", nonlinearity='relu'" if self.nonlinearity == "relu" else "")


class LSTM(RNNBase):
    """torch.nn.LSTM: gates ``i, f, g, o``, ``c_t = f c_{t-1} + i g``, ``h_t = o tanh(c_t)`` (projected by
    ``weight_hr`` with ``proj_size``); ``hx`` is ``(h_0, c_0)`` and it returns ``(output, (h_n, c_n))``."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__("LSTM", *args, **kwargs)


class GRU(RNNBase):
    """torch.nn.GRU: reset and update gates, ``n_t = tanh(x W_in + b_in + r (h W_hn + b_hn))``,
    ``h_t = (1 - z) n_t + z h_{t-1}``; returns ``(output, h_n)``."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__("GRU", *args, **kwargs)


class RNNCellBase(Module):
    """What the cells share: ``weight_ih`` (gates, input_size), ``weight_hh`` (gates, hidden_size) and the
    biases, drawn from U(-1/sqrt(hidden_size), 1/sqrt(hidden_size)) as torch draws them."""

    def __init__(
        self, input_size: int, hidden_size: int, bias: bool, num_chunks: int, device: Any = None, dtype: Any = None
    ) -> None:
        super().__init__()
        self.input_size, self.hidden_size, self.bias = input_size, hidden_size, bias
        gates = num_chunks * hidden_size
        self.weight_ih = Parameter(empty(gates, input_size, device=device, dtype=dtype))
        self.weight_hh = Parameter(empty(gates, hidden_size, device=device, dtype=dtype))
        if bias:
            self.bias_ih = Parameter(empty(gates, device=device, dtype=dtype))
            self.bias_hh = Parameter(empty(gates, device=device, dtype=dtype))
        else:
            self.register_parameter("bias_ih", None)
            self.register_parameter("bias_hh", None)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        bound = 1.0 / math.sqrt(self.hidden_size) if self.hidden_size > 0 else 0.0
        for p in self.parameters():
            init.uniform_(p, -bound, bound)

    def _prepare(self, input: Tensor, hx: Any) -> tuple[Tensor, bool]:  # noqa: A002 - torch's argument name
        if input.ndim not in (1, 2):
            raise ValueError(f"{type(self).__name__}: expected a 1-D or 2-D input, got shape {input.shape}")
        if input.shape[-1] != self.input_size:
            raise ValueError(f"{type(self).__name__}: input size {input.shape[-1]} is not {self.input_size}")
        return (input if input.ndim == 2 else input.unsqueeze(0)), input.ndim == 2

    def _zeros(self, x: Tensor) -> Tensor:
        return zeros(x.shape[0], self.hidden_size, dtype=x.dtype, device=x.device)

    def extra_repr(self) -> str:
        return f"{self.input_size}, {self.hidden_size}" + ("" if self.bias else ", bias=False")


class RNNCell(RNNCellBase):
    """torch.nn.RNNCell: one step, ``tanh`` (or ``relu``) of the two projections; ``forward(input, hx=None)``."""

    def __init__(
        self,
        input_size: int,
        hidden_size: int,
        bias: bool = True,
        nonlinearity: str = "tanh",
        device: Any = None,
        dtype: Any = None,
    ) -> None:
        if nonlinearity not in ("tanh", "relu"):
            raise ValueError(f"RNNCell: unknown nonlinearity {nonlinearity!r}; use 'tanh' or 'relu'")
        super().__init__(input_size, hidden_size, bias, 1, device, dtype)
        self.nonlinearity = nonlinearity

    def forward(self, input: Tensor, hx: Tensor | None = None) -> Tensor:  # noqa: A002 - torch's argument name
        x, batched = self._prepare(input, hx)
        h = self._zeros(x) if hx is None else (hx if batched else hx.unsqueeze(0))
        out = R.rnn_cell(x, h, self.weight_ih, self.weight_hh, self.bias_ih, self.bias_hh, self.nonlinearity)
        return out if batched else out.squeeze(0)


class LSTMCell(RNNCellBase):
    """torch.nn.LSTMCell: one LSTM step; ``forward(input, hx=None)`` with ``hx = (h, c)``, returns ``(h', c')``."""

    def __init__(
        self, input_size: int, hidden_size: int, bias: bool = True, device: Any = None, dtype: Any = None
    ) -> None:
        super().__init__(input_size, hidden_size, bias, 4, device, dtype)

    def forward(self, input: Tensor, hx: Any = None) -> tuple[Tensor, Tensor]:  # noqa: A002 - torch's name
        x, batched = self._prepare(input, hx)
        if hx is None:
            h, c = self._zeros(x), self._zeros(x)
        else:
            h, c = (hx[0], hx[1]) if batched else (hx[0].unsqueeze(0), hx[1].unsqueeze(0))
        h, c = R.lstm_cell(x, h, c, self.weight_ih, self.weight_hh, self.bias_ih, self.bias_hh)
        return (h, c) if batched else (h.squeeze(0), c.squeeze(0))


class GRUCell(RNNCellBase):
    """torch.nn.GRUCell: one GRU step; ``forward(input, hx=None)``."""

    def __init__(
        self, input_size: int, hidden_size: int, bias: bool = True, device: Any = None, dtype: Any = None
    ) -> None:
        super().__init__(input_size, hidden_size, bias, 3, device, dtype)

    def forward(self, input: Tensor, hx: Tensor | None = None) -> Tensor:  # noqa: A002 - torch's argument name
        x, batched = self._prepare(input, hx)
        h = self._zeros(x) if hx is None else (hx if batched else hx.unsqueeze(0))
        out = R.gru_cell(x, h, self.weight_ih, self.weight_hh, self.bias_ih, self.bias_hh)
        return out if batched else out.squeeze(0)
