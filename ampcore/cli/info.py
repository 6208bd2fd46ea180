"""``ampcore info``: every backend found, available or not and why, its capabilities and kernels,
every plugin with its distribution and what it provides, and the plugins that failed to load."""

from __future__ import annotations

import argparse
import json
import platform
from typing import Any

from .. import __version__
from ..kernels import FUSED, PRIMITIVES
from ..plugins import broken_plugins, get_default_device, list_backends, registry, thread_info
from ..plugins.registry import BackendRecord, device_status
from ..plugins.threads import describe as describe_threads

__all__ = ["add_parser", "collect", "run"]


def add_parser(subparsers: Any) -> None:
    """Add ``info`` to the ``ampcore`` subcommands."""
    parser = subparsers.add_parser(
        "info",
        help="list backends, their capabilities and broken plugins",
        description="List installed backends, their capabilities, and broken plugins.",
    )
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    parser.set_defaults(run=run)


def collect() -> dict[str, Any]:
    """The report as plain data: backends highest priority first, then broken plugins."""
    records = sorted(list_backends(), key=lambda r: (-r.backend.priority, r.backend.name))
    try:
        default, default_error = str(get_default_device()), None
    except Exception as exc:  # noqa: BLE001 - no usable backend, or a bad AMPCORE_DEVICE: report it, don't crash the report
        default, default_error = None, f"{type(exc).__name__}: {exc}"
    return {
        "ampcore": __version__,
        "python": platform.python_version(),
        "default_device": default,
        "default_device_error": default_error,
        "threads": _threads(),
        "backends": [_backend_info(r) for r in records],
        "plugins": _plugins(records),
        "broken_plugins": [{"name": b.name, "stage": b.where, "error": b.error} for b in broken_plugins()],
    }


def _threads() -> dict[str, Any]:
    """The thread setting, its source and each backend's libraries' counts; a malformed variable is reported."""
    try:
        return thread_info()
    except ValueError as exc:
        return {"num_threads": None, "source": None, "backends": {}, "error": str(exc)}


def _plugins(records: list[BackendRecord]) -> list[dict[str, Any]]:
    """Every plugin, loaded or broken, with where it comes from and what it provides: backends, the kernels it
    installed on each backend (through ``ampcore_kernels``), and whether it adjusts cast policies."""
    eps = registry.entry_points()
    policy = {impl.plugin_name for impl in registry.pm.hook.ampcore_policy.get_hookimpls()}
    broken = {b.name for b in broken_plugins()}
    names = {name for name, _ in registry.pm.list_name_plugin()} | broken
    out = []
    for name in sorted(names):
        dist, version, value = eps.get(name, (None, None, None))
        kernels = {
            r.backend.name: sorted(k for k in r.backend.kernels.names() if r.backend.kernels.provider(k) == name)
            for r in records
            if r.plugin != name
        }
        out.append(
            {
                "name": name,
                "distribution": dist,
                "version": version,
                "entry_point": value,
                "backends": sorted(r.backend.name for r in records if r.plugin == name),
                "kernels": {b: ks for b, ks in kernels.items() if ks},
                "policy": name in policy,
                "broken": name in broken,
            }
        )
    return out


def _capture(backend: Any) -> str:
    """What a captured step (ampcore.compile) does on this backend: its own runner or fusion, or the core's."""
    try:
        return str(backend.capture_support())
    except Exception as exc:  # noqa: BLE001 - a backend bug must not hide the rest of the report
        return f"unknown ({type(exc).__name__}: {exc})"


def _backend_info(record: BackendRecord) -> dict[str, Any]:
    backend = record.backend
    status = record.availability()
    info: dict[str, Any] = {
        "name": backend.name,
        "device_type": backend.device_type,
        "available": status.ok,
        "reason": status.reason,
        "priority": backend.priority,
        "plugin": record.plugin,
        "distribution": record.distribution,
        "version": record.version,
        "entry_point": record.entry_point,
        "devices": [],
        "kernels": _kernels(backend),
        "capture": _capture(backend),
    }
    if status.ok:
        try:
            info["devices"] = [_device_info(backend, i) for i in range(backend.device_count())]
        except Exception as exc:  # noqa: BLE001 - a backend bug must not hide the rest of the report
            info["capabilities_error"] = f"{type(exc).__name__}: {exc}"
    else:  # devices it found but cannot use, each with its own reason (no library or no device: none)
        try:
            statuses = [(i, device_status(backend, i)) for i in range(backend.device_count())]
        except Exception:  # noqa: BLE001 - an unavailable backend may not even know its devices; its reason says why
            statuses = []
        info["devices"] = [{"index": i, "usable": False, "reason": st.reason} for i, st in statuses if not st.ok]
    return info


def _device_info(backend: Any, index: int) -> dict[str, Any]:
    """One device: usable with its capabilities, or unusable with the reason (which names the fix)."""
    status = device_status(backend, index)
    if not status.ok:
        return {"index": index, "usable": False, "reason": status.reason}
    return {"index": index, "usable": True, "reason": "", **backend.capabilities(index).as_dict()}


def _kernels(backend: Any) -> dict[str, Any]:
    table = backend.kernels
    own = [n for n in table.names() if table.provider(n) == backend.name]
    return {
        "native": len(own),
        "primitives": len(PRIMITIVES - set(table.missing_primitives())),
        "fused": {n: table.provider(n) or "core reference" for n in sorted(FUSED)},
        "reference": sorted(FUSED - set(table.names())),
        "overridden": {n: table.provider(n) for n in table.names() if table.provider(n) != backend.name},
    }


def run(args: argparse.Namespace) -> int:
    """Print the report (``--json``: as JSON); always succeeds, broken backends are part of the report."""
    data = collect()
    if args.json:
        print(json.dumps(data, indent=2, default=str))
    else:
        render(data)
    return 0


# --------------------------------------------------------------------------- rendering
def _size(n: float | None) -> str:
    if n is None:
        return "unknown"
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if n < 1024 or unit == "TiB":
            return f"{n:.1f} {unit}" if unit != "B" else f"{n} B"
        n /= 1024
    return str(n)


def _e(value: Any) -> str:
    """``value`` as text that rich prints literally: reasons and errors hold paths like "[/opt/cuda/lib64]",
    which rich would otherwise parse as markup (a MarkupError, or text silently dropped)."""
    from rich.markup import escape

    return escape(str(value))


_STANDARD_FIELDS = {
    "index",
    "usable",
    "reason",
    "device_name",
    "memory_bytes",
    "storable",
    "native",
    "emulated",
    "autocast_dtype",
    "policy",
    "fallback_ops",
    "float8",
    "float8_reason",
}


def _backend_panel(b: dict[str, Any]) -> Any:
    from rich.panel import Panel
    from rich.table import Table

    grid = Table.grid(padding=(0, 2))
    grid.add_column(style="bold")
    grid.add_column()
    if b["available"]:  # an available backend's reason is a note (a runtime that could not be set up, say)
        status = "[green]available[/]" + (f" [yellow](note: {_e(b['reason'])})[/]" if b["reason"] else "")
    else:
        status = f"[red]unavailable[/]: {_e(b['reason'])}"
    grid.add_row("status", status)
    grid.add_row("priority", _e(b["priority"]))
    for dev in b["devices"]:
        where = f"{b['name']}:{dev['index']}"
        if not dev["usable"]:
            grid.add_row("device", f"{_e(where)}  [red]unusable[/]: {_e(dev['reason'])}")
            continue
        grid.add_row("device", _e(f"{where}  {dev['device_name']}  memory {_size(dev['memory_bytes'])}"))
        grid.add_row("  storable", _e(", ".join(dev["storable"])))
        grid.add_row("  native", _e(", ".join(dev["native"])))
        grid.add_row("  emulated", _e(", ".join(dev["emulated"]) or "none"))
        grid.add_row("  autocast dtype", _e(dev["autocast_dtype"]))
        float8 = dev.get("float8", "none")  # native, emulated or none (Capabilities.float8)
        grid.add_row("  float8", _e(float8 + (f" ({dev['float8_reason']})" if dev.get("float8_reason") else "")))
        grid.add_row("  cast policy", _e(f"{dev['policy']} table (ampcore policy --device {b['name']})"))
        for dtype, ops in dev.get("fallback_ops", {}).items():
            grid.add_row(f"  float32 fallback ({_e(dtype)})", _e(", ".join(ops)))
        for key, value in dev.items():  # what the backend adds: platform, float16 tier, extensions, ...
            if key not in _STANDARD_FIELDS:
                text = ", ".join(map(str, value)) if isinstance(value, (list, tuple)) else str(value)
                grid.add_row(f"  {_e(key)}", _e(text))
    if "capabilities_error" in b:
        grid.add_row("capabilities", f"[red]{_e(b['capabilities_error'])}[/]")
    origin = f"plugin {b['plugin']}"
    if b["distribution"]:
        origin += f"  from {b['distribution']} {b['version']}  entry point {b['entry_point']}"
    grid.add_row("source", _e(origin))
    k = b["kernels"]
    grid.add_row("kernels", f"{k['native']} native, primitives {k['primitives']}/{len(PRIMITIVES)}")
    if b.get("capture"):
        grid.add_row("capture", _e(b["capture"]))
    by_provider: dict[str, list[str]] = {}
    for name, provider in k["fused"].items():
        by_provider.setdefault(provider, []).append(name)
    for i, (provider, names) in enumerate(sorted(by_provider.items())):
        grid.add_row("  fused" if i == 0 else "", _e(f"{provider}: {', '.join(names)}"))
    if k["overridden"]:
        grid.add_row("  from plugins", _e(", ".join(f"{n} ({p})" for n, p in k["overridden"].items())))
    return Panel(grid, title=f"[bold]{_e(b['name'])}[/]", title_align="left", expand=False)


def _provides(p: dict[str, Any]) -> str:
    parts = [f"backend {b}" for b in p["backends"]]
    parts += [f"kernels {', '.join(ks)} for {b}" for b, ks in p["kernels"].items()]
    parts += ["cast policy"] if p["policy"] else []
    return "; ".join(parts) or ("nothing (broken)" if p["broken"] else "nothing")


def _plugin_table(plugins: list[dict[str, Any]]) -> Any:
    """One row per plugin: where it comes from, and which backends and kernels it provides."""
    from rich.table import Table

    table = Table(title="plugins", title_justify="left")
    for column in ("name", "distribution", "entry point", "provides"):
        table.add_column(column, overflow="fold")
    for p in plugins:
        dist = f"{p['distribution']} {p['version']}" if p["distribution"] else "registered from code"
        table.add_row(_e(p["name"]), _e(dist), _e(p["entry_point"] or "-"), _e(_provides(p)))
    return table


def render(data: dict[str, Any]) -> None:
    """Print the report with rich: one panel per backend, then the broken plugins.

    Every value from backends and plugins is escaped, so brackets in it print as they are.
    """
    from rich.console import Console
    from rich.table import Table

    console = Console(highlight=False)
    default = (
        _e(data["default_device"]) if data["default_device"] else f"[red]none[/] ({_e(data['default_device_error'])})"
    )
    console.print(f"ampcore {_e(data['ampcore'])}  python {_e(data['python'])}  default device {default}")
    console.print(_e(describe_threads(data["threads"])))
    if not data["backends"]:
        console.print("[red]no backends installed[/]: pip install ampcore-cpu")
    for backend in data["backends"]:
        console.print(_backend_panel(backend))
    if data["plugins"]:
        console.print(_plugin_table(data["plugins"]))
    if not data["broken_plugins"]:
        console.print("broken plugins: none")
        return
    table = Table(title="broken plugins", title_justify="left")
    for column in ("name", "stage", "error"):
        table.add_column(column, overflow="fold")
    for b in data["broken_plugins"]:
        table.add_row(_e(b["name"]), _e(b["stage"]), _e(b["error"]))
    console.print(table)
