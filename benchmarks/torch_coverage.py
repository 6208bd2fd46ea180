"""How much of the torch that real training code uses exists in ampcore: the coverage figure, by file-uses.

Reads tests/data/torch_api_usage.csv (every torch name 38 files of public training and model code use, with the
number of files using it: issue 37's table) and resolves each name after the rename torch -> ampcore with
:mod:`ampcore.testing.torch_surface`.  Prints the figure overall and per category, and the missing names with
their file counts; ``--json`` writes them.  tests/test_torch_coverage.py holds the same figure to the README.

    python benchmarks/torch_coverage.py [--json out.json]
"""

from __future__ import annotations

import argparse
import json
from collections import defaultdict
from pathlib import Path

from ampcore.testing.torch_surface import read_usage, resolves

TABLE = Path(__file__).resolve().parents[1] / "tests" / "data" / "torch_api_usage.csv"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--json", help="write the figures and the missing names here")
    args = parser.parse_args(argv)
    rows = read_usage(TABLE)
    by_category: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    missing = []
    for used in rows:
        found = resolves(used)
        by_category[used.category][1] += used.files
        if found:
            by_category[used.category][0] += used.files
        else:
            missing.append(used)
    present = sum(p for p, _ in by_category.values())
    total = sum(t for _, t in by_category.values())
    print(f"torch API coverage: {present}/{total} file-uses = {100 * present / total:.1f}% ({len(rows)} names)")
    for category, (p, t) in sorted(by_category.items(), key=lambda kv: kv[1][0] / kv[1][1]):
        print(f"  {category:28} {p:4}/{t:<4} {100 * p / t:5.1f}%")
    print(f"missing ({len(missing)} names, {total - present} file-uses):")
    for used in missing:
        print(f"  {used.files:3}  {used.name}")
    if args.json:
        Path(args.json).write_text(
            json.dumps(
                {
                    "present": present,
                    "total": total,
                    "percent": round(100 * present / total, 1),
                    "by_category": {c: {"present": p, "total": t} for c, (p, t) in by_category.items()},
                    "missing": [{"name": u.name, "files": u.files} for u in missing],
                },
                indent=1,
            )
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
