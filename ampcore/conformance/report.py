"""The conformance report: each (check, op, dtype) cell's outcome per backend, as a table and as JSON."""

from __future__ import annotations

import io
import platform
import textwrap
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

__all__ = ["Case", "TestResult", "BackendReport", "OUTCOMES", "SECTIONS", "LEGEND", "section_order"]

# Report sections (check modules) in dependency order: what a backend declares and stores, then its kernels,
# then what is built on them.  A broken kernel's own failure is listed before the ops it breaks.
SECTIONS = (
    "contract",
    "storage",
    "capabilities",
    "kernels",
    "rounding",
    "amp_kernels",
    "fused",
    "ops",
    "autocast",
    "training",
)


def section_order(check: str) -> tuple[int, str]:
    """Sort key of a report section: its place in :data:`SECTIONS` (unknown ones last, by name)."""
    return (SECTIONS.index(check) if check in SECTIONS else len(SECTIONS), check)


def _case_order(case: Case) -> tuple[Any, ...]:
    return (section_order(case.check), case.op, case.dtype)


# Cell outcomes, worst first: a cell shows the worst outcome among its tests.
OUTCOMES = ("fail", "stale", "xfail", "pass", "not supported", "skipped")
_STYLE = {
    "fail": "bold red",
    "stale": "bold yellow",
    "xfail": "yellow",
    "pass": "green",
    "not supported": "dim",
    "skipped": "dim",
}
# What every cell state means, printed under the table (and in docs/writing-a-backend.md).
LEGEND = (
    "pass: every check behind the cell passed; FAIL: one failed (listed below); n/s: not supported, the "
    "backend's capabilities exclude the dtype; skip: skipped for another reason (unavailable device); xfail: "
    "a known gap that fails as declared; STALE: a known gap that now passes (it fails the run: remove the "
    "entry); blank: the suite has no check of that op in that dtype, because the core never calls the kernel "
    "with it (cumsum on bool, erf on int32 after its float32 check) or the row's checks take no dtype (they "
    "land in 'any')"
)
_SHORT = {"fail": "FAIL", "stale": "STALE", "xfail": "xfail", "pass": "pass", "not supported": "n/s", "skipped": "skip"}


@dataclass(frozen=True, order=True)
class Case:
    """Where a test lands in the report: its check (section), op (row) and dtype (column; "-" if none)."""

    check: str
    op: str
    dtype: str = "-"


@dataclass
class TestResult:
    nodeid: str
    outcome: str
    message: str = ""


@dataclass
class BackendReport:
    """Results of one backend (one device) of a run."""

    target: str
    results: dict[Case, list[TestResult]] = field(default_factory=dict)
    info: dict[str, Any] = field(default_factory=dict)  # capabilities and versions, once the backend resolved
    unused_gaps: list[str] = field(default_factory=list)

    def add(self, case: Case, result: TestResult) -> None:
        self.results.setdefault(case, []).append(result)

    def cell(self, case: Case) -> str:
        return min((r.outcome for r in self.results[case]), key=OUTCOMES.index)

    def counts(self) -> Counter:
        """Tests per outcome."""
        return Counter(r.outcome for rs in self.results.values() for r in rs)

    def failed(self) -> bool:
        """A failing check, or a known gap that passes (its entry must go), fails the backend."""
        counts = self.counts()
        return counts["fail"] + counts["stale"] > 0

    def summary_line(self) -> str:
        counts = self.counts()
        parts = [f"{counts[o]} {o}" for o in OUTCOMES if counts[o]]
        verdict = "FAILS" if self.failed() else ("passes" if counts["pass"] else "was not checked")
        line = f"ampcore conformance: {self.target} {verdict} ({', '.join(parts) or 'no checks'})"
        if verdict == "was not checked" and counts["skipped"]:
            line += ": " + next(r.message for rs in self.results.values() for r in rs if r.outcome == "skipped")
        return line

    def render(self, color: bool, width: int) -> str:
        """The op x dtype table, one section per check, as text."""
        from rich import box
        from rich.console import Console
        from rich.table import Table

        dtypes = sorted({c.dtype for c in self.results}, key=_dtype_order)
        table = Table(
            title=f"ampcore conformance: {self.target}", title_justify="left", box=box.SIMPLE_HEAD, pad_edge=False
        )
        table.add_column("check", no_wrap=True, max_width=14)
        table.add_column("op", no_wrap=True, max_width=30)
        for d in dtypes:
            table.add_column(_SHORT_DTYPE.get(d, d), justify="center", no_wrap=True, min_width=5)
        previous = None
        for check, op in sorted({(c.check, c.op) for c in self.results}, key=lambda r: (section_order(r[0]), r[1])):
            cells = []
            for d in dtypes:
                case = Case(check, op, d)
                if case in self.results:
                    outcome = self.cell(case)
                    cells.append(f"[{_STYLE[outcome]}]{_SHORT[outcome]}[/]")
                else:
                    cells.append("")
            table.add_row(check if check != previous else "", op, *cells, end_section=False)
            previous = check
        out = io.StringIO()
        Console(
            file=out,
            force_terminal=color,
            width=max(width, 60),
            color_system="standard" if color else None,
            highlight=False,
        ).print(table)
        out.write(textwrap.fill(f"legend: {LEGEND}", width=max(width, 60), subsequent_indent="  ") + "\n")
        return out.getvalue()

    def problems(self) -> list[str]:
        """One line per failed, stale or known-gap test, for the text summary."""
        lines = []
        for case in sorted(self.results, key=_case_order):
            for r in self.results[case]:
                if r.outcome in ("fail", "stale", "xfail"):
                    lines.append(f"{_SHORT[r.outcome]:5} {r.nodeid}: {r.message}")
        return lines

    def as_json(self) -> dict[str, Any]:
        counts = self.counts()
        return {
            "target": self.target,
            "passed": not self.failed(),
            "summary": {o: counts[o] for o in OUTCOMES},
            **self.info,
            "unused_known_gaps": self.unused_gaps,
            "cells": [
                {
                    "check": c.check,
                    "op": c.op,
                    "dtype": c.dtype,
                    "outcome": self.cell(c),
                    "tests": [vars(r) for r in self.results[c]],
                }
                for c in sorted(self.results, key=_case_order)
            ],
        }


_SHORT_DTYPE = {
    "float64": "f64",
    "float32": "f32",
    "float16": "f16",
    "bfloat16": "bf16",
    "int64": "i64",
    "int32": "i32",
    "-": "any",
}


def _dtype_order(name: str) -> tuple[int, str]:
    order = ("float64", "float32", "float16", "bfloat16", "int64", "int32", "bool", "-")
    return (order.index(name) if name in order else len(order), name)


def environment() -> dict[str, Any]:
    """Versions that explain a result: Python, platform, NumPy, ampcore."""
    import numpy

    from .. import __version__

    return {
        "ampcore": __version__,
        "python": platform.python_version(),
        "platform": platform.platform(),
        "numpy": numpy.__version__,
    }
