"""Showing a ``run_benchmark`` result: a rich table for the terminal and a matplotlib figure.

Both read only the result dict, so a saved JSON file can be shown again
(``ampcore bench --from result.json --plot out.png``).
"""

from __future__ import annotations

from typing import Any

from ..plugins.threads import describe as describe_threads

__all__ = ["table", "refused_lines", "summary_lines", "setup_lines", "plot"]

MIB = 2**20


def _ms(seconds: float) -> str:
    return f"{seconds * 1e3:.2f}"


def _ratio(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}x"


def _mib(value: int | None) -> str:
    return "-" if value is None else f"{value / MIB:.1f}"


def _scales(row: dict[str, Any]) -> str:
    scales = row["loss_scales"]
    if not scales:
        return "-"
    return f"{scales[0]:g}" if min(scales) == max(scales) else f"{scales[0]:g}..{scales[-1]:g} (min {min(scales):g})"


SHORT = {"float32": "fp32", "float16": "fp16 AMP", "bfloat16": "bf16 AMP"}


def table(result: dict[str, Any]) -> Any:
    """The result as one rich Table, one row per configuration."""
    from rich import box
    from rich.table import Table

    model, settings = result["model"], result["settings"]
    title = (
        f"{model['description'].split(', batch')[0]}, batch {model['batch']}: median of {settings['steps']} "
        f"steps after {settings['warmup']} warm-up; each device's configurations interleaved"
    )
    t = Table(title=title, box=box.SIMPLE_HEAD, padding=(0, 1), caption_justify="left")
    with_torch = any(row["framework"] == "torch" for row in result["configs"])
    with_captured = any(row.get("compiled") for row in result["configs"])
    columns = (
        "",
        "device",
        "precision",
        "ms/step",
        "IQR",
        "samples/s",
        "vs fp32",
        "vs torch",
        "vs eager",
        "peak MiB",
        "saved MiB",
        "final loss",
        "Δ vs fp32",
        "loss scale",
        "skipped",
    )
    for i, name in enumerate(columns):
        if (name != "vs torch" or with_torch) and (name != "vs eager" or with_captured):  # no all-'-' columns
            t.add_column(name, justify="left" if i < 3 else "right", no_wrap=i < 3)
    for row in result["configs"]:
        diff = row["final_loss_diff_vs_float32"]
        cells = (
            row["framework"],
            row["device"],
            SHORT.get(row["precision"], row["precision"])
            + (f" + f8 {row['float8']}" if row.get("float8") else "")
            + (" captured" if row.get("compiled") else ""),
            _ms(row["step_seconds"]["median"]),
            _ms(row["step_seconds"]["iqr"]),
            f"{row['samples_per_second']:.0f}",
            _ratio(row["speedup_vs_float32"]) if row["amp"] else "",
            *([_ratio(row["step_time_vs_torch"])] if with_torch else []),
            *([_ratio(row.get("speedup_vs_eager")) if row.get("compiled") else ""] if with_captured else []),
            _mib(row["peak_memory_bytes"]),
            _mib(row["saved_for_backward_bytes"]),
            "-" if row["final_loss"] is None else f"{row['final_loss']:.4f}",
            "" if diff is None or not row["amp"] else f"{diff:+.1e}",
            _scales(row),
            str(row["skipped_steps"]),
        )
        t.add_row(*cells)
    vs_torch = "  vs torch: ampcore step time / torch's in the same precision (<1: faster)." if with_torch else ""
    if with_captured:
        vs_torch += (
            "\ncaptured: the whole step replayed as one program (ampcore.compile); vs eager: its speedup over the "
            "same configuration run eagerly (>1: faster); its memory is not measured ('-')."
        )
    t.caption = (
        f"vs fp32: speedup over float32 on the same framework and device (>1: faster).{vs_torch}\npeak: device "
        "memory of building the configuration and training two steps ('-': not measurable).  saved: bytes kept "
        "for backward, parameters excluded.\n" + "\n".join(setup_lines(result))
    )
    return t


def setup_lines(result: dict[str, Any]) -> list[str]:
    """What was compared, and on how many threads: whether torch ran (and if not, why and how to add it), each
    device's compiled path (where its backend reports one), and the thread counts.  Results saved before these
    fields existed give fewer lines."""
    lines = []
    missing = result["settings"].get("torch_missing")
    if missing:
        lines.append(missing)
    elif not result["settings"].get("torch", True):
        lines.append("torch not measured (--no-torch)")
    compiled = [(b["device"], b.get("compiled")) for b in result.get("backends", [])]
    if any(flag is not None for _, flag in compiled):
        lines.append(
            "compiled kernels: "
            + ", ".join(f"{device} {'yes' if flag else 'no'}" for device, flag in compiled if flag is not None)
        )
    for b in result.get("backends", []):  # which GEMM ran each low-precision dtype, where a backend says (cpu)
        gemms = {k: v for k, v in b.get("capabilities", {}).items() if k.endswith("_gemm")}
        if gemms:
            lines.append(
                f"{b['device']} GEMMs: " + "; ".join(f"{k.removesuffix('_gemm')} {v}" for k, v in gemms.items())
            )
    threads = result.get("threads")
    if threads:
        line = describe_threads(threads["ampcore"])
        if threads.get("torch") is not None:
            line += f"; torch {threads['torch']}"
        lines.append(line)
    return lines


def refused_lines(result: dict[str, Any]) -> list[str]:
    """One line per device that could not be measured, with the reason (none in results saved before the
    ``refused`` list existed)."""
    return [f"{r['framework']} {r['device']} refused: {r['reason']}" for r in result.get("refused", [])]


def summary_lines(result: dict[str, Any]) -> list[str]:
    """One line per AMP configuration: what AMP bought over float32 on its device; and for each ampcore one
    with a torch twin, the two AMP speedups and step times side by side (the CUDA issue's targets)."""
    lines = []
    rows = {(r["framework"], r["device"].split(":")[0], r["precision"]): r for r in result["configs"]}
    for row in result["configs"]:
        twin = rows.get(("torch", row["device"].split(":")[0], row["precision"]))
        if row["framework"] != "ampcore" or not row["amp"] or twin is None or row["speedup_vs_float32"] is None:
            continue
        lines.append(
            f"{row['id']} vs torch: AMP speedup over float32 {row['speedup_vs_float32']:.2f}x (torch "
            f"{twin['speedup_vs_float32']:.2f}x); AMP step time {row['step_time_vs_torch']:.2f}x torch's"
        )
    for row in result["configs"]:
        if row.get("float8") and row.get("step_time_vs_reference") is not None:
            memory = row["peak_memory_vs_reference"]
            loss = row["final_loss_vs_reference"]
            lines.append(
                f"{row['id']}: step time {row['step_time_vs_reference']:.2f}x {row['precision']}'s, peak memory "
                f"{'not measurable' if memory is None else f'{memory:.2f}x'}, final loss "
                f"{'-' if loss is None else f'{100 * loss:+.2f}%'} vs {row['precision']}"
            )
    for row in result["configs"]:
        if not row["amp"] or row["speedup_vs_float32"] is None:
            continue
        memory = row["peak_memory_vs_float32"]
        memory_text = f"peak memory {memory:.2f}x" if memory is not None else "peak memory not measurable"
        diff = row["final_loss_diff_vs_float32"]
        lines.append(
            f"{row['id']}: {row['speedup_vs_float32']:.2f}x the float32 speed, {memory_text}, "
            f"saved-for-backward {_ratio(row['saved_bytes_vs_float32'])}, final loss "
            f"{'-' if diff is None else f'{diff:+.1e}'} vs float32, {row['skipped_steps']} skipped steps"
        )
    return lines


def plot(result: dict[str, Any], path: str) -> None:
    """Save a figure to ``path``: step time and memory per configuration, the float32 loss curves, and each
    AMP run's loss minus its float32 baseline's.

    Needs matplotlib (``pip install 'ampcore[plot]'``); ImportError otherwise.
    """
    import matplotlib

    matplotlib.use("Agg")  # files only: no display needed
    import matplotlib.pyplot as plt

    rows = result["configs"]
    labels = [row["id"] for row in rows]
    colors = [
        "tab:blue" if not row["amp"] else ("tab:orange" if row["precision"] == "float16" else "tab:green")
        for row in rows
    ]
    fig, (ax_time, ax_mem, ax_loss, ax_diff) = plt.subplots(1, 4, figsize=(24, 0.45 * len(rows) + 3.5))
    y = range(len(rows))
    medians = [row["step_seconds"]["median"] * 1e3 for row in rows]
    errors = [
        [(row["step_seconds"]["median"] - row["step_seconds"]["q1"]) * 1e3 for row in rows],
        [(row["step_seconds"]["q3"] - row["step_seconds"]["median"]) * 1e3 for row in rows],
    ]
    ax_time.barh(y, medians, xerr=errors, color=colors)
    ax_time.set_yticks(list(y), labels)
    ax_time.invert_yaxis()
    ax_time.set_xlabel("median step time, ms (bars: interquartile range)")

    peak = [(row["peak_memory_bytes"] or 0) / MIB for row in rows]
    saved = [row["saved_for_backward_bytes"] / MIB for row in rows]
    ax_mem.barh([i - 0.2 for i in y], peak, height=0.4, color=colors, label="peak device memory")
    ax_mem.barh([i + 0.2 for i in y], saved, height=0.4, color="tab:gray", label="saved for backward")
    ax_mem.set_yticks(list(y), labels)
    ax_mem.invert_yaxis()
    ax_mem.set_xlabel("MiB (no peak bar: not measurable)")
    ax_mem.legend(loc="lower right")

    by_id = {(row["framework"], row["device"], row["precision"]): row for row in rows}
    for row in rows:  # colours from the default cycle: one per configuration; torch dotted
        style = "-" if row["framework"] == "ampcore" else ":"
        steps = range(1, len(row["losses"]) + 1)
        if not row["amp"]:
            ax_loss.plot(steps, row["losses"], style, label=row["id"], alpha=0.8)
            continue
        base = by_id.get((row["framework"], row["device"], "float32"))
        if base is not None:
            diff = [a - b for a, b in zip(row["losses"], base["losses"])]
            ax_diff.plot(steps, diff, style, label=row["id"], alpha=0.8)
    ax_loss.set_xlabel("step (warm-up included)")
    ax_loss.set_ylabel("float32 training loss")
    ax_loss.legend(fontsize="small")
    ax_diff.axhline(0.0, color="black", linewidth=0.5)
    ax_diff.set_xlabel("step (warm-up included)")
    ax_diff.set_ylabel("AMP loss minus float32 loss (same framework and device)")
    ax_diff.legend(fontsize="small")

    model = result["model"]
    fig.suptitle(f"ampcore bench: {model['name']} (batch {model['batch']}), float32 vs AMP, {result['created']}")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
