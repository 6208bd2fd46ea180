"""Fused chains of a captured step on the C backends: the core's kernel body (:func:`ampcore.expr.fused`), and the
opencl and cuda backends' ``fused_kernel`` (one kernel per chain, operands of mixed dtypes, a broadcast bias row),
fused for real (a backend that declined would replay the chain kernel by kernel and still give eager's bits, so
these tests also check that the program holds fused steps) and bit for bit eager's.

The conformance suite's captured mode checks every chain and layout on each backend, and the planted
``fusion_drops_rounding`` there (tests/test_planted_kernels.py); the cuda checks run on the CUDA simulator, in a
fresh interpreter (the variable is read per process)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from fused_chain_check import check

import ampcore
from ampcore import cgen
from ampcore import expr as E

DTYPES = ("float16", "bfloat16", "float32")


def _judge(got: dict, dtype: str) -> None:
    assert got["replays"] == 1 and got["dtype"] == dtype
    assert got["fusions"] >= 1 and got["fused_kernels"] and all(got["fused_kernels"]), f"not fused: {got}"
    assert got["replaced"] >= 5  # add, mul, relu, (cast,) mul, add, (cast,) sub: one chain, or two at most
    if dtype != "float32":  # x + bias, * 1.5, relu and .to(dtype) store 16 bits eagerly, so the chain rounds there
        assert got["roundings"] >= 3, f"the fused chains lost eager's 16-bit roundings: {got}"
    assert got["same_bits"], f"the fused chain's bits differ from eager's in {dtype}"


# --------------------------------------------------------------------------- the core's kernel body
def test_the_fused_body_loads_each_operand_with_its_own_dtype_and_rounds_where_the_program_says():
    prog = E.program("fused_3", lambda x, r, m: E.select(m, E.round_bfloat16(x * r), x), "TTb")
    body = E.fused(prog, cgen.OPENCL, ("bf16", "f32", "b8"), "bf16", ("i", "off1", "0"))
    assert body.compute == "float"
    assert body.params == (
        "__global ushort *restrict out",
        "__global const ushort *restrict x0",
        "__global const float *restrict x1",
        "__global const uchar *restrict x2",
    )
    assert body.lines[:3] == (
        "const float v0 = bf16_to_float(x0[i]);",
        "const float v1 = x1[off1];",
        "const int v2 = (int)(x2[0] != 0);",
    )
    assert any("float_to_bf16(" in line and "bf16_to_float(" in line for line in body.lines[3:-1])
    assert body.lines[-1].startswith("out[i] = float_to_bf16(")
    assert body.helpers.startswith(cgen.OPENCL.no_contract)  # a * b + c never contracted into an fma


def test_a_float64_chain_computes_in_double_and_stores_once():
    prog = E.program("fused_2", lambda x, y: x * y + y, "TT")
    body = E.fused(prog, cgen.CUDA, ("f64", "f64"), "f64", ("i", "i"))
    assert body.compute == "double" and body.params[0] == "double *__restrict__ out"


@pytest.mark.parametrize(
    ("tags", "result", "match"),
    [
        (("f16", "i32"), "f16", "operand 1 of a fused chain has dtype tag 'i32'"),
        (("f16", "f16"), "f8e4m3", "the result of a fused chain has dtype tag 'f8e4m3'"),
        (("b8", "f16"), "f16", "operand 0 of program 'fused_2' must be a float, got dtype tag 'b8'"),
        (("f16",), "f16", "takes 2 operands, got 1 dtype tags"),
    ],
)
def test_the_fused_body_names_a_bad_dtype_tag(tags, result, match):
    prog = E.program("fused_2", lambda x, y: x + y, "TT")
    with pytest.raises(ValueError, match=match):
        E.fused(prog, cgen.CUDA, tags, result, ["i"] * len(tags))


# --------------------------------------------------------------------------- opencl
@pytest.mark.parametrize("dtype", DTYPES)
def test_opencl_fuses_a_mixed_dtype_chain_with_a_bias_row_into_one_kernel_with_eager_bits(opencl_device, dtype):
    _judge(check(f"opencl:{opencl_device}", dtype), dtype)


def test_opencl_declines_a_chain_of_integers(opencl_device):
    from ampcore_opencl.plugin import OpenCLBackend

    prog = E.program("fused_2", lambda x, y: x + y, "TT")
    assert OpenCLBackend().fused_kernel(prog, [ampcore.int32, ampcore.int32], ampcore.int32) is None


# --------------------------------------------------------------------------- cuda, on the simulator
@pytest.mark.skipif(shutil.which("g++") is None, reason="the CUDA simulator needs g++ on PATH")
@pytest.mark.parametrize("profile", ["h100", "t4"])
def test_cuda_fuses_a_mixed_dtype_chain_with_a_bias_row_into_one_kernel_with_eager_bits(run_python, profile):
    code = f"import json\nfrom fused_chain_check import check\nprint(json.dumps([check('cuda', d) for d in {DTYPES}]))"
    proc = run_python(code, path=Path(__file__).parent, env={"AMPCORE_CUDA_SIMULATOR": profile})
    assert proc.returncode == 0, proc.stderr[-3000:]
    for got, dtype in zip(json.loads(proc.stdout.strip().splitlines()[-1]), DTYPES):
        _judge(got, dtype)


def test_cuda_declines_a_chain_of_integers():
    from ampcore_cuda.fusion import fused_kernel

    prog = E.program("fused_2", lambda x, y: x + y, "TT")
    assert fused_kernel(prog, [ampcore.int64, ampcore.int64], ampcore.int64) is None
