"""Autocast traces: for each op called in a region, what autocast chose and why.

``with ampcore.autocast("cpu", trace=True) as region: ...`` then
``print(region.trace)`` shows one row per op call: the op, its input dtypes,
the dtype autocast cast the inputs to (or ``-``), the output dtype, the
category and the reason (policy, capability fallback, ineligible call,
autocast disabled).
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

__all__ = ["Trace", "TraceRecord"]


@dataclass(frozen=True)
class TraceRecord:
    op: str
    device: str
    input_dtypes: tuple[str, ...]
    cast_to: str | None
    output_dtypes: tuple[str, ...]
    category: str
    reason: str

    def as_dict(self) -> dict[str, Any]:
        return {
            "op": self.op,
            "device": self.device,
            "input_dtypes": list(self.input_dtypes),
            "cast_to": self.cast_to,
            "output_dtypes": list(self.output_dtypes),
            "category": self.category,
            "reason": self.reason,
        }


class Trace:
    """The records of one or more autocast regions (safe to share between threads)."""

    _COLUMNS = ("op", "inputs", "cast to", "output", "category", "reason")

    def __init__(self) -> None:
        self._records: list[TraceRecord] = []
        self._lock = threading.Lock()

    def append(self, record: TraceRecord) -> None:
        with self._lock:
            self._records.append(record)

    @property
    def records(self) -> list[TraceRecord]:
        with self._lock:
            return list(self._records)

    def __iter__(self) -> Iterator[TraceRecord]:
        return iter(self.records)

    def __len__(self) -> int:
        return len(self._records)

    def __getitem__(self, i: int) -> TraceRecord:
        return self.records[i]

    def ops(self) -> list[str]:
        return [r.op for r in self.records]

    def clear(self) -> None:
        with self._lock:
            self._records.clear()

    def rows(self) -> list[tuple[str, ...]]:
        return [
            (
                r.op,
                ", ".join(r.input_dtypes) or "-",
                r.cast_to or "-",
                ", ".join(r.output_dtypes) or "-",
                r.category,
                r.reason,
            )
            for r in self.records
        ]

    def table(self) -> str:
        """The records as a plain-text table."""
        rows = [self._COLUMNS, *self.rows()]
        widths = [max(len(row[i]) for row in rows) for i in range(len(self._COLUMNS) - 1)]
        lines = ["  ".join(cell.ljust(w) for cell, w in zip(row, widths)) + "  " + row[-1] for row in rows]
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.table()

    def __repr__(self) -> str:
        return f"<Trace of {len(self)} op calls>"

    def __rich__(self) -> Any:
        from rich.table import Table

        table = Table(title="autocast trace")
        for column in self._COLUMNS:
            table.add_column(column)
        for row in self.rows():
            table.add_row(*row)
        return table
