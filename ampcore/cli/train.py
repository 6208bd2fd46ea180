"""``ampcore train``: train the digits MLP with AMP on a backend, with a progress bar, and report accuracy.

``--compare`` trains the float32 baseline too (same seed, same batches) and
prints the two runs side by side.  Each step is captured by default
(:func:`ampcore.compile`); ``--eager`` runs it through the op layer, and
``--compile`` trains each run both ways and prints them side by side.  ``--nproc N`` trains data parallel on N MPI
ranks: it starts ``mpiexec -n N`` (the one installed with ``ampcore[mpi]``) on
this same command, or runs as one rank when ``mpiexec -n N ampcore train``
started it; rank 0 prints the summary.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from .. import training
from ..plugins import get_backend
from ..plugins.capabilities import capabilities_of
from .common import CommandError, checked_device, console

if TYPE_CHECKING:
    from ..distributed.communicator import Communicator

__all__ = ["add_parser", "run"]

_DEFAULTS = training.TrainConfig()
COMPARE_TITLE = "mixed precision vs the float32 baseline (same seed and batches)"
COMPILE_TITLE = "the step captured (ampcore.compile) vs eager (same seed and batches)"


def add_parser(subparsers: Any) -> None:
    """Add ``train`` to the ``ampcore`` subcommands."""
    parser = subparsers.add_parser(
        "train",
        help="train a small MLP on the digits data set with mixed precision",
        description="Train an MLP (64-128-128-10) on the UCI digits with AdamW under autocast (float16 with a "
        "GradScaler, or bfloat16), and report train/test accuracy.",
    )
    parser.add_argument(
        "--device", default=None, help="device such as 'cpu' or 'opencl:0' (default: the best available backend)"
    )
    parser.add_argument(
        "--dtype",
        default=None,
        help="autocast dtype: float16 (fp16) or bfloat16 (bf16); default: the device's own, bfloat16 on cpu; "
        "float32 (fp32) is the same as --no-amp",
    )
    parser.add_argument("--no-amp", dest="amp", action="store_false", help="train the float32 baseline only")
    parser.add_argument("--compare", action="store_true", help="also train the float32 baseline and print both")
    parser.add_argument(
        "--eager", action="store_true", help="run each step through the op layer (default: capture the step)"
    )
    parser.add_argument(
        "--compile",
        action="store_true",
        help="train each run both ways, the step captured (ampcore.compile) and eager, and print them side by side",
    )
    parser.add_argument("--epochs", type=int, default=_DEFAULTS.epochs, help="passes over the training set")
    parser.add_argument("--batch-size", type=int, default=_DEFAULTS.batch_size, help="rows per step")
    parser.add_argument("--lr", type=float, default=_DEFAULTS.lr, help="AdamW learning rate")
    parser.add_argument("--seed", type=int, default=_DEFAULTS.seed, help="seed for the split, init and batch order")
    parser.add_argument(
        "--float8",
        default=None,
        metavar="RECIPE",
        help="train the Linear layers in float8 with this recipe: tensorwise, rowwise, delayed or mxfp8, "
        "optionally with fields (e.g. 'delayed,amax_history_len=16'); see docs/float8.md",
    )
    parser.add_argument("--json", action="store_true", help="print the result(s) as JSON instead of a progress bar")
    parser.add_argument(
        "--nproc",
        type=int,
        default=None,
        help="train data parallel on this many MPI ranks (starts mpiexec -n NPROC; needs "
        "pip install 'ampcore[mpi]'); --batch-size is then per rank",
    )
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    """Train (and with ``--compare`` the float32 baseline), print the results; CommandError for bad options."""
    _normalize_dtype(args)
    _check_conflicts(args)
    job_size = _mpi_job_size()
    nproc = _checked_nproc(args.nproc, job_size)
    device = checked_device(args.device)
    try:
        config = training.TrainConfig(
            device=str(device),
            dtype=args.dtype,
            amp=args.amp,
            epochs=args.epochs,
            batch_size=args.batch_size,
            lr=args.lr,
            seed=args.seed,
            float8=args.float8,
            compile=not args.eager,
        )
    except ValueError as exc:
        raise CommandError(str(exc)) from exc
    if nproc > 1 and job_size == 1:
        return _launch(nproc, args.argv)  # options checked once, here, before any rank starts
    configs = [config, replace(config, amp=False, float8=None)] if args.compare else [config]
    if args.compile:  # each run captured, then eager
        configs = [replace(c, compile=mode) for c in configs for mode in (True, False)]
    group = _join_job() if job_size > 1 else None
    quiet = group is not None and group.rank != 0  # one summary, from rank 0
    if args.json:
        rows = [training.train(c, process_group=group).as_dict() for c in configs]
        if not quiet:
            print(json.dumps(rows if len(rows) > 1 else rows[0], indent=2))
        return 0
    out = console()
    out.quiet = quiet
    tip = capabilities_of(get_backend(device.type), device.index).extra.get("tip")
    if tip:  # a backend's one line on what would make this device faster (cpu: the mkl extra)
        out.print(f"tip: {tip}", markup=False)
    results = [_train_with_progress(out, c, group) for c in configs]
    if len(results) > 1:
        out.print(COMPARE_TITLE if args.compare else COMPILE_TITLE)
        out.print(_comparison(results))
    return 0


# Set by the process managers that start ranks: MPICH's hydra (PMI), Open MPI, Slurm.
_JOB_SIZE_VARIABLES = ("PMI_SIZE", "OMPI_COMM_WORLD_SIZE", "PMIX_SIZE")


def _mpi_job_size() -> int:
    """How many ranks the MPI job this process belongs to has (1 outside mpiexec)."""
    for name in _JOB_SIZE_VARIABLES:
        value = os.environ.get(name, "")
        if value.isdigit():
            return int(value)
    return 1


def _checked_nproc(nproc: int | None, job_size: int) -> int:
    if nproc is None:
        return job_size
    if nproc < 1:
        raise CommandError(f"--nproc must be a positive number of processes, got {nproc}")
    if job_size > 1 and nproc != job_size:
        raise CommandError(f"--nproc {nproc} but mpiexec started {job_size} ranks; drop --nproc or make them equal")
    return nproc


def _launch(nproc: int, argv: list[str]) -> int:
    """Run this same command on ``nproc`` ranks under mpiexec; its exit status is ours."""
    try:
        import mpi4py  # noqa: F401 - only to fail early, with the fix, before starting ranks

        from ..distributed.launch import mpiexec_command, rank_environment, rank_threads

        command = mpiexec_command(nproc, [sys.executable, "-m", "ampcore", *argv])
    except (ImportError, FileNotFoundError) as exc:
        raise CommandError(
            f"--nproc needs mpi4py and mpiexec ({exc}); install them with: pip install 'ampcore[mpi]'"
        ) from exc
    print(rank_threads(nproc).describe(), file=sys.stderr)
    return subprocess.run(command, env=rank_environment(nproc)).returncode


def _join_job() -> Communicator:
    from ..distributed import init

    try:
        return init()
    except ImportError as exc:
        raise CommandError(str(exc)) from exc


def _normalize_dtype(args: argparse.Namespace) -> None:
    """``--dtype`` by its canonical name (``fp16`` -> ``float16``) in ``args.dtype``, the spelling the user typed in
    ``args.dtype_given`` (errors quote it); CommandError for a name that is not a training dtype."""
    args.dtype_given = args.dtype
    try:
        args.dtype = training.training_dtype_name(args.dtype)
    except ValueError as exc:
        raise CommandError(f"--dtype: {exc}".replace("leave it unset", "leave --dtype out")) from exc


def _check_conflicts(args: argparse.Namespace) -> None:
    """CommandError for options that ask for contradictory runs (one of them would be silently ignored); the
    message names only the options the user gave."""
    if args.eager and args.compile:
        raise CommandError(
            "--compile trains a captured run beside an eager one, but --eager turns capture off; drop one"
        )
    if not args.amp and args.dtype not in (None, "float32"):
        given = args.dtype_given
        raise CommandError(f"--no-amp trains in float32 but --dtype asks for {given!r}; drop one of them")
    if args.compare:
        dtype = f"--dtype {args.dtype_given}"
        given = [option for option, on in (("--no-amp", not args.amp), (dtype, args.dtype == "float32")) if on]
        if given:
            options = " and ".join(given)
            raise CommandError(
                f"--compare trains an AMP run beside the float32 baseline, but {options} "
                f"turn{'' if len(given) > 1 else 's'} AMP off; drop {options}"
            )


def _train_with_progress(out: Any, config: training.TrainConfig, group: Any = None) -> training.TrainResult:
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    dtype = training.training_dtype(config, checked_device(config.device)).name
    scaling = "GradScaler on" if dtype == "float16" else "no loss scaling needed"
    mode = f"autocast to {dtype}, {scaling}" if dtype != "float32" else "float32 (no AMP)"
    if config.float8 is not None:
        mode += f"; Linear layers in float8 (recipe {config.float8})"
    ranks = "" if group is None else f" x {group.size} ranks (data parallel)"
    capture = "step captured (ampcore.compile)" if config.compile else "eager"
    out.print(
        f"training on {config.device} in {dtype}: {mode}; {capture}; {_count(config.epochs, 'epoch')}, batch size "
        f"{config.batch_size}{ranks}, lr {config.lr:g}, seed {config.seed}"
    )
    columns = (
        TextColumn("epoch {task.fields[epoch]}"),
        BarColumn(),
        TextColumn("step"),
        MofNCompleteColumn(),
        TextColumn("loss {task.fields[loss]:.4f}"),
        TextColumn("scale {task.fields[scale]}"),
        TextColumn("skipped {task.fields[skipped]}"),
        TimeElapsedColumn(),
    )
    with Progress(*columns, console=out) as progress:
        task = progress.add_task(
            "train", total=None, epoch=f"0/{config.epochs}", loss=float("nan"), scale="-", skipped=0
        )

        def on_progress(info: training.Progress) -> None:
            scale = "-" if info.loss_scale is None else f"{info.loss_scale:g}"
            progress.update(
                task,
                completed=info.step,
                total=info.total_steps,
                epoch=f"{info.epoch}/{info.epochs}",
                loss=info.loss,
                scale=scale,
                skipped=info.skipped_steps,
            )

        result = training.train(config, on_progress=on_progress, process_group=group)
    scale = "" if result.loss_scale is None else f"  loss scale {result.loss_scale:g}"
    out.print(
        f"train accuracy {result.train_accuracy:.4f}  test accuracy {result.test_accuracy:.4f}  "
        f"final loss {result.final_loss:.4f}  {result.steps} steps ({result.skipped_steps} skipped) in "
        f"{result.seconds:.1f} s on {result.device} ({result.dtype}){scale}  "
        f"{result.host_syncs_per_step:.2f} host syncs/step{_progress_reads(result)}{_captured(result)}"
    )
    if result.float8_stats:
        out.print(_float8_table(result))
    if result.world_size > 1:
        share = result.collective_seconds / result.seconds if result.seconds else 0.0
        out.print(
            f"data parallel on {result.world_size} ranks: {result.allreduce_bytes_per_step:,.0f} bytes "
            f"all-reduced per step per rank, {result.collective_seconds:.2f} s in collectives on rank 0 "
            f"({share:.0%} of its training time)"
        )
    return result


def _count(n: int, noun: str) -> str:
    """``1 epoch``, ``2 epochs``."""
    return f"{n} {noun}{'' if n == 1 else 's'}"


def _float8_table(result: training.TrainResult) -> Any:
    from rich.table import Table

    table = Table(title=f"float8 casts (recipe {result.float8}): the last step's amax and scale, saturated values")
    for column in ("layer.tensor", "amax", "scale", "saturated", "steps"):
        table.add_column(column, justify="left" if column == "layer.tensor" else "right")
    for name, row in result.float8_stats.items():
        table.add_row(name, f"{row['amax']:.4g}", f"{row['scale']:.4g}", str(row["saturated"]), str(row["steps"]))
    return table


def _captured(result: training.TrainResult) -> str:
    if not result.compiled:
        return ""
    return f"  {result.captured_steps} of {result.steps} steps replayed captured"


def _progress_reads(result: training.TrainResult) -> str:
    reads = result.host_syncs_by_reason.get(training.PROGRESS, 0)
    return f" (+{reads} progress-bar reads)" if reads else ""


def _comparison(results: list[training.TrainResult]) -> Any:
    from rich.table import Table

    # The title as a line of its own: a table title wraps at the table's width, mid-phrase.
    table = Table(title=None)
    table.add_column("")
    modes = {r.compiled for r in results}
    for r in results:
        float8 = f" + float8 {r.float8}" if r.float8 else ""
        capture = (" captured" if r.compiled else " eager") if len(modes) > 1 else ""
        table.add_column(f"{r.dtype}{' (AMP)' if r.amp else ''}{float8}{capture}", justify="right")
    rows = [
        ("test accuracy", lambda r: f"{r.test_accuracy:.4f}"),
        ("train accuracy", lambda r: f"{r.train_accuracy:.4f}"),
        ("final loss", lambda r: f"{r.final_loss:.4f}"),
        ("skipped steps", lambda r: str(r.skipped_steps)),
        ("final loss scale", lambda r: "-" if r.loss_scale is None else f"{r.loss_scale:g}"),
        ("seconds", lambda r: f"{r.seconds:.1f}"),
        ("host syncs / step", lambda r: f"{r.host_syncs_per_step:.2f}"),
    ]
    for label, cell in rows:
        table.add_row(label, *(cell(r) for r in results))
    captions = []
    amp = [r for r in results if r.amp]
    base = [r for r in results if not r.amp]
    if amp and base:  # AMP against float32, both captured or both eager
        a, b = amp[0], next((r for r in base if r.compiled == amp[0].compiled), base[0])
        captions.append(f"test accuracy difference: {100 * (a.test_accuracy - b.test_accuracy):+.2f} points")
        captions.append(f"AMP seconds / float32 seconds: {a.seconds / b.seconds:.2f}x" if b.seconds else "")
    for captured in (r for r in results if r.compiled):
        eager = next((r for r in results if not r.compiled and r.dtype == captured.dtype), None)
        if eager is not None and captured.seconds:
            captions.append(f"{captured.dtype}: captured {eager.seconds / captured.seconds:.2f}x faster than eager")
    table.caption = "; ".join(c for c in captions if c)
    return table
