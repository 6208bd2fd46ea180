"""``ampcore train``: train the digits MLP on a backend, with a progress bar, and report accuracy and time."""

from __future__ import annotations

import argparse
import json
from typing import Any

from .. import training
from .common import CommandError, checked_device

__all__ = ["add_parser", "run"]

_DEFAULTS = training.TrainConfig()


def add_parser(subparsers: Any) -> None:
    """Add ``train`` to the ``ampcore`` subcommands."""
    parser = subparsers.add_parser(
        "train", help="train a small MLP on the digits data set",
        description="Train an MLP (64-128-128-10) on the UCI digits with AdamW, and report train/test accuracy.",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    parser.add_argument("--device", default=None,
                        help="device such as 'cpu' or 'opencl:0' (default: the best available backend)")
    parser.add_argument("--epochs", type=int, default=_DEFAULTS.epochs, help="passes over the training set")
    parser.add_argument("--batch-size", type=int, default=_DEFAULTS.batch_size, help="rows per step")
    parser.add_argument("--lr", type=float, default=_DEFAULTS.lr, help="AdamW learning rate")
    parser.add_argument("--seed", type=int, default=_DEFAULTS.seed, help="seed for the split, init and batch order")
    parser.add_argument("--dtype", default=_DEFAULTS.dtype,
                        help="training dtype; only float32 until mixed precision arrives (issue #4)")
    parser.add_argument("--json", action="store_true", help="print the result as JSON instead of a progress bar")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    """Train and print accuracy and time; CommandError for a bad device or option."""
    device = checked_device(args.device)
    try:
        config = training.TrainConfig(device=str(device), dtype=args.dtype, epochs=args.epochs,
                                      batch_size=args.batch_size, lr=args.lr, seed=args.seed)
    except ValueError as exc:
        raise CommandError(str(exc)) from exc
    if args.json:
        print(json.dumps(training.train(config).as_dict(), indent=2))
        return 0
    result = _train_with_progress(config)
    print(f"train accuracy {result.train_accuracy:.4f}  test accuracy {result.test_accuracy:.4f}  "
          f"final loss {result.final_loss:.4f}  {result.steps} steps in {result.seconds:.1f} s on {result.device} "
          f"({result.dtype})")
    return 0


def _train_with_progress(config: training.TrainConfig) -> training.TrainResult:
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    console = Console(highlight=False)
    console.print(f"training on {config.device} in {config.dtype}: {config.epochs} epochs, "
                  f"batch size {config.batch_size}, lr {config.lr:g}, seed {config.seed}")
    columns = (TextColumn("epoch {task.fields[epoch]}"), BarColumn(), TextColumn("step"), MofNCompleteColumn(),
               TextColumn("loss {task.fields[loss]:.4f}"), TimeElapsedColumn())
    with Progress(*columns, console=console) as progress:
        task = progress.add_task("train", total=None, epoch=f"0/{config.epochs}", loss=float("nan"))

        def on_step(info: training.StepInfo) -> None:
            progress.update(task, completed=info.step, total=info.total_steps,
                            epoch=f"{info.epoch}/{info.epochs}", loss=info.loss)

        return training.train(config, on_step=on_step)
