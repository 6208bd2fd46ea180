"""A fast pin of tests/cuda_sim_mutations.py: a changed kernel's arithmetic makes the simulated suite fail.

The full run (every family, ~5 minutes on 2 cores) is ``python tests/cuda_sim_mutations.py``; here two
mutations, one through the conformance suite and one through tests/test_cuda_sim_rows.py, must be caught."""

from __future__ import annotations

import shutil

import cuda_sim_mutations as mutations
import pytest

pytestmark = pytest.mark.skipif(shutil.which("g++") is None, reason="the CUDA simulator needs g++ on PATH")


@pytest.mark.parametrize("name", ["unscale divides by the inverse scale", "cross_entropy adds the target logit"])
def test_a_mutated_kernel_is_caught_by_the_simulated_suite(name):
    mutation = next(m for m in mutations.MUTATIONS if m.name == name)
    result = mutations.run(mutation, "h100")
    assert result["verdict"] == "caught", result
    assert result["kernels"], "the mutation reached a launched kernel"


def test_every_kernel_family_has_a_mutation():
    from ampcore_cuda.sources import SOURCE_FAMILIES

    assert {m.family for m in mutations.MUTATIONS} == set(SOURCE_FAMILIES)
