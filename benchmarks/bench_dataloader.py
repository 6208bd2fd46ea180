"""DataLoader per-batch time beside torch's, on the same data sets, in one process (issue 37).

Three data sets of the same 5,000 short words (makemore's task: predict each next character), each read by a
``RandomSampler(replacement=True)`` in batches of 32, as makemore's loader does:

- ``chars``: makemore's ``CharDataset`` as written, whose ``__getitem__`` makes its sample with the framework's
  own tensor ops (``tensor``, two ``zeros``, three slice assignments): the data set's ops dominate;
- ``numpy``: the same samples made with NumPy (many real data sets return arrays): the loader's sampling,
  fetching and collating dominate;
- ``tensors``: a ``TensorDataset`` of the encoded words (one gather per batch in both).

Each data set class is written once against a framework module ``fw`` and instantiated for torch and for
ampcore.  Every figure is the best of ``--repeats`` rounds of ``--batches`` batches, torch's rounds
interleaved with ampcore's so that both see the same host; torch runs with one thread.  The ratio is ampcore's
per-batch time over torch's; the target is 1.5x.  ``--workers N`` measures ``num_workers=N`` too (worker
processes in both).  ``sample`` is one ``dataset[i]`` by itself, to tell the data set's cost from the loader's.

    python benchmarks/bench_dataloader.py [--batches 200] [--repeats 7] [--workers 2] [--json out.json]
"""

from __future__ import annotations

import argparse
import importlib
import json
import platform
import random
import time
import timeit
from typing import Any

import numpy as np

TARGET = 1.5
BATCH = 32
ALPHABET = "abcdefghijklmnopqrstuvwxyz"


def cpu_model() -> str:
    """The CPU's model name (Linux /proc/cpuinfo), else what platform reports."""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def words(n: int = 5000, seed: int = 0) -> list[str]:
    rng = random.Random(seed)
    return ["".join(rng.choice(ALPHABET) for _ in range(rng.randint(3, 12))) for _ in range(n)]


def datasets(fw: Any, names: list[str]) -> dict[str, Any]:
    """The three data sets, written once against ``fw`` (torch or ampcore)."""
    stoi = {ch: i + 1 for i, ch in enumerate(ALPHABET)}
    longest = max(len(w) for w in names)

    class CharDataset(fw.utils.data.Dataset):  # makemore's, as written
        def __init__(self, words: list[str]) -> None:
            self.words = words
            self.max_word_length = longest

        def __len__(self) -> int:
            return len(self.words)

        def encode(self, word: str) -> Any:
            return fw.tensor([stoi[w] for w in word], dtype=fw.long)

        def __getitem__(self, idx: int) -> tuple[Any, Any]:
            word = self.words[idx]
            ix = self.encode(word)
            x = fw.zeros(self.max_word_length + 1, dtype=fw.long)
            y = fw.zeros(self.max_word_length + 1, dtype=fw.long)
            x[1 : 1 + len(ix)] = ix
            y[: len(ix)] = ix
            y[len(ix) + 1 :] = -1  # index -1 masks the loss at the inactive locations
            return x, y

    class NumpyCharDataset(fw.utils.data.Dataset):  # the same samples, made with NumPy
        def __init__(self, words: list[str]) -> None:
            self.words = words

        def __len__(self) -> int:
            return len(self.words)

        def __getitem__(self, idx: int) -> tuple[np.ndarray, np.ndarray]:
            ix = np.array([stoi[w] for w in self.words[idx]], dtype=np.int64)
            x = np.zeros(longest + 1, dtype=np.int64)
            y = np.zeros(longest + 1, dtype=np.int64)
            x[1 : 1 + len(ix)] = ix
            y[: len(ix)] = ix
            y[len(ix) + 1 :] = -1
            return x, y

    numpy_set = NumpyCharDataset(names)
    xs, ys = zip(*(numpy_set[i] for i in range(len(names))))
    tensor_set = fw.utils.data.TensorDataset(fw.tensor(np.stack(xs)), fw.tensor(np.stack(ys)))
    return {"chars": CharDataset(names), "numpy": numpy_set, "tensors": tensor_set}


def loader(fw: Any, dataset: Any, workers: int) -> Any:
    """makemore's loader: a RandomSampler with replacement over "infinitely" many samples, batches of 32."""
    sampler = fw.utils.data.RandomSampler(dataset, replacement=True, num_samples=10**10)
    extra = {"persistent_workers": True} if workers else {}
    return fw.utils.data.DataLoader(dataset, batch_size=BATCH, sampler=sampler, num_workers=workers, **extra)


def per_batch_ms(batches: Any, n: int) -> float:
    start = time.perf_counter()
    for _ in range(n):
        next(batches)
    return (time.perf_counter() - start) / n * 1e3


def measure(case: str, workers: int, frameworks: dict[str, Any], names: list[str], args: argparse.Namespace) -> dict:
    """Best-of-rounds per-batch time (and one sample's) of ``case`` for each framework, rounds interleaved."""
    iterators, sets = {}, {}
    for name, fw in frameworks.items():
        sets[name] = datasets(fw, names)[case]
        iterators[name] = iter(loader(fw, sets[name], workers))
        for _ in range(10):  # warm-up (and the workers' start)
            next(iterators[name])
    best = {name: float("inf") for name in frameworks}
    for _ in range(args.repeats):
        for name in frameworks:
            best[name] = min(best[name], per_batch_ms(iterators[name], args.batches))
    sample = {
        name: min(timeit.repeat(lambda d=sets[name]: d[7], number=500, repeat=args.repeats)) / 500 * 1e6
        for name in frameworks
    }
    row = {"case": case, "workers": workers, "ms_per_batch": best, "us_per_sample": sample}
    if "torch" in best:
        row["ratio"] = best["ampcore"] / best["torch"]
    return row


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--batches", type=int, default=200, help="batches per timed round")
    parser.add_argument("--repeats", type=int, default=7, help="rounds; the best is reported")
    parser.add_argument("--workers", type=int, default=0, help="also measure num_workers=N (0: only in-process)")
    parser.add_argument("--cases", nargs="+", default=["chars", "numpy", "tensors"])
    parser.add_argument("--json", help="write the rows here")
    args = parser.parse_args(argv)

    import ampcore

    ampcore.set_default_device("cpu")
    frameworks: dict[str, Any] = {"ampcore": ampcore}
    try:
        torch = importlib.import_module("torch")
        torch.set_num_threads(1)
        frameworks = {"torch": torch, "ampcore": ampcore}
    except ImportError:
        print("torch is not installed (pip install torch==2.13.0): ampcore's figures only")
    names = words()
    rows = [
        measure(case, workers, frameworks, names, args) for workers in sorted({0, args.workers}) for case in args.cases
    ]
    print(f"DataLoader, batch {BATCH}, RandomSampler(replacement=True); CPU: {cpu_model()}; target {TARGET}x torch")
    header = f"{'data set':10} {'workers':>7} {'torch ms':>9} {'ampcore ms':>10} {'ratio':>6}"
    print(header + "   sample us (torch / ampcore)")
    for row in rows:
        ms, us = row["ms_per_batch"], row["us_per_sample"]
        ratio = f"{row['ratio']:.2f}x" if "ratio" in row else "-"
        torch_ms = f"{ms['torch']:.3f}" if "torch" in ms else "-"
        torch_us = f"{us['torch']:.1f}" if "torch" in us else "-"
        print(
            f"{row['case']:10} {row['workers']:>7} {torch_ms:>9} {ms['ampcore']:>10.3f} {ratio:>6}   "
            f"{torch_us} / {us['ampcore']:.1f}"
        )
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"cpu": cpu_model(), "rows": rows}, f, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
