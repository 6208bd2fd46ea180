"""``ampcore policy``: the cast policy autocast uses on a device, op by op, with where each decision came from."""

from __future__ import annotations

import argparse
import json
from typing import Any

from ..dispatch import registered_ops
from .common import CommandError, checked_device, console

__all__ = ["add_parser", "collect", "run"]


def add_parser(subparsers: Any) -> None:
    """Add ``policy`` to the ``ampcore`` subcommands."""
    parser = subparsers.add_parser(
        "policy",
        help="show the cast policy autocast uses on a device",
        description="Show which dtype autocast runs each op in on a device type, and why. Lists the ops ampcore "
        "implements (unlisted ones run in their inputs' types); --all adds every op the table lists.",
    )
    parser.add_argument("--device", metavar="NAME", help="backend name (default: the default device)")
    parser.add_argument("--op", action="append", metavar="OP", help="only these ops (repeatable)")
    parser.add_argument(
        "--category", choices=("lower", "fp32", "promote", "banned", "unlisted"), help="only ops of this category"
    )
    parser.add_argument("--all", action="store_true", help="include listed ops ampcore does not implement")
    parser.add_argument("--json", action="store_true", help="print as JSON")
    parser.set_defaults(run=run)


def collect(
    device: str | None, ops: list[str] | None = None, category: str | None = None, include_all: bool = False
) -> dict[str, Any]:
    """The policy of ``device``'s type as plain data: op -> category, source, whether ampcore implements it."""
    from .. import policy as P

    device_type = checked_device(device).type
    policy = P.get(device_type)
    table = _builtin_table(device_type)
    known = registered_ops()
    names = ops or sorted(set(known) | (set(policy.entries) if include_all else set()))
    rows = []
    for op in names:
        try:
            entry = policy.decision(op)
        except P.UnknownOpError as exc:
            raise CommandError(str(exc)) from exc
        source = _unlisted_source(op, table) if entry.source == "unlisted" else entry.source
        if category is None or entry.category.value == category:
            rows.append({"op": op, "category": entry.category.value, "source": source, "implemented": op in known})
    return {"device_type": device_type, "policy": policy.name, "ops": rows}


def _builtin_table(device_type: str) -> str:
    """The built-in table (``"cpu"``, ``"cuda"``, ...) the policy of ``device_type`` starts from."""
    from ..plugins import registry
    from ..tensor import capabilities_of

    return capabilities_of(registry.get_backend(device_type), 0).policy


def _unlisted_source(op: str, table: str) -> str:
    """Why an op is unlisted: on the cpu table, the torch 2.13 audit found no AutocastCPU kernel for it."""
    from ..policy.torch_cpu_audit import audit_rows

    rows = audit_rows()
    if table != "cpu" or op not in rows:
        return "unlisted"
    aten = rows[op][1]
    what = f"aten::{aten}" if aten else "its torch composition"
    return f"unlisted: torch 2.13 registers no AutocastCPU kernel for {what} (autocast_mode.cpp)"


def run(args: argparse.Namespace) -> int:
    data = collect(args.device, args.op, args.category, args.all)
    if args.json:
        print(json.dumps(data, indent=2))
        return 0
    from rich.table import Table

    title = f"cast policy on {data['device_type']!r}"
    rows = [
        (row["op"] if row["implemented"] else f"{row['op']} (not in ampcore)", row["category"], row["source"])
        for row in data["ops"]
    ]
    out = console()
    if not out.is_terminal:  # piped: plain columns, at most PLAIN_WIDTH wide, one op per line
        print("\n".join([title, *_plain_table(("op", "category", "source"), rows)]))
        return 0
    table = Table(title=title, title_justify="left")
    for column in ("op", "category", "source"):
        table.add_column(column)
    for row in rows:
        table.add_row(*row)
    out.print(table)
    return 0


PLAIN_WIDTH = 120  # columns of the piped table: the source wraps under itself beyond this


def _plain_table(header: tuple[str, str, str], rows: list[tuple[str, str, str]]) -> list[str]:
    """Rows as space-aligned columns without box drawing or trailing spaces; the last column wraps to keep
    every line within :data:`PLAIN_WIDTH` (its continuation lines are indented under it)."""
    import textwrap

    widths = [max(len(r[i]) for r in (header, *rows)) for i in range(2)]
    indent = widths[0] + widths[1] + 4
    lines = []
    for op, category, source in (header, *rows):
        wrapped = textwrap.wrap(source, max(20, PLAIN_WIDTH - indent)) or [""]
        lines.append(f"{op:<{widths[0]}}  {category:<{widths[1]}}  {wrapped[0]}".rstrip())
        lines.extend(" " * indent + more for more in wrapped[1:])
    return lines
