"""Every opencl kernel family on small, odd shapes: run under ``oclgrind`` by tests/test_opencl_oclgrind.py.

Oclgrind simulates an OpenCL device and reports out-of-bounds accesses,
uninitialised reads and data races in each kernel.  Shapes are small (the
simulator is slow) and odd (so GEMM and reduction tiles have ragged edges).
Prints "workload done" at the end; any oclgrind report goes to stderr.
"""

from __future__ import annotations

import sys

import numpy as np

import ampcore
from ampcore import nn, optim
from ampcore.nn import functional as F

DEVICE = sys.argv[1] if len(sys.argv) > 1 else "opencl:0"


def elementwise_and_creation() -> None:
    x = ampcore.randn(3, 5, device=DEVICE)
    u = ampcore.rand(7, device=DEVICE, dtype="float16")
    a = ampcore.arange(0, 11, 3, device=DEVICE)
    for dtype in ("float32", "float16", "bfloat16"):
        y = x.to(dtype)
        z = (y.exp() + y.sin() * 2 - y.abs().sqrt()).tanh().sigmoid()
        w = ampcore.where(y > 0, z, 1.5) / (y.cos() + 3)
        w.maximum(ampcore.full((1, 5), 0.25, dtype=dtype, device=DEVICE)).float().numpy()
    (u.float() + a.float().sum()).numpy()


def movement() -> None:
    x = ampcore.randn(4, 3, 5, device=DEVICE)
    x.permute(2, 0, 1).numpy()
    x[1:, ::-2, 3].numpy()
    ampcore.cat([x, x * 2], dim=1).numpy()
    ampcore.ops.shape.pad(x, (1, 2, 0, 1), value=0.5).numpy()
    x.expand(2, 4, 3, 5).numpy()
    x[..., 1:3].numpy()
    emb = nn.Embedding(9, 3, device=DEVICE)
    out = emb(ampcore.tensor([[1, 8, 1], [0, 1, 7]], device=DEVICE))
    out.sum().backward()
    emb.weight.grad.numpy()


def reductions() -> None:
    for dtype in ("float32", "float16"):
        x = ampcore.randn(5, 7, 3, device=DEVICE).to(dtype)
        x.sum(dim=(0, 2)).float().numpy()
        x.amax(dim=1).float().numpy()
        x.argmax(dim=2).numpy()
        x.cumsum(dim=1).float().numpy()
        F.softmax(x, dim=1).float().numpy()
        F.log_softmax(x, dim=-1).float().numpy()
    ampcore.randn(1000, device=DEVICE).sum().numpy()


def gemm() -> None:
    for m, k, n in ((1, 1, 1), (5, 3, 7), (17, 33, 9), (33, 65, 31)):
        for dtype in ("float32", "float16", "bfloat16"):
            a = ampcore.randn(m, k, device=DEVICE).to(dtype)
            b = ampcore.randn(k, n, device=DEVICE).to(dtype)
            (a @ b).float().numpy()
    ampcore.matmul(ampcore.randn(3, 1, 5, 4, device=DEVICE), ampcore.randn(2, 4, 6, device=DEVICE)).numpy()
    # GEMMs with their epilogue (a captured matmul and its chain as one kernel), direct and packed, replayed
    # from the list of enqueues; a bias row, a column and a full-shape operand
    linear = ampcore.compile(lambda a, b, bias, col, full: ((a @ b + bias).relu() * col + full).float())
    for m, k, n in ((5, 3, 7), (33, 65, 31)):
        for dtype in ("float32", "float16", "bfloat16"):
            args = [ampcore.randn(*s, device=DEVICE).to(dtype) for s in ((m, k), (k, n), (n,), (m, 1), (m, n))]
            for _ in range(3):
                linear(*args).numpy()


def training() -> None:
    ampcore.manual_seed(0)
    model = nn.Sequential(nn.Linear(13, 17, device=DEVICE), nn.GELU(), nn.Linear(17, 5, device=DEVICE))
    opt = optim.AdamW(model.parameters(), lr=1e-2)
    scaler = ampcore.GradScaler(ampcore.device(DEVICE).type)
    rng = np.random.default_rng(0)
    x = ampcore.tensor(rng.standard_normal((9, 13), dtype=np.float32), device=DEVICE)
    y = ampcore.tensor(rng.integers(0, 5, 9), device=DEVICE)
    for _ in range(2):
        opt.zero_grad()
        with ampcore.autocast(ampcore.device(DEVICE).type, dtype="float16"):
            loss = F.cross_entropy(model(x), y)
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
    loss.item()


if __name__ == "__main__":
    for part in (elementwise_and_creation, movement, reductions, gemm, training):
        part()
    print("workload done")
