"""The cuda backend on the CUDA simulator (``AMPCORE_CUDA_SIMULATOR``): opt-in and loud, never the default,
never over a real GPU; the whole conformance suite passes on both profiles; the GPU tests of
tests/test_cuda_device.py pass on it (h100, as that file says: without a GPU it runs only here); AMP training
(autocast, GradScaler skip and resume, ``ampcore train``) runs end to end; benchmarks refuse it.

Each check runs in a fresh interpreter: the variable is read per process, as a user sets it.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import pytest
from ci_requirements import fail_if_required_and_missing

from ampcore_cuda import runtime

needs_gxx = pytest.mark.skipif(shutil.which("g++") is None, reason="the CUDA simulator needs g++ on PATH")
PROFILES = ("h100", "t4")
DEVICE_TESTS = Path(__file__).with_name("test_cuda_device.py")


def test_the_simulator_runs_where_ci_installed_gxx():
    """Fail-if-skipped: where .ci/run tried to install g++ (AMPCORE_REQUIRED_TOOLS), the simulator's tests (the
    whole conformance suite on both profiles, the kernels and AMP training) must run, not skip."""
    fail_if_required_and_missing("g++", "the CUDA simulator's tests")


def _env(profile: str | None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AMPCORE_")}
    if profile:
        env["AMPCORE_CUDA_SIMULATOR"] = profile
    return env


def _ampcore(*args: str, profile: str | None, timeout: int = 600) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "ampcore", *args], capture_output=True, text=True, env=_env(profile), timeout=timeout
    )


def _python(code: str, profile: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=_env(profile), timeout=300)


def _cuda_info(profile: str | None) -> dict:
    proc = _ampcore("info", "--json", profile=profile)
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    return report, next(b for b in report["backends"] if b["name"] == "cuda")


@needs_gxx
@pytest.mark.parametrize("profile, cc, autocast", [("h100", "9.0", "bfloat16"), ("t4", "7.5", "float16")])
def test_info_shows_cuda_available_and_simulated_but_never_the_default(profile, cc, autocast):
    report, cuda = _cuda_info(profile)
    assert cuda["available"] and "simulated" in cuda["reason"]
    assert f"AMPCORE_CUDA_SIMULATOR='{profile}'" in cuda["reason"]
    (device,) = cuda["devices"]
    assert device["usable"] and "simulator" in device["device_name"]
    assert device["compute_capability"] == cc and device["autocast_dtype"] == autocast
    assert device["simulated"] == f"AMPCORE_CUDA_SIMULATOR={profile}"
    assert report["default_device"] != "cuda:0", "the simulator is never chosen by default"
    text = _ampcore("info", profile=profile).stdout
    assert "available (note: simulated" in " ".join(text.split())


def test_without_the_variable_cuda_is_unavailable_with_the_real_reason():
    _, cuda = _cuda_info(None)
    status = runtime._probe_cupy()
    assert cuda["available"] == status.ok and cuda["reason"] == status.reason
    # the real cause first; the simulator is offered only as the way to run without a GPU (issue 27)
    assert "simulat" not in cuda["reason"].split("No GPU?")[0]


def test_an_unknown_profile_is_an_error_naming_the_valid_ones(monkeypatch):
    monkeypatch.setenv("AMPCORE_CUDA_SIMULATOR", "a100")
    status = runtime.probe()
    assert not status.ok and "AMPCORE_CUDA_SIMULATOR='a100' is not a simulator profile" in status.reason
    assert "'h100', 't4'" in status.reason
    with pytest.raises(ValueError, match="use one of 'h100', 't4'"):
        runtime.import_cupy()


def test_the_variable_is_ignored_and_says_so_when_cupy_sees_a_gpu(monkeypatch):
    fake = SimpleNamespace(cuda=SimpleNamespace(runtime=SimpleNamespace(getDeviceCount=lambda: 1)))
    monkeypatch.setitem(sys.modules, "cupy", fake)
    monkeypatch.setenv("AMPCORE_CUDA_SIMULATOR", "h100")
    runtime._simulator.cache_clear()
    try:
        profile, note = runtime._simulator("h100")
        assert profile is None and "ignored: CuPy and a GPU are present" in note
        assert runtime.import_cupy() is fake and not runtime.simulated()
    finally:
        runtime._simulator.cache_clear()


@needs_gxx
@pytest.mark.slow
@pytest.mark.parametrize("profile", PROFILES)
def test_the_whole_conformance_suite_passes_on_the_simulator(profile, tmp_path):
    start = time.perf_counter()
    path = tmp_path / "report.json"
    proc = _ampcore(
        "conformance",
        "--backend",
        "cuda",
        "--json",
        str(path),
        "--report",
        "summary",
        "--",
        "-p",
        "no:cacheprovider",
        "-q",
        profile=profile,
    )
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    (report,) = json.loads(path.read_text())["backends"]
    assert report["passed"] and report["summary"]["fail"] == 0
    assert report["summary"]["pass"] > 1000, report["summary"]  # ran, not skipped
    cells = {(c["check"], c["op"], c["dtype"]): c["outcome"] for c in report["cells"]}
    for dtype in ("float16", "bfloat16"):  # the kernels ran in both 16-bit types on both profiles
        assert cells[("kernels", "add", dtype)] == "pass"
        assert cells[("amp_kernels", "unscale_and_check", dtype)] == "pass"
    # float8 runs on sm_90 (the h100 profile) and is refused on sm_75 (t4) with the reason.
    float8 = {key: outcome for key, outcome in cells.items() if key[0] == "float8"}
    assert float8 and set(float8.values()) == ({"pass"} if profile == "h100" else {"not supported"}), float8
    print(f"{profile}: {report['summary']} in {time.perf_counter() - start:.0f} s")


@needs_gxx
@pytest.mark.parametrize(
    "profile, cublaslt_off, lt_modes",
    [
        ("h100", True, set()),  # the widened-float16 fallback everywhere (as without nvmath-python)
        ("l4", False, {(0, 0)}),  # Ada: tensor-wise scales on cuBLASLt, row-wise and MX fall back
        ("b200", False, {(0, 0), (2, 2)}),  # Blackwell: tensor-wise and MXFP8 on cuBLASLt
    ],
)
def test_the_float8_conformance_checks_pass_on_each_float8_gemm_path(profile, cublaslt_off, lt_modes, tmp_path):
    """The float8 sections of the suite on the paths the full runs above do not take (h100 runs cuBLASLt's
    tensor-wise and outer-vector modes there), counting which cuBLASLt modes ran."""
    code = (
        "import sys, json, pytest\n"
        "from ampcore_cuda.sim import PROFILES\n"
        "from ampcore_cuda.sim.cublaslt import make_cublaslt\n"
        "code = pytest.main(['-q', '-p', 'no:cacheprovider', '--pyargs', 'ampcore.conformance', '--ampcore-backend',\n"
        "                    'cuda', '-k', 'float8'])\n"
        f"modes = sorted({{tuple(c['modes']) for c in make_cublaslt(PROFILES[{profile!r}]).calls}})\n"
        "print(json.dumps({'exit': int(code), 'modes': modes}))\n"
    )
    env = _env(profile) | ({"AMPCORE_CUDA_NO_CUBLASLT": "1"} if cublaslt_off else {})
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=900)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    assert result["exit"] == 0 and "ampcore conformance: cuda passes (" in proc.stdout, proc.stdout[-3000:]
    assert {tuple(m) for m in result["modes"]} == lt_modes


def test_the_gpu_device_tests_pass_on_the_h100_simulator(tmp_path):
    """tests/test_cuda_device.py under AMPCORE_CUDA_SIMULATOR=h100, in a fresh interpreter (the variable is read
    per process): every test but the speed checks runs and passes."""
    report = tmp_path / "device.xml"
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(DEVICE_TESTS), f"--junitxml={report}"],
        capture_output=True,
        text=True,
        env=_env("h100"),
        timeout=900,
        cwd=DEVICE_TESTS.parent,
    )
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    import xml.etree.ElementTree as ET

    suite = ET.parse(report).getroot().find("testsuite")
    assert suite is not None
    tests, skipped = int(suite.get("tests", 0)), int(suite.get("skipped", 0))
    assert tests >= 25 and int(suite.get("failures", 0)) == int(suite.get("errors", 0)) == 0, suite.attrib
    skips = [c for c in suite.iter("testcase") if c.find("skipped") is not None]
    assert all("speed" in (c.find("skipped").get("message") or "") for c in skips), [c.get("name") for c in skips]
    print(f"tests/test_cuda_device.py on the h100 simulator: {tests - skipped} passed, {skipped} skipped (speed)")


@needs_gxx
@pytest.mark.parametrize("profile", PROFILES)
def test_float8_on_h100_and_its_refusal_on_t4_with_the_reason(profile):
    code = (
        "import ampcore, numpy as np\n"
        "caps = ampcore.get_backend('cuda').capabilities()\n"
        "print(caps.float8, '|', caps.float8_reason)\n"
        "x = ampcore.tensor(np.array([1.0, 465.0, -3.4e-3], np.float32), device='cuda')\n"
        "try:\n"
        "    print(x.to(ampcore.float8_e4m3fn).float().numpy().tolist())\n"
        "except TypeError as e:\n"
        "    print('refused:', e)\n"
    )
    proc = _python(code, profile)
    assert proc.returncode == 0, proc.stderr[-2000:]
    support, converted = proc.stdout.strip().splitlines()
    if profile == "h100":  # float8 GEMMs on cuBLASLt's stand-in
        assert (
            support.startswith("native | cuBLASLt 12.9.1 float8 GEMMs: tensorwise, rowwise;")
            and converted == "[1.0, nan, -0.00390625]"
        )
    else:
        assert (
            support.startswith("none | float8 needs compute capability 8.9+")
            and "Tesla T4 (ampcore CUDA simulator) has 7.5" in support
        )
        assert converted.startswith("refused: device 'cuda:0' cannot store float8_e4m3fn tensors: float8 needs")


TRAIN_STEPS = r"""
import numpy as np, ampcore, json
from ampcore import nn, optim
from ampcore.nn import functional as F
dev = "cuda:0"
ampcore.manual_seed(0)
model = nn.Sequential(nn.Linear(20, 32, device=dev), nn.GELU(), nn.Linear(32, 5, device=dev))
opt = optim.AdamW(model.parameters(), lr=1e-2)
scaler = ampcore.GradScaler("cuda", init_scale=2.0 ** 30)  # float16 gradients overflow at this scale
rng = np.random.default_rng(0)
x = ampcore.tensor(rng.standard_normal((16, 20), dtype=np.float32), device=dev)
y = ampcore.tensor(rng.integers(0, 5, 16), device=dev)
def step():
    opt.zero_grad()
    with ampcore.autocast("cuda", dtype=ampcore.float16):
        logits = model(x)
        loss = F.cross_entropy(logits, y)
    scaler.scale(loss).backward()
    scaler.step(opt)
    scaler.update()
    return logits.dtype.name, float(loss.item())
before = [p.numpy().copy() for p in model.parameters()]
kind, first = step()
skipped = all(np.array_equal(b, p.numpy()) for b, p in zip(before, model.parameters()))
scales = [scaler.get_scale()]
for _ in range(20):
    step()
    scales.append(scaler.get_scale())
state = (scaler.state_dict(), opt.state_dict(), [p.numpy().copy() for p in model.parameters()])
cont = [step()[1] for _ in range(3)]
scaler.load_state_dict(state[0]); opt.load_state_dict(state[1])
with ampcore.no_grad():
    for p, v in zip(model.parameters(), state[2]):
        p.copy_(ampcore.tensor(v, device=dev))
resumed = [step()[1] for _ in range(3)]
print(json.dumps(dict(kind=kind, skipped=skipped, scales=scales, first=first, last=cont[-1], cont=cont,
                      resumed=resumed)))
"""


@needs_gxx
@pytest.mark.parametrize("profile", PROFILES)
def test_autocast_and_grad_scaler_skip_back_off_and_resume_bit_identically(profile):
    proc = _python(TRAIN_STEPS, profile)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["kind"] == "float16", "linear ran under autocast in float16"
    assert out["skipped"], "an overflowing step leaves every parameter exactly as it was"
    assert out["scales"][0] == 2.0**29 and min(out["scales"]) < 2.0**20, out["scales"]
    assert out["last"] < out["first"], "training went on after the back-off"
    assert out["resumed"] == out["cont"], "a resumed run continues bit-identically"


CAPTURED_STEP = """
import json, numpy as np, ampcore
from ampcore import nn, optim
from ampcore.nn import functional as F
rng = np.random.default_rng(0)
xs = [rng.standard_normal((5, 8)).astype(np.float32) for _ in range(6)]
xs[3][0, 0] = np.inf
data = [(ampcore.tensor(x, device="cuda"), ampcore.tensor(rng.integers(0, 4, 5), device="cuda")) for x in xs]
def step(model, opt, scaler, x, y):
    opt.zero_grad()
    with ampcore.autocast("cuda", dtype="float16"):
        loss = F.cross_entropy(model(x), y)
    scaler.scale(loss).backward()
    scaler.step(opt)
    scaler.update()
    return loss.detach()
runs = []
for compiled in (False, True):
    ampcore.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 16), nn.GELU(), nn.Dropout(0.1), nn.LayerNorm(16), nn.Linear(16, 4)).to("cuda")
    opt, scaler = optim.AdamW(model.parameters(), lr=1e-2), ampcore.GradScaler("cuda")
    fn = ampcore.compile(step) if compiled else step
    ampcore.manual_seed(1)
    reads = []
    losses = []
    for x, y in data:
        with ampcore.count_host_syncs() as syncs:
            losses.append(fn(model, opt, scaler, x, y))
        reads.append(syncs.count)
    runs.append(dict(losses=[l.numpy().tobytes().hex() for l in losses], reads=reads, scale=scaler.get_scale(),
                     skipped=scaler.skipped_steps, params=[p.numpy().tobytes().hex() for p in model.parameters()],
                     replays=fn._compiled.stats.replays if compiled else 0))
print(json.dumps(runs))
"""


@needs_gxx
def test_a_captured_amp_step_replays_bit_identical_with_no_host_read_on_the_simulator():
    """ampcore.compile on cuda (the core's reference runner, kernel by kernel): a float16 AMP step with an
    overflowing batch replays eager's bits, skips the same step, and reads nothing on the host."""
    proc = _python(CAPTURED_STEP, "h100")
    assert proc.returncode == 0, proc.stderr[-3000:]
    eager, captured = json.loads(proc.stdout.strip().splitlines()[-1])
    assert captured["replays"] == 4 and captured["reads"][2:] == [0, 0, 0, 0]
    for key in ("losses", "params", "scale", "skipped"):
        assert captured[key] == eager[key], key
    assert eager["skipped"] == 1


@needs_gxx
@pytest.mark.slow
@pytest.mark.parametrize("profile", PROFILES)
def test_ampcore_train_on_simulated_cuda_learns_the_digits(profile):
    proc = _ampcore("train", "--device", "cuda:0", "--epochs", "3", "--json", profile=profile)
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads(proc.stdout)
    assert result["device"] == "cuda:0" and result["amp"]
    assert result["dtype"] == {"h100": "bfloat16", "t4": "float16"}[profile]
    assert result["test_accuracy"] >= 0.85, result
    assert result["epoch_losses"][-1] < result["epoch_losses"][0] / 3


@needs_gxx
def test_bench_refuses_to_time_the_simulator_as_a_gpu():
    proc = _ampcore("bench", "--device", "cuda:0", "--steps", "1", "--warmup", "0", "--no-torch", profile="h100")
    assert proc.returncode != 0
    assert "cuda:0 is simulated (AMPCORE_CUDA_SIMULATOR=h100)" in proc.stdout + proc.stderr
    assert "not GPU figures" in proc.stdout + proc.stderr


@needs_gxx
def test_a_zero_dimensional_host_array_stays_zero_dimensional_on_the_device():
    """Regression: from_numpy used np.ascontiguousarray, which makes a 0-d array shape (1,)."""
    proc = _python(
        "import numpy as np, ampcore\n"
        "t = ampcore.tensor(np.float32(2.5), device='cuda:0')\n"
        "print(t.shape, ampcore.get_backend('cuda').shape_of(t._data) if hasattr(t, '_data') else '')",
        "h100",
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.startswith("()"), proc.stdout
