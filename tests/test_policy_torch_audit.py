"""ampcore's cpu cast policy against torch 2.13's CPU autocast, op by op.

The audit's result is committed (:mod:`ampcore.policy.torch_cpu_audit`), so the table is checked without
torch; where torch is installed, the audit is re-derived from torch itself (``tests/torch_autocast_audit.py``).
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from ampcore import policy as P
from ampcore.cli.policy import collect
from ampcore.ops import declare
from ampcore.policy import torch_lists
from ampcore.policy.builtin import AMPCORE_LAYER
from ampcore.policy.torch_cpu_audit import REGISTRATION_SOURCE, TORCH_VERSION, audit_rows

# The committed audit and a row from each declared op it lacks (ampcore/policy/torch_cpu_audit.py).
AUTOCAST_CPU = audit_rows()


def _ampcore_ops() -> list[str]:
    """The ops ampcore itself registers, from a fresh interpreter (other tests register ops of their own), less
    the declared ops torch has no aten op for (ampcore's own: no torch row to audit)."""
    code = (
        "import json, ampcore; from ampcore.dispatch import registered_ops; from ampcore.ops import declare; "
        "own = {n for n, d in declare.declarations().items() if d.aten is None}; "
        "print(json.dumps(sorted(set(registered_ops()) - own)))"
    )
    return json.loads(subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True).stdout)


def test_the_audit_covers_exactly_the_ops_ampcore_implements():
    assert sorted(AUTOCAST_CPU) == _ampcore_ops(), (
        "a new op needs its row: run python tests/torch_autocast_audit.py with torch 2.13 installed"
    )


@pytest.mark.parametrize("op", sorted(AUTOCAST_CPU))
def test_cpu_table_agrees_with_torchs_autocast_cpu_registrations(op):
    category, aten, registered = AUTOCAST_CPU[op]
    entry = P.builtin("cpu").decision(op)
    if category == "unlisted" and entry.source.startswith(AMPCORE_LAYER):
        # torch leaves the op to its inputs' types; ampcore's own layer decides it, as the declaration says
        assert declare.get(op) is not None and declare.get(op).category == entry.category.value, entry.source
        return
    assert entry.category.value == category, (
        f"{op}: ampcore's cpu table says {entry.category.value}, torch "
        f"{TORCH_VERSION}'s AutocastCPU says {category} ({entry.source})"
    )
    if registered:
        assert (
            REGISTRATION_SOURCE in entry.source
            and f"aten::{aten}" in entry.source
            or "torch docs cpu list" in entry.source
        ), entry.source


def test_sources_cite_the_docs_page_the_registration_or_both():
    cpu = P.builtin("cpu")
    documented = {
        torch_lists.TORCH_ALIASES.get(n, n)
        for n in torch_lists.CPU_LOWER + torch_lists.CPU_FP32 + torch_lists.CPU_PROMOTE
    }
    for op, (category, _aten, registered) in AUTOCAST_CPU.items():
        if category == "unlisted":
            continue
        source = cpu.decision(op).source
        assert ("torch docs cpu list" in source) is (op in documented), (op, source)
        assert (REGISTRATION_SOURCE in source) is registered, (op, source)
    # where the page and the registrations disagree, the registration wins and the source says so
    assert cpu.decision("smooth_l1_loss").category is P.FP32
    assert "not on the torch docs page" in cpu.decision("smooth_l1_loss").source
    assert cpu.decision("tensordot").category is P.LOWER


def test_ampcore_policy_cites_the_source_of_every_cpu_row():
    rows = {r["op"]: r for r in collect("cpu")["ops"]}
    assert rows["smooth_l1_loss"]["category"] == "fp32"
    assert REGISTRATION_SOURCE in rows["smooth_l1_loss"]["source"]
    assert rows["binary_cross_entropy"]["category"] == "fp32"
    assert (
        rows["gelu"]["source"]
        == "unlisted: torch 2.13 registers no AutocastCPU kernel for aten::gelu (autocast_mode.cpp)"
    )
    assert all(r["source"] != "unlisted" for op, r in rows.items() if op in AUTOCAST_CPU)


def test_a_declared_ops_row_is_derived_from_its_declaration():
    """Every declared op torch has an aten op for has a row (committed, or derived from the declaration)."""
    for name, decl in declare.declarations().items():
        if decl.aten is not None:
            assert name in AUTOCAST_CPU and AUTOCAST_CPU[name][1] == decl.aten, (name, AUTOCAST_CPU.get(name))


def test_audit_re_derived_from_torch_matches_the_committed_data():
    torch = pytest.importorskip(
        "torch",
        reason="torch is not installed: the committed audit (ampcore/policy/torch_cpu_audit.py) is checked without it",
    )
    if not torch.__version__.startswith(TORCH_VERSION.rsplit(".", 1)[0] + "."):
        pytest.skip(f"the committed audit is of torch {TORCH_VERSION}; torch {torch.__version__} is installed")
    from torch_autocast_audit import audit

    derived = {op: (category, aten, site is not None) for op, (category, aten, site) in audit(AUTOCAST_CPU).items()}
    assert derived == AUTOCAST_CPU
