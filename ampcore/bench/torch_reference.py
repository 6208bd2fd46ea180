"""torch, measured beside ampcore: the benchmark models' torch twins and torch's training run.

torch is optional and this is the only module of ampcore that touches it:
every function imports it when called, so importing ampcore (or
``ampcore bench --no-torch``) never loads torch.  The twins have the same
parameter names as ampcore's models, so they load ampcore's weights.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import numpy as np

from .config import INIT_SCALE, LR, Config, History

if TYPE_CHECKING:
    from .models import ModelSpec

__all__ = [
    "devices",
    "missing",
    "mlp",
    "small_cnn",
    "transformer_block",
    "twin",
    "TorchRun",
    "peak_memory",
    "set_threads",
]

MISSING = "torch is not installed, so nothing ran beside ampcore; add it with: pip install torch"


def devices() -> list[str]:
    """The torch devices to measure: cpu, and cuda when torch sees a GPU; empty without torch."""
    if importlib.util.find_spec("torch") is None:
        return []
    import torch

    return ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])


def missing() -> str | None:
    """Why torch cannot be measured here (not installed: how to add it), or None when it can."""
    return MISSING if importlib.util.find_spec("torch") is None else None


def set_threads(n: int) -> int:
    """Run torch's CPU ops on ``n`` threads, as ampcore's (``torch.set_num_threads``); the count torch reports."""
    import torch

    torch.set_num_threads(n)
    return int(torch.get_num_threads())


def mlp(sizes: tuple[int, ...]) -> Any:
    import torch

    layers: list[Any] = []
    for i, (fan_in, fan_out) in enumerate(zip(sizes, sizes[1:])):
        layers.append(torch.nn.Linear(fan_in, fan_out))
        if i < len(sizes) - 2:
            layers.append(torch.nn.ReLU())
    return torch.nn.Sequential(*layers)


def small_cnn() -> Any:
    import torch
    from torch.nn import functional as TF

    class TorchSmallCNN(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.conv1 = torch.nn.Conv2d(3, 32, 3, padding=1)
            self.conv2 = torch.nn.Conv2d(32, 64, 3, padding=1)
            self.fc = torch.nn.Linear(64 * 8 * 8, 10)

        def forward(self, x: Any) -> Any:
            x = TF.max_pool2d(TF.relu(self.conv1(x)), 2)
            x = TF.max_pool2d(TF.relu(self.conv2(x)), 2)
            return self.fc(x.reshape(x.shape[0], -1))

    return TorchSmallCNN()


def transformer_block(width: int, heads: int, hidden: int, classes: int) -> Any:
    import torch
    from torch.nn import functional as TF

    class TorchTransformerBlock(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.norm1 = torch.nn.LayerNorm(width)
            self.attn = torch.nn.MultiheadAttention(width, heads, batch_first=True)
            self.norm2 = torch.nn.LayerNorm(width)
            self.ff1 = torch.nn.Linear(width, hidden)
            self.ff2 = torch.nn.Linear(hidden, width)
            self.head = torch.nn.Linear(width, classes)

        def forward(self, x: Any) -> Any:
            h = self.norm1(x)
            x = x + self.attn(h, h, h, need_weights=False)[0]
            x = x + self.ff2(TF.gelu(self.ff1(self.norm2(x))))
            return self.head(x.mean(1))

    return TorchTransformerBlock()


def twin(spec: ModelSpec, weights: Mapping[str, np.ndarray], device: str = "cpu") -> Any:
    """The torch version of ``spec`` on ``device``, loaded with ``weights`` (name -> array, from ampcore's
    ``state_dict``); every name must match."""
    import torch

    model = spec.build_torch()
    model.load_state_dict({k: torch.from_numpy(np.array(v, np.float32)) for k, v in weights.items()}, strict=True)
    return model.to(device)


class TorchRun:
    """``config`` trained in torch (``torch.autocast`` and ``torch.amp.GradScaler``), for reference."""

    def __init__(
        self,
        spec: ModelSpec,
        config: Config,
        weights: Mapping[str, np.ndarray],
        batches: list[tuple[np.ndarray, np.ndarray]],
    ):
        import torch

        self.torch = torch
        self.config = config
        self.device_type = config.device.split(":")[0]
        self.model = twin(spec, weights, config.device)
        self.optimizer = torch.optim.AdamW(self.model.parameters(), lr=LR)
        self.scaler = torch.amp.GradScaler(self.device_type, enabled=config.loss_scaling)
        self.low = getattr(torch, config.precision)
        self.batches = [
            (torch.from_numpy(x).to(config.device), torch.from_numpy(y).to(config.device)) for x, y in batches
        ]
        self.steps = 0
        self._losses: list[Any] = []
        self._scales: list[Any] = []

    def forward(self) -> Any:
        x, y = self.batches[self.steps % len(self.batches)]
        with self.torch.autocast(self.device_type, dtype=self.low, enabled=self.config.amp):
            return self.torch.nn.functional.cross_entropy(self.model(x), y)

    def finish(self, loss: Any) -> None:
        self.scaler.scale(loss).backward()
        self.scaler.step(self.optimizer)
        self.scaler.update()
        self.steps += 1
        self._losses.append(loss.detach().float().reshape(1))
        if self.config.loss_scaling:
            scale = self.scaler._get_scale_async()
            assert scale is not None, "an enabled GradScaler holds its scale after step()"  # for mypy, with torch
            self._scales.append(scale.detach().clone().reshape(1))

    def zero_grad(self) -> None:
        self.optimizer.zero_grad(set_to_none=True)

    def synchronize(self) -> None:
        if self.device_type == "cuda":
            self.torch.cuda.synchronize()

    def saved_bytes(self, loss: Any) -> int:
        """Bytes of the distinct storages autograd saved for ``loss``'s backward, parameters not counted."""
        params = {p.untyped_storage().data_ptr() for p in self.model.parameters()}
        storages: dict[int, int] = {}
        stack, seen = [loss.grad_fn], set()
        while stack:
            node = stack.pop()
            if node is None or id(node) in seen:
                continue
            seen.add(id(node))
            for name in dir(node):
                if name.startswith("_saved_"):
                    value = getattr(node, name, None)
                    for t in value if isinstance(value, (list, tuple)) else (value,):
                        if isinstance(t, self.torch.Tensor) and t.untyped_storage().data_ptr() not in params:
                            storages[t.untyped_storage().data_ptr()] = t.untyped_storage().nbytes()
            stack.extend(fn for fn, _ in node.next_functions)
        return sum(storages.values())

    def step(self) -> None:
        self.zero_grad()
        self.finish(self.forward())
        self.synchronize()

    def history(self) -> History:
        losses = [float(v) for v in self.torch.cat(self._losses).cpu().numpy()] if self._losses else []
        scales = [float(v) for v in self.torch.cat(self._scales).cpu().numpy()] if self._scales else None
        # torch's scaler does not count skips; a skipped step is one that backed the scale off.
        skipped = sum(1 for a, b in zip([INIT_SCALE, *scales], scales) if b < a) if scales else 0
        return History(losses, scales, skipped, 0)


def peak_memory(device: str, fn: Any) -> int | None:
    """Run ``fn``; on CUDA return the growth of torch's allocated memory at its peak, else None."""
    import torch

    if not device.startswith("cuda"):
        fn()
        return None  # torch keeps no count of CPU memory
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    base = torch.cuda.memory_allocated()
    fn()
    return torch.cuda.max_memory_allocated() - base
