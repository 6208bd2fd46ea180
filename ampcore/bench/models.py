"""The benchmark models, in one place: what ``ampcore bench`` and the scripts in ``benchmarks/`` train.

Each :class:`ModelSpec` builds the same network in ampcore and in torch with
the same parameter names (the torch twins live in :mod:`.torch_reference`),
so torch's copy starts from ampcore's weights and both see the same batches.  Every model ends in
class logits trained with cross-entropy.

- ``mlp``: the reference MLP, 784-1024-1024-10 with ReLU, batch 256.
- ``cnn``: two 3x3 conv + ReLU + 2x2 max-pool stages and a linear head on
  3x32x32 inputs, batch 32.
- ``transformer``: one pre-LayerNorm encoder block (attention, then a GELU
  feed-forward, both residual) over 64 tokens of width 256 with 4 heads,
  batch 16, mean-pooled into a linear head.
- ``mlp-large`` and ``transformer-large``: the GPU sizes of the CUDA issue
  (batch 8192, 4096-4096-4096-4096-1000; width 1024, 16 heads, 512 tokens,
  batch 16).  Far too slow for a CPU.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from .. import nn
from ..nn import functional as F
from . import torch_reference

__all__ = ["ModelSpec", "MODELS", "MLP_SIZES", "get_model", "make_batches", "parameter_count"]


@dataclass(frozen=True)
class ModelSpec:
    """A benchmark model: its name, batch size, per-sample input shape and how to build it.

    ``build(device)`` returns the ampcore module; ``build_torch()`` the same
    architecture as a ``torch.nn.Module`` (it imports torch: call it only
    when torch is installed).
    """

    name: str
    description: str
    batch: int
    input_shape: tuple[int, ...]
    classes: int
    build: Callable[[Any], Any]
    build_torch: Callable[[], Any]


# ----------------------------------------------------------------------------- mlp
def _mlp(sizes: tuple[int, ...], device: Any) -> Any:
    layers: list[Any] = []
    for i, (fan_in, fan_out) in enumerate(zip(sizes, sizes[1:])):
        layers.append(nn.Linear(fan_in, fan_out, device=device))
        if i < len(sizes) - 2:
            layers.append(nn.ReLU())
    return nn.Sequential(*layers)


def _mlp_spec(name: str, sizes: tuple[int, ...], batch: int, note: str = "") -> ModelSpec:
    return ModelSpec(
        name,
        f"MLP {'-'.join(map(str, sizes))} (ReLU), batch {batch}{note}",
        batch,
        (sizes[0],),
        sizes[-1],
        lambda device: _mlp(sizes, device),
        lambda: torch_reference.mlp(sizes),
    )


# ----------------------------------------------------------------------------- cnn
class SmallCNN(nn.Module):
    """conv3x3(3->32) ReLU maxpool2, conv3x3(32->64) ReLU maxpool2, linear(64*8*8 -> 10)."""

    def __init__(self, device: Any = None) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(3, 32, 3, padding=1, device=device)
        self.conv2 = nn.Conv2d(32, 64, 3, padding=1, device=device)
        self.fc = nn.Linear(64 * 8 * 8, 10, device=device)

    def forward(self, x: Any) -> Any:
        x = F.max_pool2d(F.relu(self.conv1(x)), 2)
        x = F.max_pool2d(F.relu(self.conv2(x)), 2)
        return self.fc(x.reshape(x.shape[0], -1))


# ----------------------------------------------------------------------------- transformer
class TransformerBlock(nn.Module):
    """A pre-LayerNorm encoder block and a classifier on the mean token:
    ``x + attn(ln1(x))``, then ``x + ff2(gelu(ff1(ln2(x))))``, then ``head(mean over tokens)``."""

    def __init__(self, width: int, heads: int, hidden: int, classes: int, device: Any = None) -> None:
        super().__init__()
        self.norm1 = nn.LayerNorm(width, device=device)
        self.attn = nn.MultiheadAttention(width, heads, batch_first=True, device=device)
        self.norm2 = nn.LayerNorm(width, device=device)
        self.ff1 = nn.Linear(width, hidden, device=device)
        self.ff2 = nn.Linear(hidden, width, device=device)
        self.head = nn.Linear(width, classes, device=device)

    def forward(self, x: Any) -> Any:
        h = self.norm1(x)
        x = x + self.attn(h, h, h, need_weights=False)[0]
        x = x + self.ff2(F.gelu(self.ff1(self.norm2(x))))
        return self.head(x.mean(1))


def _transformer_spec(name: str, width: int, heads: int, tokens: int, batch: int, note: str = "") -> ModelSpec:
    hidden, classes = 4 * width, 10
    return ModelSpec(
        name,
        f"transformer block: width {width}, {heads} heads, {tokens} tokens, feed-forward {hidden} (GELU), "
        f"batch {batch}{note}",
        batch,
        (tokens, width),
        classes,
        lambda device: TransformerBlock(width, heads, hidden, classes, device=device),
        lambda: torch_reference.transformer_block(width, heads, hidden, classes),
    )


MLP_SIZES = (784, 1024, 1024, 10)  # the reference MLP's layer widths

MODELS: dict[str, ModelSpec] = {
    spec.name: spec
    for spec in (
        _mlp_spec("mlp", MLP_SIZES, 256),
        ModelSpec(
            "cnn",
            "CNN: conv3x3 32 + pool, conv3x3 64 + pool, linear, on 3x32x32, batch 32",
            32,
            (3, 32, 32),
            10,
            lambda device: SmallCNN(device),
            torch_reference.small_cnn,
        ),
        _transformer_spec("transformer", 256, 4, 64, 16),
        _mlp_spec("mlp-large", (4096, 4096, 4096, 4096, 1000), 8192, " (GPU size)"),
        _transformer_spec("transformer-large", 1024, 16, 512, 16, " (GPU size)"),
    )
}


def get_model(name: str) -> ModelSpec:
    """The spec called ``name``; ValueError listing the choices for any other name."""
    try:
        return MODELS[name]
    except KeyError:
        raise ValueError(f"unknown benchmark model {name!r}; choose one of {', '.join(MODELS)}") from None


def make_batches(
    spec: ModelSpec, seed: int, count: int = 4, batch: int | None = None
) -> list[tuple[np.ndarray, np.ndarray]]:
    """``count`` seeded batches of standard-normal inputs labelled by a fixed random linear teacher.

    The labels are a function of the inputs, so the loss falls as the model
    learns and the final losses of two precisions say something.
    """
    rng = np.random.default_rng(seed)
    batch = spec.batch if batch is None else batch
    features = int(np.prod(spec.input_shape))
    teacher = rng.standard_normal((features, spec.classes), dtype=np.float32)
    batches = []
    for _ in range(count):
        x = rng.standard_normal((batch, *spec.input_shape), dtype=np.float32)
        y = np.argmax(x.reshape(batch, features) @ teacher, axis=1).astype(np.int64)
        batches.append((x, y))
    return batches


def parameter_count(model: Any) -> int:
    """How many numbers the model trains."""
    return sum(int(np.prod(p.shape)) for p in model.parameters())
