"""A character-level GPT trained on a short text, with float16 autocast and a GradScaler.

Written against PyTorch; ``harness.py`` runs this same file with the word torch renamed.

    python gpt.py --epochs 4 --save-at-epoch 1 --checkpoint gpt.pt
    python gpt.py --epochs 4 --resume gpt.pt
"""

import argparse
import math
import time
from pathlib import Path

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset

HERE = Path(__file__).resolve().parent


class CausalSelfAttention(nn.Module):
    def __init__(self, n_embd, n_head, block_size, dropout):
        super().__init__()
        self.n_head = n_head
        self.qkv = nn.Linear(n_embd, 3 * n_embd)
        self.proj = nn.Linear(n_embd, n_embd)
        self.attn_drop = nn.Dropout(dropout)
        self.resid_drop = nn.Dropout(dropout)
        mask = torch.tril(torch.ones(block_size, block_size))
        self.register_buffer("mask", mask.view(1, 1, block_size, block_size))

    def forward(self, x):
        B, T, C = x.size()  # noqa: N806 - batch, time, channels: the names torch code uses
        q, k, v = self.qkv(x).split(C, dim=2)
        q = q.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        k = k.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        v = v.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
        att = att.masked_fill(self.mask[:, :, :T, :T] == 0, float("-inf"))
        att = self.attn_drop(F.softmax(att, dim=-1))
        y = (att @ v).transpose(1, 2).contiguous().view(B, T, C)
        return self.resid_drop(self.proj(y))


class Block(nn.Module):
    def __init__(self, n_embd, n_head, block_size, dropout):
        super().__init__()
        self.ln1 = nn.LayerNorm(n_embd)
        self.attn = CausalSelfAttention(n_embd, n_head, block_size, dropout)
        self.ln2 = nn.LayerNorm(n_embd)
        self.mlp = nn.Sequential(
            nn.Linear(n_embd, 4 * n_embd),
            nn.GELU(),
            nn.Linear(4 * n_embd, n_embd),
            nn.Dropout(dropout),
        )

    def forward(self, x):
        x = x + self.attn(self.ln1(x))
        return x + self.mlp(self.ln2(x))


class CharGPT(nn.Module):
    def __init__(self, vocab_size, block_size, n_layer=2, n_head=4, n_embd=64, dropout=0.1):
        super().__init__()
        self.block_size = block_size
        self.embed = nn.ModuleDict(
            {
                "token": nn.Embedding(vocab_size, n_embd),
                "position": nn.Embedding(block_size, n_embd),
            }
        )
        self.drop = nn.Dropout(dropout)
        self.blocks = nn.ModuleList([Block(n_embd, n_head, block_size, dropout) for _ in range(n_layer)])
        self.ln_f = nn.LayerNorm(n_embd)
        self.head = nn.Linear(n_embd, vocab_size, bias=False)
        self.apply(self._init_weights)

    def _init_weights(self, module):
        if isinstance(module, (nn.Linear, nn.Embedding)):
            nn.init.normal_(module.weight, mean=0.0, std=0.02)
        if isinstance(module, nn.Linear) and module.bias is not None:
            nn.init.zeros_(module.bias)

    def forward(self, idx, targets=None):
        B, T = idx.size()  # noqa: N806 - batch, time
        pos = torch.arange(T, dtype=torch.long, device=idx.device)
        x = self.drop(self.embed["token"](idx) + self.embed["position"](pos))
        for block in self.blocks:
            x = block(x)
        logits = self.head(self.ln_f(x))
        loss = None
        if targets is not None:
            loss = F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1))
        return logits, loss

    @torch.inference_mode()
    def generate(self, idx, max_new_tokens, temperature=1.0, top_k=None):
        for _ in range(max_new_tokens):
            logits, _ = self(idx[:, -self.block_size :])
            logits = logits[:, -1, :] / temperature
            if top_k is not None:
                v, _ = torch.topk(logits, min(top_k, logits.size(-1)))
                logits[logits < v[:, [-1]]] = -float("inf")
            probs = F.softmax(logits, dim=-1)
            idx = torch.cat((idx, torch.multinomial(probs, num_samples=1)), dim=1)
        return idx


def load_text(block_size, val_fraction=0.1):
    text = (HERE / "data" / "tiny_text.txt").read_text(encoding="utf-8")
    chars = sorted(set(text))
    stoi = {ch: i for i, ch in enumerate(chars)}
    data = torch.tensor([stoi[ch] for ch in text], dtype=torch.long)
    starts = range(0, len(data) - block_size - 1, block_size // 2)
    x = torch.stack([data[i : i + block_size] for i in starts])
    y = torch.stack([data[i + 1 : i + 1 + block_size] for i in starts])
    n_val = max(1, int(len(x) * val_fraction))
    train = TensorDataset(x[:-n_val], y[:-n_val])
    val = TensorDataset(x[-n_val:], y[-n_val:])
    return train, val, chars


def configure_optimizer(model, lr, weight_decay, device_type):
    decay = [p for p in model.parameters() if p.requires_grad and p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.requires_grad and p.dim() < 2]
    groups = [
        {"params": decay, "weight_decay": weight_decay},
        {"params": no_decay, "weight_decay": 0.0},
    ]
    return torch.optim.AdamW(groups, lr=lr, betas=(0.9, 0.95), fused=device_type == "cuda")


def warmup_cosine(warmup, total):
    def factor(step):
        if step < warmup:
            return (step + 1) / warmup
        progress = (step - warmup) / max(1, total - warmup)
        return 0.1 + 0.45 * (1.0 + math.cos(math.pi * min(1.0, progress)))

    return factor


@torch.no_grad()
def evaluate(model, loader, device, device_type, amp_dtype):
    model.eval()
    losses = []
    for x, y in loader:
        x, y = x.to(device), y.to(device)
        with torch.autocast(device_type=device_type, dtype=amp_dtype):
            _, loss = model(x, y)
        losses.append(loss.item())
    model.train()
    return sum(losses) / len(losses)


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--epochs", type=int, default=6)
    parser.add_argument("--batches-per-epoch", type=int, default=None, help="limit each epoch to N batches")
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--block-size", type=int, default=32)
    parser.add_argument("--lr", type=float, default=3e-3)
    parser.add_argument("--seed", type=int, default=1337)
    parser.add_argument("--checkpoint", default="gpt_ckpt.pt")
    parser.add_argument("--save-at-epoch", type=int, default=None, help="write a checkpoint after this epoch")
    parser.add_argument("--resume", default=None, help="continue from this checkpoint")
    parser.add_argument("--sample", type=int, default=80, help="characters to generate at the end")
    parser.add_argument("--compile", action="store_true", help="torch.compile the model (forward and backward)")
    return parser.parse_args(argv)


def main(argv=None):
    args = parse_args(argv)
    device = args.device
    device_type = torch.device(device).type
    amp_dtype = torch.float16
    torch.manual_seed(args.seed)

    train_set, val_set, chars = load_text(args.block_size)
    model = CharGPT(len(chars), args.block_size).to(device)
    if args.compile:
        model = torch.compile(model)
    steps_per_epoch = len(train_set) // args.batch_size
    if args.batches_per_epoch is not None:
        steps_per_epoch = min(steps_per_epoch, args.batches_per_epoch)
    total_steps = args.epochs * steps_per_epoch
    optimizer = configure_optimizer(model, args.lr, 0.1, device_type)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, warmup_cosine(steps_per_epoch, total_steps))
    scaler = torch.amp.GradScaler(device_type)
    val_loader = DataLoader(val_set, batch_size=args.batch_size)

    start_epoch = 0
    if args.resume:
        ckpt = torch.load(args.resume, map_location=device)
        model.load_state_dict(ckpt["model"])
        optimizer.load_state_dict(ckpt["optimizer"])
        scheduler.load_state_dict(ckpt["scheduler"])
        scaler.load_state_dict(ckpt["scaler"])
        start_epoch = ckpt["epoch"] + 1
        print(f"resumed from {args.resume} after epoch {ckpt['epoch']}")

    history = []
    for epoch in range(start_epoch, args.epochs):
        torch.manual_seed(args.seed + epoch)  # data order and dropout depend only on the epoch
        loader = DataLoader(train_set, batch_size=args.batch_size, shuffle=True, drop_last=True)
        t0 = time.perf_counter()
        for step, (x, y) in enumerate(loader):
            if step == steps_per_epoch:
                break
            x, y = x.to(device), y.to(device)
            with torch.autocast(device_type=device_type, dtype=amp_dtype):
                _, loss = model(x, y)
            optimizer.zero_grad(set_to_none=True)
            scaler.scale(loss).backward()
            scaler.unscale_(optimizer)
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            scaler.step(optimizer)
            scaler.update()
            scheduler.step()
            history.append(loss.item())
        step_ms = (time.perf_counter() - t0) * 1000 / steps_per_epoch
        val_loss = evaluate(model, val_loader, device, device_type, amp_dtype)
        print(
            f"epoch {epoch}: train loss {history[-1]:.4f}  val loss {val_loss:.4f}  "
            f"lr {scheduler.get_last_lr()[0]:.2e}  scale {scaler.get_scale():.0f}  {step_ms:.1f} ms/step"
        )
        if epoch == args.save_at_epoch:
            ckpt = {
                "model": model.state_dict(),
                "optimizer": optimizer.state_dict(),
                "scheduler": scheduler.state_dict(),
                "scaler": scaler.state_dict(),
                "epoch": epoch,
            }
            torch.save(ckpt, args.checkpoint)
            print(f"saved {args.checkpoint}")

    if args.sample:
        model.eval()
        context = torch.zeros((1, 1), dtype=torch.long, device=device)
        out = model.generate(context, args.sample, temperature=0.8, top_k=10)
        print("".join(chars[i] for i in out[0].tolist()))
    return history


if __name__ == "__main__":
    main()
