"""Mutation check of the CUDA simulator: one deliberate change to the arithmetic of each kernel family's CUDA
source (in memory, never on disk), then the part of the simulated suite that covers the family; a mutation is
caught when those tests fail.

    python tests/cuda_sim_mutations.py [--profile h100] [--only NAME ...]

Each mutation runs in its own interpreter.  The child patches the simulator's ``RawKernel`` so every kernel
whose name matches the mutation's pattern is built from the changed source, runs pytest in-process, and
reports whether the change was applied to a launched kernel at all (a mutation that never applied proves
nothing and is reported as such).  Exit status 0 when every mutation applied was caught.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import time
from dataclasses import dataclass

HERE = os.path.dirname(os.path.abspath(__file__))


@dataclass(frozen=True)
class Mutation:
    """Replace ``old`` by ``new`` in every kernel whose name matches ``kernels``; run ``targets``."""

    name: str
    family: str
    kernels: str
    old: str
    new: str
    targets: tuple[str, ...]


_CONFORMANCE = "ampcore.conformance.checks."
MUTATIONS = (
    Mutation(
        "float->float16 rounds ties up, not to even",
        "convert",
        r"^convert_\w+_f16$",
        "r += 0xfffu + ((r >> 13) & 1u);",
        "r += 0x1000u;",
        (_CONFORMANCE + "test_rounding",),
    ),
    Mutation(
        "float->bfloat16 rounds ties down",
        "convert",
        r"^convert_\w+_bf16$",
        "b += 0x7fffu + ((b >> 16) & 1u);",
        "b += 0x7fffu;",
        (_CONFORMANCE + "test_rounding",),
    ),
    Mutation(
        "float16->float loses the subnormal scale",
        "convert",
        r"^convert_f16_",
        "(float)e * 5.9604644775390625e-8f",
        "(float)e * 5.9604644775390625e-7f",
        (_CONFORMANCE + "test_rounding", _CONFORMANCE + "test_kernels"),
    ),
    Mutation(
        "float64->float32 cast truncates instead of rounding",
        "convert",
        r"^convert_f64_f32$",
        "out[i] = (float)(x[i]);",
        "out[i] = __double2float_rz(x[i]);",
        (_CONFORMANCE + "test_rounding",),
    ),
    Mutation(
        "maximum drops a NaN first operand",
        "elementwise",
        r"^maximum_",
        " || a0[i] != a0[i])",
        ")",
        (_CONFORMANCE + "test_kernels",),
    ),
    Mutation(
        "quantize_float8 rounds e4m3 ties up, not to even",
        "float8",
        r"^quantize_\w+_e4m3$",
        "r = (r + 0x7ffffu + ((r >> 20) & 1u)) >> 20;",
        "r = (r + 0x80000u) >> 20;",
        (_CONFORMANCE + "test_float8",),
    ),
    Mutation(
        "scaled_mm's finish applies scale_b's first element to every column",
        "float8",
        r"^finish_",
        "scale_b[(mode_b == 0 ? 0 : mode_b == 1 ? i / inner : mode_b == 2 ? i % inner : i)]",
        "scale_b[0]",
        (_CONFORMANCE + "test_float8",),
    ),
    Mutation(
        "scaled_mm's float16 widening flushes e5m2 subnormals to zero",
        "float8",
        r"^widen_e5m2$",
        "(float)m * 1.52587890625e-05f",
        "(float)m * 0.0f",
        (os.path.join(HERE, "test_cuda_sim_cublas.py"),),
    ),
    Mutation(
        "pow's exponent-one shortcut returns the exponent",
        "elementwise",
        r"^pow_",
        "== 1.0f ? a0[i] :",
        "== 1.0f ? a1[i] :",
        (_CONFORMANCE + "test_kernels",),
    ),
    Mutation(
        "where selects the other branch",
        "elementwise",
        r"^where_u",
        "(a0[i] ?",
        "(!a0[i] ?",
        (_CONFORMANCE + "test_kernels",),
    ),
    Mutation(
        "unscale divides by the inverse scale",
        "amp",
        r"^unscale_and_check_",
        " * inv;",
        " / inv;",
        (_CONFORMANCE + "test_amp_kernels",),
    ),
    Mutation(
        "float16 overflow threshold one step low",
        "amp",
        r"^unscale_and_check_f16$",
        "0x477ff000u",
        "0x477fe000u",
        (_CONFORMANCE + "test_amp_kernels",),
    ),
    Mutation(
        "update_scale backs off by the growth factor",
        "amp",
        r"^update_scale$",
        "(double)s * backoff",
        "(double)s * growth",
        (_CONFORMANCE + "test_amp_kernels",),
    ),
    Mutation(
        "softmax_backward adds the row sum",
        "softmax",
        r"^softmax_backward_",
        "X * (G - S)",
        "X * (G + S)",
        (_CONFORMANCE + "test_fused",),
    ),
    Mutation(
        "log_softmax subtracts log(2S)",
        "softmax",
        r"^log_softmax_f",
        "(X - M) - log(S)",
        "(X - M) - log(S + S)",
        (_CONFORMANCE + "test_fused",),
    ),
    Mutation(
        "block reduction skips the first shuffle (half a warp summed)",
        "softmax",
        r"^softmax_f",
        "for (int o = 16; o > 0; o >>= 1)",
        "for (int o = 8; o > 0; o >>= 1)",
        (_CONFORMANCE + "test_fused",),
    ),
    Mutation(
        "block reduction loses its closing barrier (shared memory race)",
        "softmax",
        r"^log_softmax_f",
        "__syncthreads();  /* partial is reused by the next reduction */",
        "",
        (_CONFORMANCE + "test_fused",),
    ),
    Mutation(
        "gelu's tanh form with a wrong cubic coefficient",
        "gelu",
        r"^gelu_tanh_",
        "0.044715 * x * x * x",
        "0.04715 * x * x * x",
        (_CONFORMANCE + "test_fused",),
    ),
    Mutation(
        "gelu backward drops the density term's 1/2",
        "gelu",
        r"^gelu_backward_none_",
        "exp(-0.5 * x * x)",
        "exp(-x * x)",
        (_CONFORMANCE + "test_fused",),
    ),
    Mutation(
        "adamw second moment uses g, not g*g",
        "optim",
        r"^adamw_step_",
        "(gc * gc) * one_minus_beta2",
        "gc * one_minus_beta2",
        (_CONFORMANCE + "test_fused",),
    ),
    Mutation(
        "adam L2 term with the wrong sign",
        "optim",
        r"^adamw_step_",
        "gc + pc * weight_decay",
        "gc - pc * weight_decay",
        (_CONFORMANCE + "test_fused",),
    ),
    Mutation(
        "layer_norm variance without squaring",
        "norm",
        r"^layer_norm_f",
        "q += d * d;",
        "q += d;",
        (os.path.join(HERE, "test_cuda_sim_rows.py"),),
    ),
    Mutation(
        "layer_norm weight gradient without the normalised input",
        "norm",
        r"^layer_norm_backward_params_",
        "sw += g * ((",
        "sw += g * (0 * (",
        (os.path.join(HERE, "test_cuda_sim_rows.py"),),
    ),
    Mutation(
        "cross_entropy adds the target logit",
        "loss",
        r"^cross_entropy_f",
        "lse - (ACC)",
        "lse + (ACC)",
        (os.path.join(HERE, "test_cuda_sim_rows.py"),),
    ),
    Mutation(
        "cross_entropy backward forgets the one-hot",
        "loss",
        r"^cross_entropy_backward_",
        "(r == t ? (ACC)1 : (ACC)0)",
        "(ACC)0",
        (os.path.join(HERE, "test_cuda_sim_rows.py"),),
    ),
    Mutation(
        "a fused chain skips the float16 rounding eager makes between its ops",
        "fusion",
        r"^fused_",
        "half_to_float(float_to_half(",
        "((",
        (_CONFORMANCE + "test_capture",),
    ),
)


BASELINE = Mutation("baseline (no mutation)", "all", r"^$", "", "", ())


def child(name: str) -> int:
    """Apply mutation ``name`` and run its targets in this process; print a JSON line with the outcome."""
    import pytest

    from ampcore_cuda.sim import kernel as sim_kernel

    if name == BASELINE.name:  # every target, nothing changed: must pass, or "caught" would mean nothing
        targets = tuple(dict.fromkeys(t for m in MUTATIONS for t in m.targets))
        mutation = Mutation(BASELINE.name, "", r"^$", "", "", targets)
    else:
        mutation = next(m for m in MUTATIONS if m.name == name)
    applied: set[str] = set()
    real_init = sim_kernel.RawKernel.__init__

    def mutated_init(self, code, kname, options=(), **kw):
        if mutation.old and re.search(mutation.kernels, kname) and mutation.old in code:
            code = code.replace(mutation.old, mutation.new)
            applied.add(kname)
        real_init(self, code, kname, options, **kw)

    sim_kernel.RawKernel.__init__ = mutated_init
    args = ["-q", "-x", "-p", "no:cacheprovider", "--no-header", "-o", "addopts="]
    conformance = [t for t in mutation.targets if t.startswith(_CONFORMANCE)]
    files = [t for t in mutation.targets if not t.startswith(_CONFORMANCE)]
    status = 0
    if conformance:
        status |= int(pytest.main([*args, "--pyargs", *conformance, "--ampcore-backend", "cuda"]))
    if files:
        status |= int(pytest.main([*args, *files]))
    print("MUTATION-RESULT " + json.dumps({"name": name, "status": status, "applied": sorted(applied)}))
    return 0


def run(mutation: Mutation, profile: str) -> dict:
    env = {**os.environ, "AMPCORE_CUDA_SIMULATOR": profile}
    start = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, __file__, "--child", mutation.name], capture_output=True, text=True, env=env, timeout=900
    )
    seconds = time.perf_counter() - start
    line = next((x for x in proc.stdout.splitlines() if x.startswith("MUTATION-RESULT ")), None)
    if line is None:
        return {
            "name": mutation.name,
            "family": mutation.family,
            "verdict": "error",
            "seconds": seconds,
            "detail": (proc.stdout + proc.stderr)[-2000:],
        }
    result = json.loads(line.removeprefix("MUTATION-RESULT "))
    if mutation is BASELINE:
        verdict = "passes" if result["status"] == 0 else "FAILS"
    else:
        verdict = "not applied" if not result["applied"] else "caught" if result["status"] else "MISSED"
    return {
        "name": mutation.name,
        "family": mutation.family,
        "verdict": verdict,
        "seconds": seconds,
        "kernels": result["applied"],
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--profile", default="h100", choices=("h100", "t4"))
    parser.add_argument("--only", nargs="*", help="mutation names (default: all)")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        return child(args.child)
    chosen = [m for m in MUTATIONS if not args.only or m.name in args.only]
    baseline = run(BASELINE, args.profile)
    print(f"{baseline['verdict']:>11}  {'all':<8} {BASELINE.name}  ({baseline['seconds']:.0f} s)", flush=True)
    if baseline["verdict"] != "passes":
        print(baseline.get("detail", "the unmutated targets fail: fix them first"), file=sys.stderr)
        return 2
    results = []
    for mutation in chosen:
        result = run(mutation, args.profile)
        results.append(result)
        print(
            f"{result['verdict']:>11}  {result['family']:<8} {mutation.name}  ({result['seconds']:.0f} s)", flush=True
        )
        if result["verdict"] == "error":
            print(result["detail"], file=sys.stderr)
    bad = [r for r in results if r["verdict"] != "caught"]
    print(f"{len(results) - len(bad)} of {len(results)} mutations caught on the {args.profile} profile")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
