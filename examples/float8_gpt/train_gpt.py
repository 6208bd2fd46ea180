"""A small character-level GPT trained in bfloat16 and with each float8 recipe, side by side.

    python examples/float8_gpt/train_gpt.py                      # 300 steps, every recipe, on cpu
    python examples/float8_gpt/train_gpt.py --steps 30 --device opencl:0 --json out.json

The model is a decoder-only transformer (token and position embeddings,
pre-LayerNorm blocks of causal self-attention and a GELU MLP, a linear LM
head), trained with AdamW under bfloat16 autocast.  A float8 run converts
every ``nn.Linear`` (attention's qkv and output projections, the MLP, the LM
head) with ``ampcore.float8.convert_to_float8_training``; everything else
stays under autocast.  The corpus is the source of two standard-library
modules (``textwrap`` and ``json``), so it is the same on every machine with
the same Python.  Every run starts from the same weights and sees the same
batches.

"Final loss" is the mean cross-entropy over a fixed held-out set of 8
batches, evaluated in the run's own precision after the last step (a
single training step's loss is too noisy to compare to 2%).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import textwrap
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

import ampcore as ac
from ampcore import nn
from ampcore.float8 import convert_to_float8_training, float8_stats, summarize

F = nn.functional

RECIPES = ("tensorwise", "rowwise", "delayed,amax_history_len=16", "mxfp8")


@dataclass(frozen=True)
class GPTConfig:
    vocab: int = 96
    width: int = 64
    heads: int = 4
    layers: int = 2
    context: int = 32
    batch: int = 8


class Block(nn.Module):
    """Pre-LayerNorm decoder block: x + attn(ln(x)), then x + mlp(ln(x))."""

    def __init__(self, cfg: GPTConfig, device: Any = None) -> None:
        super().__init__()
        w = cfg.width
        self.heads = cfg.heads
        self.ln1 = nn.LayerNorm(w, device=device)
        self.qkv = nn.Linear(w, 3 * w, device=device)
        self.proj = nn.Linear(w, w, device=device)
        self.ln2 = nn.LayerNorm(w, device=device)
        self.fc = nn.Linear(w, 4 * w, device=device)
        self.out = nn.Linear(4 * w, w, device=device)

    def forward(self, x: Any) -> Any:
        b, t, w = x.shape
        q, k, v = self.qkv(self.ln1(x)).reshape(b, t, 3, self.heads, w // self.heads).permute(2, 0, 3, 1, 4)
        att = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(att.permute(0, 2, 1, 3).reshape(b, t, w))
        return x + self.out(F.gelu(self.fc(self.ln2(x))))


class CharGPT(nn.Module):
    def __init__(self, cfg: GPTConfig, device: Any = None) -> None:
        super().__init__()
        self.tok = nn.Embedding(cfg.vocab, cfg.width, device=device)
        self.pos = nn.Embedding(cfg.context, cfg.width, device=device)
        self.blocks = nn.ModuleList([Block(cfg, device) for _ in range(cfg.layers)])
        self.ln = nn.LayerNorm(cfg.width, device=device)
        self.head = nn.Linear(cfg.width, cfg.vocab, device=device)

    def forward(self, idx: Any) -> Any:
        t = idx.shape[1]
        x = self.tok(idx) + self.pos(ac.arange(t, device=idx.device))
        for block in self.blocks:
            x = block(x)
        return self.head(self.ln(x))


def corpus() -> np.ndarray:
    """Printable ASCII of the textwrap and json modules' source, as codes 0..95 (newline is 95)."""
    text = Path(textwrap.__file__).read_text() + Path(json.__file__).read_text()
    codes = np.frombuffer(text.encode("ascii", "replace"), dtype=np.uint8).astype(np.int64)
    codes = np.where(codes == 10, 127, codes)
    return np.clip(codes, 32, 127) - 32


def batches(data: np.ndarray, cfg: GPTConfig, n: int, seed: int) -> list[tuple[np.ndarray, np.ndarray]]:
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n):
        starts = rng.integers(0, len(data) - cfg.context - 1, cfg.batch)
        x = np.stack([data[s : s + cfg.context] for s in starts])
        y = np.stack([data[s + 1 : s + cfg.context + 1] for s in starts])
        out.append((x, y))
    return out


def _loss(model: Any, x: Any, y: Any, vocab: int) -> Any:
    logits = model(x)
    return F.cross_entropy(logits.reshape(-1, vocab).float(), y.reshape(-1))


def run(
    recipe: str | None,
    steps: int = 300,
    device: str = "cpu",
    cfg: GPTConfig = GPTConfig(),
    lr: float = 3e-3,
    seed: int = 0,
    log_every: int = 0,
) -> dict[str, Any]:
    """Train ``steps`` steps (bfloat16 autocast; float8 Linears with ``recipe``); the losses and timings."""
    data = corpus()
    split = int(len(data) * 0.9)
    train, held_out = data[:split], data[split:]
    ac.manual_seed(seed)
    model = CharGPT(cfg, device)
    if recipe is not None:
        convert_to_float8_training(model, recipe)
    opt = ac.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.0)
    losses = []
    start = time.perf_counter()
    for x, y in batches(train, cfg, steps, seed):
        xt, yt = ac.tensor(x, device=device), ac.tensor(y, device=device)
        opt.zero_grad()
        with ac.autocast(xt.device.type, dtype=ac.bfloat16):
            loss = _loss(model, xt, yt, cfg.vocab)
        loss.backward()
        opt.step()
        losses.append(loss.detach())
        if log_every and len(losses) % log_every == 0:
            print(f"{recipe or 'bfloat16'}: step {len(losses)} loss {float(loss.item()):.4f}", flush=True)
    train_losses = [float(v) for v in ac.stack(losses).numpy()]
    seconds = time.perf_counter() - start
    with ac.no_grad(), ac.autocast(ac.device(device).type, dtype=ac.bfloat16):
        held = [
            float(_loss(model, ac.tensor(x, device=device), ac.tensor(y, device=device), cfg.vocab).item())
            for x, y in batches(held_out, cfg, 8, seed + 1)
        ]
    stats = summarize(float8_stats(model)) if recipe is not None else {}
    return {
        "recipe": recipe or "bfloat16",
        "device": device,
        "steps": steps,
        "config": asdict(cfg),
        "first_loss": train_losses[0],
        "train_loss_last10": float(np.mean(train_losses[-10:])),
        "final_loss": float(np.mean(held)),
        "seconds": seconds,
        "ms_per_step": 1000 * seconds / steps,
        "saturated": int(sum(row["saturated"] for row in stats.values())),
        "losses": train_losses,
    }


def compare(steps: int, device: str, recipes: tuple[str, ...] = RECIPES, cfg: GPTConfig = GPTConfig()) -> list[dict]:
    """The bfloat16 run, then one run per recipe, each with its final loss relative to bfloat16's."""
    base = run(None, steps, device, cfg)
    rows = [base] + [run(r, steps, device, cfg) for r in recipes]
    for row in rows:
        row["vs_bfloat16"] = row["final_loss"] / base["final_loss"] - 1.0
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--recipes", default=";".join(RECIPES), help="';'-separated recipe strings")
    parser.add_argument("--json", default=None, help="write the rows (with every step's loss) to this file")
    parser.add_argument(
        "--only",
        default=None,
        metavar="RECIPE",
        help="train one run ('bfloat16' or a recipe) and write its row to --json (runs in parallel processes)",
    )
    parser.add_argument("--table", nargs="+", metavar="JSON", help="print the table of rows saved by --only runs")
    args = parser.parse_args(argv)
    if args.only:
        row = run(None if args.only == "bfloat16" else args.only, args.steps, args.device, log_every=25)
        Path(args.json or f"{args.only}.json").write_text(json.dumps(row))
        return 0
    if args.table:
        rows = [json.loads(Path(p).read_text()) for p in args.table]
        base = next(r for r in rows if r["recipe"] == "bfloat16")
        for row in rows:
            row["vs_bfloat16"] = row["final_loss"] / base["final_loss"] - 1.0
        args.steps, args.device = base["steps"], base["device"]
    else:
        rows = compare(args.steps, args.device, tuple(r for r in args.recipes.split(";") if r))
    print(f"char-level GPT, {args.steps} steps on {args.device} (bfloat16 autocast; float8 Linears per recipe)")
    print(f"{'recipe':32} {'first':>7} {'train(last10)':>13} {'final(held-out)':>15} {'vs bf16':>8} {'ms/step':>8}")
    for r in rows:
        print(
            f"{r['recipe']:32} {r['first_loss']:7.4f} {r['train_loss_last10']:13.4f} {r['final_loss']:15.4f} "
            f"{100 * r['vs_bfloat16']:+7.2f}% {r['ms_per_step']:8.1f}"
        )
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))
    worst = max(abs(r["vs_bfloat16"]) for r in rows)
    return 0 if math.isfinite(worst) else 1


if __name__ == "__main__":
    sys.exit(main())
