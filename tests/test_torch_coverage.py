"""Every torch name real training code uses resolves in ampcore after the rename, except those the porting guide
lists as missing, with why (issue 37).

The names and their file counts are tests/data/torch_api_usage.csv, copied from the measured table.  A name
the guide lists is an expected failure (strict: once it resolves, the test fails until the guide drops it);
any other name that does not resolve fails.  The coverage figure the guide and the README state is checked
against the one measured here.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from ampcore.testing.torch_surface import UsedName, coverage, read_usage, resolves

ROOT = Path(__file__).resolve().parents[1]
USAGE = read_usage(ROOT / "tests" / "data" / "torch_api_usage.csv")
GUIDE = (ROOT / "docs" / "porting-from-torch.md").read_text(encoding="utf-8")


def _documented_missing() -> dict[str, str]:
    """torch name -> the guide's reason, from its table under "What ampcore does not have yet"."""
    section = GUIDE.split("## What ampcore does not have yet", 1)[1].split("\n## ", 1)[0]
    reasons = {}
    for row in section.splitlines():
        cells = [c.strip() for c in row.strip().strip("|").split("|")]
        if len(cells) == 2 and cells[0].startswith("`"):
            for name in re.findall(r"`([^`]+)`", cells[0]):
                reasons[name] = cells[1]
    return reasons


MISSING = _documented_missing()


def _case(used: UsedName) -> object:
    reason = MISSING.get(used.name)
    if reason is None:
        return pytest.param(used, id=used.name)
    return pytest.param(used, id=used.name, marks=pytest.mark.xfail(strict=True, reason=reason))


def test_the_table_is_the_measured_one():
    assert len(USAGE) == 325 and sum(u.files for u in USAGE) == 1166
    assert len({u.name for u in USAGE}) == len(USAGE)


def test_every_name_the_guide_lists_is_in_the_table():
    assert set(MISSING) <= {u.name for u in USAGE}


@pytest.mark.parametrize("used", [_case(u) for u in USAGE])
def test_the_name_resolves_after_the_rename(used: UsedName) -> None:
    assert resolves(used), f"{used.name} ({used.files} files) does not resolve in ampcore"


def test_the_stated_coverage_figure_is_the_measured_one():
    present, total, missing = coverage(USAGE)
    figure = f"{100 * present / total:.1f}%"
    assert {u.name for u in missing} == set(MISSING)
    assert f"**{figure}**" in GUIDE, f"docs/porting-from-torch.md should state {figure}"
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert f"{figure} of" in readme, f"README.md should state {figure}"
