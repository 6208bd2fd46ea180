"""Data-parallel training written for torchrun, the way torch's DDP tutorials write it.

    torchrun --nproc-per-node 2 train_ddp.py --out result.npz

It reads its rank from torchrun's environment, joins the process group, wraps the model in
DistributedDataParallel, shards the data with a DistributedSampler (set_epoch every epoch), averages the
logged loss with all_reduce, checks all_gather and broadcast, and rank 0 saves the final parameters and the
losses.  Run on one process with ``--batch-size`` times the world size, it takes the same steps.
"""

from __future__ import annotations

import argparse
import os

import numpy as np
import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP  # noqa: N817 - the tutorials' spelling
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler


def make_data(n: int = 64) -> TensorDataset:
    rng = np.random.default_rng(1234)  # the same data on every rank
    x = rng.standard_normal((n, 8)).astype(np.float32)
    y = (x[:, :4].argmax(axis=1)).astype(np.int64)
    return TensorDataset(torch.from_numpy(x), torch.from_numpy(y))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--batch-size", type=int, default=8, help="per rank")
    parser.add_argument("--lr", type=float, default=0.2)
    parser.add_argument("--out", default="ddp_result.npz")
    args = parser.parse_args(argv)

    rank = int(os.environ["RANK"])
    local_rank = int(os.environ["LOCAL_RANK"])
    world_size = int(os.environ["WORLD_SIZE"])
    dist.init_process_group(backend="gloo")
    assert dist.is_initialized() and dist.get_rank() == rank and dist.get_world_size() == world_size

    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 16), nn.Tanh(), nn.Linear(16, 4))
    for p in model.parameters():  # a fixed start, the same on every framework and rank
        values = np.random.default_rng(p.numel()).uniform(-0.3, 0.3, tuple(p.shape)).astype(np.float32)
        with torch.no_grad():
            p.copy_(torch.from_numpy(values))
    ddp = DDP(model, device_ids=None)
    optimizer = torch.optim.SGD(ddp.parameters(), lr=args.lr)

    dataset = make_data()
    sampler = DistributedSampler(dataset, shuffle=True, seed=0)
    loader = DataLoader(dataset, batch_size=args.batch_size, sampler=sampler)
    losses = []
    for epoch in range(args.epochs):
        sampler.set_epoch(epoch)
        for x, y in loader:
            optimizer.zero_grad()
            loss = F.cross_entropy(ddp(x), y)
            loss.backward()
            optimizer.step()
            logged = loss.detach().clone()
            dist.all_reduce(logged, op=dist.ReduceOp.SUM)
            losses.append(logged.item() / world_size)

    gathered = [torch.zeros(2) for _ in range(world_size)]
    dist.all_gather(gathered, torch.tensor([float(rank), float(local_rank)]))
    assert [g.tolist() for g in gathered] == [[float(r), float(r)] for r in range(world_size)]
    token = torch.tensor([42.0 if rank == 0 else -1.0])
    dist.broadcast(token, src=0)
    assert token.item() == 42.0
    dist.barrier()
    if rank == 0:
        params = {name: p.detach().numpy() for name, p in ddp.module.named_parameters()}
        np.savez(args.out, losses=np.array(losses), **params)
        print(f"world {world_size}: {len(losses)} steps, loss {losses[0]:.4f} -> {losses[-1]:.4f}")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
