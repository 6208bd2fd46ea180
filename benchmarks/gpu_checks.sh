#!/usr/bin/env bash
# Everything the CUDA backend still has to prove on a real GPU, in one run (a few minutes on an H100).
#
#   bash benchmarks/gpu_checks.sh [OUTDIR]        # default OUTDIR: ./gpu-checks
#   GPU_CHECKS_QUICK=1 bash benchmarks/gpu_checks.sh   # tests, conformance and the float8 row only
#
# Needs CuPy (pip install -e "backends/cuda[cuda13]"), and torch for the comparison.  Offline machines with
# those already installed can register the distributions without the network:
#   pip install --no-deps --no-build-isolation -e . -e backends/cpu -e backends/cuda
# Each step's output goes to OUTDIR; a failing step is reported and the next one still runs.
set -uo pipefail
cd "$(dirname "$0")/.."
out="${1:-gpu-checks}"
mkdir -p "$out"
status=0
step() {  # step NAME COMMAND...: run it, keep its output, remember a failure
    local name="$1"; shift
    echo "== $name: $*"
    if "$@" >"$out/$name.txt" 2>&1; then echo "   ok"; else echo "   FAILED (exit $?), see $out/$name.txt"; status=1; fi
}
python=${PYTHON:-python3}
# A bench run exits 0 when torch's rows ran but ampcore's were refused; that is a failure here.
bench_ran_ampcore() {  # bench_ran_ampcore JSON
    "$python" -c 'import json, sys
refused = [r for r in json.load(open(sys.argv[1]))["refused"] if r["framework"] == "ampcore"]
for r in refused: print("ampcore", r["device"], "refused:", r["reason"])
sys.exit(1 if refused else 0)' "$1"
}
step info             "$python" -m ampcore info
step cuda-tests       "$python" -m pytest -q -p no:cacheprovider tests/test_cuda_backend.py tests/test_cuda_device.py \
                                tests/test_cuda_launch.py tests/test_cuda_codegen.py tests/test_cuda_kernels_compile.py \
                                tests/test_cuda_compiler.py tests/test_cuda_sim_elementwise.py
step conformance      "$python" -m ampcore conformance --backend cuda --json "$out/conformance.json"
# issue 38: each planted wrong kernel (16-bit accumulator GEMM, flushed small results, exp 2 ulps off, ...) must fail
# the tolerance rules on the GPU too (AMPCORE_CUDA_SIMULATOR, which these tests set, is ignored beside a GPU)
step planted-cuda     "$python" -m pytest -q -p no:cacheprovider tests/test_planted_kernels.py -k "real and cuda"
step bench-float8     "$python" benchmarks/bench_float8.py --device cuda:0 --size 8192 --steps 10
if [ "${GPU_CHECKS_QUICK:-0}" = 1 ]; then  # a short device lease: correctness and the float8 row, no model benches
    exit $status
fi
step bench-mlp-large  "$python" -m ampcore bench --device cuda:0 --model mlp-large --steps 20 \
                                --json "$out/bench-mlp-large.json"
step bench-transformer-large "$python" -m ampcore bench --device cuda:0 --model transformer-large --steps 20 \
                                --json "$out/bench-transformer-large.json"
step bench-mlp-large-ran-ampcore        bench_ran_ampcore "$out/bench-mlp-large.json"
step bench-transformer-large-ran-ampcore bench_ran_ampcore "$out/bench-transformer-large.json"
step bench-unscale    "$python" benchmarks/bench_unscale.py --device cuda:0 --elements 100000000 --steps 20 \
                                --json "$out/bench-unscale.json"
exit $status
