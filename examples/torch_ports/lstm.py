"""A character-level recurrent language model (LSTM, GRU or Elman RNN), after the PyTorch examples' word_language_model.

Written against PyTorch; ``harness.py`` runs this same file with the word torch renamed.  The text is batchified
into columns and read in ``--bptt``-long chunks, the hidden state carried from chunk to chunk and detached
(truncated backpropagation through time), the gradient clipped, and the learning rate divided by 4 whenever the
validation loss stops improving.  Autocast by default: bfloat16 on the CPU (oneDNN has no float16 LSTM on
most CPUs), float16 with a GradScaler elsewhere; ``--amp none`` for float32.

    python lstm.py --epochs 4 --save-at-epoch 1 --checkpoint lstm.pt
    python lstm.py --epochs 4 --resume lstm.pt
    python lstm.py --amp none --dropout 0 --save-init init.npz     # then --init-weights init.npz elsewhere
"""

import argparse
import math
import time
from pathlib import Path

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

HERE = Path(__file__).resolve().parent


class RNNModel(nn.Module):
    """An encoder (embedding), a recurrent module and a decoder (linear), as word_language_model's."""

    def __init__(self, rnn_type, ntoken, ninp, nhid, nlayers, dropout=0.5, tie_weights=False):
        super().__init__()
        self.ntoken = ntoken
        self.drop = nn.Dropout(dropout)
        self.encoder = nn.Embedding(ntoken, ninp)
        if rnn_type in ["LSTM", "GRU"]:
            self.rnn = getattr(nn, rnn_type)(ninp, nhid, nlayers, dropout=dropout)
        else:
            nonlinearity = {"RNN_TANH": "tanh", "RNN_RELU": "relu"}[rnn_type]
            self.rnn = nn.RNN(ninp, nhid, nlayers, nonlinearity=nonlinearity, dropout=dropout)
        self.decoder = nn.Linear(nhid, ntoken)
        if tie_weights:
            if nhid != ninp:
                raise ValueError("when using the tied flag, nhid must be equal to emsize")
            self.decoder.weight = self.encoder.weight
        self.init_weights()
        self.rnn_type, self.nhid, self.nlayers = rnn_type, nhid, nlayers

    def init_weights(self):
        initrange = 0.1
        nn.init.uniform_(self.encoder.weight, -initrange, initrange)
        nn.init.zeros_(self.decoder.bias)
        nn.init.uniform_(self.decoder.weight, -initrange, initrange)

    def forward(self, input, hidden):  # noqa: A002 - word_language_model's name
        emb = self.drop(self.encoder(input))
        output, hidden = self.rnn(emb, hidden)
        output = self.drop(output)
        decoded = self.decoder(output).view(-1, self.ntoken)
        return F.log_softmax(decoded, dim=1), hidden

    def init_hidden(self, bsz):
        weight = next(self.parameters())
        if self.rnn_type == "LSTM":
            return (weight.new_zeros(self.nlayers, bsz, self.nhid), weight.new_zeros(self.nlayers, bsz, self.nhid))
        return weight.new_zeros(self.nlayers, bsz, self.nhid)


def load_corpus(val_fraction=0.1):
    text = (HERE / "data" / "tiny_text.txt").read_text(encoding="utf-8")
    chars = sorted(set(text))
    stoi = {ch: i for i, ch in enumerate(chars)}
    ids = torch.tensor([stoi[ch] for ch in text], dtype=torch.long)
    n_val = int(len(ids) * val_fraction)
    return ids[:-n_val], ids[-n_val:], chars


def batchify(data, bsz, device):
    nbatch = data.size(0) // bsz
    data = data.narrow(0, 0, nbatch * bsz)
    return data.view(bsz, -1).t().contiguous().to(device)


def get_batch(source, i, bptt):
    seq_len = min(bptt, len(source) - 1 - i)
    data = source[i : i + seq_len]
    target = source[i + 1 : i + 1 + seq_len].reshape(-1)
    return data, target


def repackage_hidden(h):
    """Wraps hidden states in new Tensors, to detach them from their history."""
    if isinstance(h, torch.Tensor):
        return h.detach()
    return tuple(repackage_hidden(v) for v in h)


@torch.no_grad()
def evaluate(model, source, bptt, eval_batch_size, device_type, amp_dtype):
    model.eval()
    total_loss = 0.0
    hidden = model.init_hidden(eval_batch_size)
    for i in range(0, source.size(0) - 1, bptt):
        data, targets = get_batch(source, i, bptt)
        with torch.autocast(device_type=device_type, dtype=amp_dtype or torch.float32, enabled=amp_dtype is not None):
            output, hidden = model(data, hidden)
            total_loss += len(data) * F.nll_loss(output.float(), targets).item()
        hidden = repackage_hidden(hidden)
    model.train()
    return total_loss / (len(source) - 1)


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--model", default="LSTM", choices=["LSTM", "GRU", "RNN_TANH", "RNN_RELU"])
    parser.add_argument("--emsize", type=int, default=32)
    parser.add_argument("--nhid", type=int, default=32)
    parser.add_argument("--nlayers", type=int, default=2)
    parser.add_argument("--lr", type=float, default=2.0)
    parser.add_argument("--clip", type=float, default=0.25)
    parser.add_argument("--epochs", type=int, default=4)
    parser.add_argument("--batches-per-epoch", type=int, default=None, help="limit each epoch to N batches")
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--bptt", type=int, default=16)
    parser.add_argument("--dropout", type=float, default=0.2)
    parser.add_argument("--tied", action="store_true", help="tie the word embedding and softmax weights")
    parser.add_argument("--amp", default=None, choices=["float16", "bfloat16", "none"], help="default: bfloat16 on cpu")
    parser.add_argument("--seed", type=int, default=1111)
    parser.add_argument("--checkpoint", default="lstm_ckpt.pt")
    parser.add_argument("--save-at-epoch", type=int, default=None, help="write a checkpoint after this epoch")
    parser.add_argument("--resume", default=None, help="continue from this checkpoint")
    parser.add_argument("--save-init", default=None, help="write the initial weights to this .npz")
    parser.add_argument("--init-weights", default=None, help="start from the weights in this .npz")
    return parser.parse_args(argv)


def main(argv=None):
    args = parse_args(argv)
    device = args.device
    device_type = torch.device(device).type
    amp = args.amp or ("bfloat16" if device_type == "cpu" else "float16")  # oneDNN has no float16 LSTM on most CPUs
    amp_dtype = None if amp == "none" else getattr(torch, amp)
    torch.manual_seed(args.seed)

    train_ids, val_ids, chars = load_corpus()
    eval_batch_size = 4
    train_data = batchify(train_ids, args.batch_size, device)
    val_data = batchify(val_ids, eval_batch_size, device)

    model = RNNModel(args.model, len(chars), args.emsize, args.nhid, args.nlayers, args.dropout, args.tied).to(device)
    if args.init_weights:
        arrays = np.load(args.init_weights)
        model.load_state_dict({name: torch.from_numpy(arrays[name]).to(device) for name in arrays.files})
    if args.save_init:
        np.savez(args.save_init, **{k: v.detach().cpu().numpy() for k, v in model.state_dict().items()})
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr)
    scaler = torch.amp.GradScaler(device_type, enabled=amp_dtype == torch.float16)

    start_epoch, best_val_loss = 0, None
    if args.resume:
        ckpt = torch.load(args.resume, map_location=device)
        model.load_state_dict(ckpt["model"])
        optimizer.load_state_dict(ckpt["optimizer"])
        scaler.load_state_dict(ckpt["scaler"])
        start_epoch, best_val_loss = ckpt["epoch"] + 1, ckpt["best_val_loss"]
        print(f"resumed from {args.resume} after epoch {ckpt['epoch']}")

    history = []
    for epoch in range(start_epoch, args.epochs):
        torch.manual_seed(args.seed + epoch)  # dropout depends only on the epoch
        model.train()
        hidden = model.init_hidden(args.batch_size)
        t0, steps = time.perf_counter(), 0
        for batch, i in enumerate(range(0, train_data.size(0) - 1, args.bptt)):
            if batch == args.batches_per_epoch:
                break
            data, targets = get_batch(train_data, i, args.bptt)
            # Starting each batch, we detach the hidden state from how it was previously produced.
            hidden = repackage_hidden(hidden)
            optimizer.zero_grad()
            with torch.autocast(
                device_type=device_type, dtype=amp_dtype or torch.float32, enabled=amp_dtype is not None
            ):
                output, hidden = model(data, hidden)
                loss = F.nll_loss(output.float(), targets)
            scaler.scale(loss).backward()
            scaler.unscale_(optimizer)
            # `clip_grad_norm` helps prevent the exploding gradient problem in RNNs / LSTMs.
            torch.nn.utils.clip_grad_norm_(model.parameters(), args.clip)
            scaler.step(optimizer)
            scaler.update()
            history.append(loss.item())
            steps += 1
        step_ms = (time.perf_counter() - t0) * 1000 / max(steps, 1)
        val_loss = evaluate(model, val_data, args.bptt, eval_batch_size, device_type, amp_dtype)
        lr = optimizer.param_groups[0]["lr"]
        print(
            f"epoch {epoch}: train loss {history[-1]:.4f}  val loss {val_loss:.4f}  val ppl {math.exp(val_loss):.2f}  "
            f"lr {lr:.3g}  {step_ms:.1f} ms/step"
        )
        if best_val_loss is None or val_loss < best_val_loss:
            best_val_loss = val_loss
        else:  # anneal the learning rate if no improvement has been seen in the validation set
            for group in optimizer.param_groups:
                group["lr"] /= 4.0
        if epoch == args.save_at_epoch:
            ckpt = {
                "model": model.state_dict(),
                "optimizer": optimizer.state_dict(),
                "scaler": scaler.state_dict(),
                "epoch": epoch,
                "best_val_loss": best_val_loss,
            }
            torch.save(ckpt, args.checkpoint)
            print(f"saved {args.checkpoint}")
    return history


if __name__ == "__main__":
    main()
