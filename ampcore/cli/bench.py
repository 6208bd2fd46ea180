"""``ampcore bench``: what AMP buys on each backend, float32 vs AMP side by side, as a table, JSON and a plot.

See :mod:`ampcore.bench.benchmark` for what is measured and how, and
``docs/bench.md`` for the JSON schema.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
from typing import Any

from ..bench import benchmark, models, report
from ..float8 import RECIPES
from .common import CommandError, checked_device, console

__all__ = ["add_parser", "run"]

_DEFAULTS = benchmark.BenchSettings(models.get_model("mlp"))


def add_parser(subparsers: Any) -> None:
    """Add ``bench`` to the ``ampcore`` subcommands."""
    parser = subparsers.add_parser(
        "bench",
        help="time float32 vs AMP training steps on each backend (and torch), with memory and loss",
        description="Train a benchmark model in float32 and in AMP (each low-precision dtype the device computes "
        "in) on every available backend, interleaved after warm-up, and report step time, throughput, "
        "speedup over float32, peak memory, bytes saved for backward, final loss and the loss-scale "
        "history.  With torch installed, torch's float32 and autocast steps are measured in the same "
        "run for comparison.  A device that fails while measured is listed as refused, with the reason, "
        "after the table; the exit status is 1 only when no device could be measured.",
    )
    parser.add_argument(
        "--device",
        action="append",
        default=None,
        metavar="DEVICE",
        help="device to measure, e.g. cpu or opencl:0; repeat or separate with commas "
        "(default: every device of every available backend)",
    )
    parser.add_argument(
        "--model",
        default=_DEFAULTS.model.name,
        choices=list(models.MODELS),
        help="benchmark model (see ampcore.bench.models)",
    )
    parser.add_argument(
        "--dtype",
        action="append",
        default=None,
        metavar="DTYPE",
        help="AMP dtype(s) to measure, float16 and/or bfloat16 (default: each one the device "
        "computes in); float32 always runs as the baseline",
    )
    parser.add_argument(
        "--float8",
        action="append",
        default=None,
        metavar="RECIPE",
        help="also train with the Linear layers in float8 under this recipe (tensorwise, rowwise, delayed, "
        "mxfp8, with ',key=value' fields), beside bfloat16; repeat for more, or 'all' for the four recipes",
    )
    parser.add_argument(
        "--compile",
        action="store_true",
        help="also time each ampcore configuration with its whole step captured (ampcore.compile), beside the "
        "eager one",
    )
    parser.add_argument("--steps", type=int, default=_DEFAULTS.steps, help="timed steps per configuration")
    parser.add_argument("--warmup", type=int, default=_DEFAULTS.warmup, help="untimed steps per configuration first")
    parser.add_argument("--batch", type=int, default=None, help="batch size (default: the model's)")
    parser.add_argument("--seed", type=int, default=_DEFAULTS.seed, help="seed for the weights and the batches")
    parser.add_argument(
        "--no-torch", dest="torch", action="store_false", help="do not measure torch even if it is installed"
    )
    parser.add_argument("--json", metavar="PATH", help="write the full result as JSON to PATH ('-': stdout)")
    parser.add_argument(
        "--plot", metavar="PATH", help="save a figure (step time, memory, loss curves) to PATH; needs matplotlib"
    )
    parser.add_argument(
        "--from", dest="source", metavar="JSON", help="show a saved result (table, --plot) instead of measuring"
    )
    parser.set_defaults(run=run)


def _split(values: list[str] | None) -> tuple[str, ...] | None:
    if not values:
        return None
    return tuple(part.strip() for value in values for part in value.split(",") if part.strip())


def _float8(values: list[str] | None) -> tuple[str, ...]:
    """The recipes of the repeated --float8 option; 'all' is each recipe with its defaults."""
    if not values:
        return ()
    return tuple(name for value in values for name in (list(RECIPES) if value == "all" else [value]))


def _settings(args: argparse.Namespace) -> benchmark.BenchSettings:
    devices = _split(args.device)
    for name in devices or ():
        checked_device(name)  # a bad or unavailable device is a one-line error before anything runs
    try:
        return benchmark.BenchSettings(
            models.get_model(args.model),
            devices,
            _split(args.dtype),
            args.steps,
            args.warmup,
            args.seed,
            args.batch,
            args.torch,
            _float8(args.float8),
            compile=args.compile,
        )
    except ValueError as exc:
        raise CommandError(str(exc)) from exc


def _load(path: str) -> dict[str, Any]:
    try:
        with open(path, encoding="utf-8") as f:
            result = json.load(f)
    except (OSError, ValueError) as exc:
        raise CommandError(f"cannot read the benchmark result {path!r}: {exc}") from exc
    if not isinstance(result, dict) or result.get("schema") != benchmark.SCHEMA:
        raise CommandError(f"{path!r} is not an ampcore bench result (schema {benchmark.SCHEMA!r})")
    return result


def _measuring_options(args: argparse.Namespace) -> list[str]:
    """The options given that choose what to measure, which a saved result (``--from``) cannot honour."""
    given = {
        "--device": args.device is not None,
        "--model": args.model != _DEFAULTS.model.name,
        "--dtype": args.dtype is not None,
        "--steps": args.steps != _DEFAULTS.steps,
        "--warmup": args.warmup != _DEFAULTS.warmup,
        "--batch": args.batch is not None,
        "--seed": args.seed != _DEFAULTS.seed,
        "--no-torch": not args.torch,
        "--compile": args.compile,
    }
    return [option for option, on in given.items() if on]


def _result(args: argparse.Namespace, out: Any) -> dict[str, Any]:
    """The saved result ``--from`` names, or a new measurement; CommandError (exit status 1 when every device
    was refused) saying why there is none."""
    if not args.source:
        try:
            return _measure(out, _settings(args))
        except benchmark.NothingMeasured as exc:
            raise CommandError(str(exc), status=1) from exc
    given = _measuring_options(args)
    if given:
        raise CommandError(
            f"{', '.join(given)} cannot apply to --from, which shows a saved result as measured; drop one or the other"
        )
    return _load(args.source)


def run(args: argparse.Namespace) -> int:
    """Measure (or load with ``--from``), print the table and the refused devices, write ``--json`` and
    ``--plot``."""
    if args.plot and importlib.util.find_spec("matplotlib") is None:
        raise CommandError("--plot needs matplotlib: pip install matplotlib (or ampcore[plot])")
    quiet = args.json == "-"
    out = console(stderr=quiet)
    result = _result(args, out)
    out.print(report.table(result))
    for line in report.refused_lines(result) + report.summary_lines(result):
        out.print(line, markup=False)  # a reason may hold brackets: "[/opt/cuda/lib64]" is not markup
    if args.json:
        text = json.dumps(result, indent=2)
        if quiet:
            print(text)
        else:
            with open(args.json, "w", encoding="utf-8") as f:
                f.write(text + "\n")
            out.print(f"result written to {args.json}")
    if args.plot:
        report.plot(result, args.plot)
        out.print(f"plot written to {args.plot}")
    return 0


def _measure(out: Any, settings: benchmark.BenchSettings) -> dict[str, Any]:
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    configs = benchmark.configurations(settings)
    out.print(
        f"ampcore bench: {settings.model.description}; {len(configs)} configurations: "
        + ", ".join(c.label for c in configs)
    )
    total = len(configs) * (1 + settings.warmup + settings.steps)
    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
    with Progress(*columns, console=out, transient=True) as progress:
        task = progress.add_task("memory", total=total)
        done = [0]

        def on_step(label: str) -> None:
            done[0] += 1
            phase = "memory" if done[0] <= len(configs) else "timing"
            progress.update(task, advance=1, description=f"{phase}: {label}")

        return benchmark.run_benchmark(settings, on_step)
