"""A small CNN that classifies 8x8 handwritten digits, with float16 autocast and a GradScaler.

Written against PyTorch; ``harness.py`` runs this same file with the word torch renamed.

    python cnn.py --epochs 6 --save-at-epoch 2 --checkpoint cnn.pt
    python cnn.py --epochs 6 --resume cnn.pt
"""

import argparse
import gzip
import time
from pathlib import Path

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset

HERE = Path(__file__).resolve().parent


class DigitNet(nn.Module):
    def __init__(self, num_classes=10, dropout=0.2):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 16, kernel_size=3, padding=1)
        self.bn1 = nn.BatchNorm2d(16)
        self.conv2 = nn.Conv2d(16, 32, kernel_size=3, padding=1)
        self.bn2 = nn.BatchNorm2d(32)
        self.dropout = nn.Dropout(dropout)
        self.fc = nn.Linear(32 * 2 * 2, num_classes)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.bn1(self.conv1(x))), 2)  # 8x8 -> 4x4
        x = F.max_pool2d(F.relu(self.bn2(self.conv2(x))), 2)  # 4x4 -> 2x2
        x = x.flatten(1)
        return self.fc(self.dropout(x))


def load_digits(val_fraction=0.2):
    with gzip.open(HERE / "data" / "digits_400.csv.gz", "rt") as f:
        table = np.loadtxt(f, delimiter=",", dtype=np.int64)
    images = torch.from_numpy((table[:, :64] / 16.0).astype(np.float32)).view(-1, 1, 8, 8)
    labels = torch.from_numpy(table[:, 64])
    n_val = int(len(labels) * val_fraction)
    return TensorDataset(images[n_val:], labels[n_val:]), TensorDataset(images[:n_val], labels[:n_val])


@torch.no_grad()
def evaluate(model, loader, device, device_type, amp_dtype):
    model.eval()
    correct, total, loss_sum = 0, 0, 0.0
    for x, y in loader:
        x, y = x.to(device), y.to(device)
        with torch.autocast(device_type=device_type, dtype=amp_dtype):
            logits = model(x)
            loss_sum += F.cross_entropy(logits, y, reduction="sum").item()
        correct += (logits.argmax(dim=1) == y).sum().item()
        total += y.size(0)
    model.train()
    return loss_sum / total, correct / total


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--epochs", type=int, default=8)
    parser.add_argument("--batches-per-epoch", type=int, default=None, help="limit each epoch to N batches")
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--lr", type=float, default=1e-2)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--checkpoint", default="cnn_ckpt.pt")
    parser.add_argument("--save-at-epoch", type=int, default=None, help="write a checkpoint after this epoch")
    parser.add_argument("--resume", default=None, help="continue from this checkpoint")
    return parser.parse_args(argv)


def main(argv=None):
    args = parse_args(argv)
    device = args.device
    device_type = torch.device(device).type
    amp_dtype = torch.float16
    torch.manual_seed(args.seed)

    train_set, val_set = load_digits()
    model = DigitNet().to(device)
    steps_per_epoch = len(train_set) // args.batch_size
    if args.batches_per_epoch is not None:
        steps_per_epoch = min(steps_per_epoch, args.batches_per_epoch)
    optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=1e-4, foreach=True)
    scheduler = torch.optim.lr_scheduler.OneCycleLR(
        optimizer, max_lr=args.lr, total_steps=args.epochs * steps_per_epoch, pct_start=0.25
    )
    scaler = torch.amp.GradScaler(device_type)
    val_loader = DataLoader(val_set, batch_size=64)

    start_epoch = 0
    if args.resume:
        ckpt = torch.load(args.resume, map_location=device, weights_only=True)
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
        for step, (images, labels) in enumerate(loader):
            if step == steps_per_epoch:
                break
            images, labels = images.to(device), labels.to(device)
            with torch.autocast(device_type=device_type, dtype=amp_dtype):
                loss = F.cross_entropy(model(images), labels)
            optimizer.zero_grad()
            scaler.scale(loss).backward()
            scaler.step(optimizer)
            scaler.update()
            scheduler.step()
            history.append(loss.item())
        step_ms = (time.perf_counter() - t0) * 1000 / steps_per_epoch
        val_loss, val_acc = evaluate(model, val_loader, device, device_type, amp_dtype)
        print(
            f"epoch {epoch}: train loss {loss:.4f}  val loss {val_loss:.4f}  val acc {val_acc:.1%}  "
            f"scale {scaler.get_scale():.0f}  {step_ms:.1f} ms/step"
        )
        if epoch == args.save_at_epoch:
            torch.save(
                {
                    "model": model.state_dict(),
                    "optimizer": optimizer.state_dict(),
                    "scheduler": scheduler.state_dict(),
                    "scaler": scaler.state_dict(),
                    "epoch": epoch,
                },
                args.checkpoint,
            )
            print(f"saved {args.checkpoint}")
    return history


if __name__ == "__main__":
    main()
