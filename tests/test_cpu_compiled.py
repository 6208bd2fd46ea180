"""The cpu backend's compiled path (ampcore_cpu.compiled): chosen by default where numba imports, the NumPy
fallback where it cannot or where AMPCORE_CPU_NO_NUMBA=1 asks for it, each with its reason, and numba's
cache on disk so that a second process does not compile again."""

import importlib.util
import json
import os
import subprocess
import sys
import types

import pytest

from ampcore_cpu import compiled


def _fake_numba(cache_dir=""):
    module = types.ModuleType("numba")
    module.__version__ = "9.9.9"
    module.config = types.SimpleNamespace(CACHE_DIR=cache_dir)
    return module


def _never():
    raise AssertionError("numba must not be imported when the fallback is forced")


@pytest.mark.parametrize("value", ["1", "true", "YES", " on "])
def test_no_numba_switch_forces_the_fallback_without_importing_numba(value):
    path, numba = compiled.decide({compiled.ENV_NO_NUMBA: value}, import_numba=_never)
    assert numba is None and not path.enabled
    assert path.describe() == f"NumPy fallback: AMPCORE_CPU_NO_NUMBA={value} is set"


def test_a_switch_that_is_not_one_names_the_value_and_the_choices():
    with pytest.raises(ValueError, match=r"AMPCORE_CPU_NO_NUMBA='maybe' is not a switch; set it to 1"):
        compiled.decide({compiled.ENV_NO_NUMBA: "maybe"}, import_numba=_never)


@pytest.mark.parametrize("value", ["", "0", "false", "off"])
def test_switch_off_takes_the_compiled_path_cached_under_xdg_cache_home(value, tmp_path):
    env = {compiled.ENV_NO_NUMBA: value, "XDG_CACHE_HOME": str(tmp_path)}
    fake = _fake_numba()
    path, numba = compiled.decide(env, import_numba=lambda: fake)
    where = str(tmp_path / "ampcore" / "numba" / compiled.sources_key())
    assert numba is fake and path.enabled and path.cache_dir == where
    assert path.describe() == f"compiled (numba 9.9.9, cached in {where})"
    assert fake.config.CACHE_DIR == where  # a numba imported before ampcore gets the directory too


def test_a_numba_cache_dir_the_user_set_is_kept(tmp_path):
    fake = _fake_numba(cache_dir=str(tmp_path / "mine"))
    path, _ = compiled.decide({"NUMBA_CACHE_DIR": str(tmp_path / "mine")}, import_numba=lambda: fake)
    assert path.cache_dir == str(tmp_path / "mine") and fake.config.CACHE_DIR == str(tmp_path / "mine")


def test_without_xdg_cache_home_the_cache_is_under_the_home_cache(monkeypatch, tmp_path):
    monkeypatch.setenv("HOME", str(tmp_path))
    assert compiled.cache_dir({}) == tmp_path / ".cache" / "ampcore" / "numba" / compiled.sources_key()


def test_the_cache_directory_changes_with_any_compiled_module_s_source(monkeypatch, tmp_path):
    """numba revalidates a cached function against its own file only, not the helpers it inlined from others."""
    source = tmp_path / "pkg"
    source.mkdir()
    for name in ("compiled.py", "_a_numba.py", "_b_numba.py"):
        (source / name).write_text(f"# {name}\n")
    monkeypatch.setattr(compiled, "__file__", str(source / "compiled.py"))
    compiled.sources_key.cache_clear()
    try:
        before = compiled.sources_key()
        compiled.sources_key.cache_clear()
        (source / "_b_numba.py").write_text("# an inlined helper changed\n")
        assert compiled.sources_key() != before and len(before) == 16
    finally:
        compiled.sources_key.cache_clear()


def test_numba_not_installed_says_so_and_how_to_add_it():
    def missing():
        raise ModuleNotFoundError("No module named 'numba'", name="numba")

    path, numba = compiled.decide({}, import_numba=missing)
    assert numba is None and path.describe() == "NumPy fallback: numba is not installed (pip install numba)"


@pytest.mark.parametrize(
    "error", [ImportError("libllvmlite.so: cannot open shared object file", name="llvmlite"), SystemError("boom")]
)
def test_numba_that_fails_to_import_falls_back_with_the_error(error):
    def broken():
        raise error

    path, numba = compiled.decide({}, import_numba=broken)
    assert numba is None and not path.enabled
    assert path.reason == f"importing numba failed: {type(error).__name__}: {error}"


def test_this_process_takes_the_compiled_path_wherever_numba_is_installed():
    """The default install is the fast one: numba installed and no switch set means compiled kernels."""
    forced = os.environ.get(compiled.ENV_NO_NUMBA, "").strip().lower() in {"1", "true", "yes", "on"}
    want = importlib.util.find_spec("numba") is not None and not forced
    assert compiled.status().enabled == want, compiled.status().describe()
    assert (compiled.load("_halfconv_numba") is not None) == want


_PROBE = """
import json, numpy as np
import ampcore
from ampcore_cpu import compiled, halfconv
x = np.linspace(-3, 3, 4096, dtype=np.float32)
assert np.array_equal(halfconv.to_float16(x).view(np.uint16), x.astype(np.float16).view(np.uint16))
loops = compiled.load("_halfconv_numba")
stats = None if loops is None else loops.down.stats
print(json.dumps({
    "compiled": ampcore.get_backend("cpu").capabilities().extra["compiled"],
    "path": ampcore.get_backend("cpu").capabilities().extra["kernel_path"],
    "engine": halfconv.engine(),
    "hits": None if stats is None else sum(stats.cache_hits.values()),
    "misses": None if stats is None else sum(stats.cache_misses.values()),
}))
"""


def _probe(env):
    done = subprocess.run([sys.executable, "-c", _PROBE], env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.slow
def test_a_second_process_loads_the_compiled_loops_from_the_disk_cache(tmp_path):
    if not compiled.status().enabled:
        pytest.skip(f"the cpu backend runs its {compiled.status().describe()}")
    env = {k: v for k, v in os.environ.items() if k not in ("NUMBA_CACHE_DIR", compiled.ENV_NO_NUMBA)}
    env["XDG_CACHE_HOME"] = str(tmp_path)
    first, second = _probe(env), _probe(env)
    assert first["compiled"] is True and first["path"].startswith("compiled (numba ")
    assert first["path"].endswith(f"cached in {tmp_path / 'ampcore' / 'numba' / compiled.sources_key()})")
    assert first["engine"] == "numba" and (first["hits"], first["misses"]) == (0, 1)
    assert (second["hits"], second["misses"]) == (1, 0)
    assert any(p.suffix == ".nbi" for p in (tmp_path / "ampcore" / "numba").rglob("*"))


def test_the_switch_gives_the_numpy_fallback_in_a_process_that_has_numba(tmp_path):
    env = {**os.environ, compiled.ENV_NO_NUMBA: "1"}
    got = _probe(env)
    assert got == {
        "compiled": False,
        "path": "NumPy fallback: AMPCORE_CPU_NO_NUMBA=1 is set",
        "engine": "numpy",
        "hits": None,
        "misses": None,
    }
