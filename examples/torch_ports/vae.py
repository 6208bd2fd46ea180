"""A variational autoencoder on 8x8 handwritten digits, with float16 autocast and a GradScaler.

Written against PyTorch; ``harness.py`` runs this same file with the word torch renamed.

    python vae.py --epochs 6 --save-at-epoch 2 --checkpoint vae.pt
    python vae.py --epochs 6 --resume vae.pt
"""

import argparse
import gzip
import time
from pathlib import Path

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F
from torch.utils.data import DataLoader, TensorDataset

HERE = Path(__file__).resolve().parent


class VAE(nn.Module):
    def __init__(self, in_features=64, hidden=128, latent=8):
        super().__init__()
        self.encoder = nn.Sequential(nn.Linear(in_features, hidden), nn.SiLU(), nn.Linear(hidden, hidden), nn.SiLU())
        self.to_mu = nn.Linear(hidden, latent)
        self.to_logvar = nn.Linear(hidden, latent)
        self.decoder = nn.Sequential(
            nn.Linear(latent, hidden), nn.SiLU(), nn.Linear(hidden, hidden), nn.SiLU(), nn.Linear(hidden, in_features)
        )

    def encode(self, x):
        h = self.encoder(x)
        return self.to_mu(h), self.to_logvar(h)

    def reparameterize(self, mu, logvar):
        std = (0.5 * logvar).exp()
        return mu + std * torch.randn_like(std)

    def forward(self, x):
        mu, logvar = self.encode(x)
        z = self.reparameterize(mu, logvar)
        return self.decoder(z), mu, logvar


def vae_loss(recon_logits, x, mu, logvar):
    """Negative ELBO per image: Bernoulli reconstruction term plus the KL to N(0, I)."""
    recon = F.binary_cross_entropy_with_logits(recon_logits, x, reduction="sum")
    kl = -0.5 * (1 + logvar - mu.pow(2) - logvar.exp()).sum()
    return (recon + kl) / x.size(0)


def load_digits(val_fraction=0.2):
    with gzip.open(HERE / "data" / "digits_400.csv.gz", "rt") as f:
        table = np.loadtxt(f, delimiter=",", dtype=np.float32)
    images = torch.from_numpy(table[:, :64] / 16.0)
    n_val = int(len(images) * val_fraction)
    return TensorDataset(images[n_val:]), TensorDataset(images[:n_val])


@torch.no_grad()
def evaluate(model, loader, device, device_type, amp_dtype):
    model.eval()
    total, count = 0.0, 0
    for (x,) in loader:
        x = x.to(device)
        with torch.autocast(device_type=device_type, dtype=amp_dtype):
            recon, mu, logvar = model(x)
            total += vae_loss(recon.float(), x, mu.float(), logvar.float()).item() * x.size(0)
        count += x.size(0)
    model.train()
    return total / count


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--epochs", type=int, default=10)
    parser.add_argument("--batches-per-epoch", type=int, default=None, help="limit each epoch to N batches")
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--lr", type=float, default=2e-3)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--checkpoint", default="vae_ckpt.pt")
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
    model = VAE().to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=0.01)
    warmup = torch.optim.lr_scheduler.LinearLR(optimizer, start_factor=0.2, total_iters=1)
    cosine = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=max(1, args.epochs - 1), eta_min=1e-4)
    scheduler = torch.optim.lr_scheduler.SequentialLR(optimizer, [warmup, cosine], milestones=[1])
    scaler = torch.amp.GradScaler(device_type)
    val_loader = DataLoader(val_set, batch_size=80)

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
        torch.manual_seed(args.seed + epoch)  # data order and the noise depend only on the epoch
        loader = DataLoader(train_set, batch_size=args.batch_size, shuffle=True, drop_last=True)
        t0 = time.perf_counter()
        steps = 0
        for (x,) in loader:
            if steps == args.batches_per_epoch:
                break
            x = x.to(device)
            with torch.autocast(device_type=device_type, dtype=amp_dtype):
                recon, mu, logvar = model(x)
            # the loss sums hundreds of terms: compute it in float32, outside the region
            loss = vae_loss(recon.float(), x, mu.float(), logvar.float())
            optimizer.zero_grad(set_to_none=True)
            scaler.scale(loss).backward()
            scaler.step(optimizer)
            scaler.update()
            history.append(loss.item())
            steps += 1
        scheduler.step()  # per epoch
        step_ms = (time.perf_counter() - t0) * 1000 / steps
        val_loss = evaluate(model, val_loader, device, device_type, amp_dtype)
        print(
            f"epoch {epoch}: train loss {history[-1]:.3f}  val loss {val_loss:.3f}  "
            f"lr {optimizer.param_groups[0]['lr']:.2e}  scale {scaler.get_scale():.0f}  {step_ms:.1f} ms/step"
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

    model.eval()
    with torch.inference_mode():
        z = torch.randn(4, 8, device=device)
        samples = model.decoder(z).sigmoid().view(4, 8, 8)
    print("4 samples, mean ink per image:", [round(v, 3) for v in samples.mean(dim=(1, 2)).tolist()])
    return history


if __name__ == "__main__":
    main()
