"""The cpu backend's compiled path: numba where it imports, the NumPy fallback where it does not, and why.

numba is a dependency of ampcore-cpu wherever it has wheels, so the default
install runs the compiled loops (``_*_numba.py``).  The pure-NumPy fallback
is chosen only when

- ``AMPCORE_CPU_NO_NUMBA=1`` asks for it (CI runs the cpu tests both ways in one install),
- numba is not installed (a platform or Python it has no wheels for), or
- importing numba fails (a broken llvmlite, a NumPy it does not support yet).

Either way the results are the same bits (each compiled loop's module says so).
``ampcore info`` prints :func:`status`'s :meth:`CompiledPath.describe`.

Compiled functions are cached on disk (``numba.njit(cache=True)``), so a
second process loads them instead of compiling again: in ``$NUMBA_CACHE_DIR``
when the user set it, else in ``$XDG_CACHE_HOME/ampcore/numba/<key>``
(``~/.cache/ampcore/numba/<key>``), where ``<key>`` hashes the source of every
``_*_numba.py`` module.  numba checks a cached function against its own file
only, not the files whose functions it inlined (``f16_bits``, the F16C
conversions): an upgrade that changed an inlined helper would otherwise load
the old machine code.

For kernel authors: put the compiled loops in a module that imports numba at
its top and decorates them ``@numba.njit(cache=True, ...)``, and import that
module only through :func:`load`, which returns None on the fallback path.
"""

from __future__ import annotations

import functools
import hashlib
import importlib
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

import numpy as np

__all__ = ["ENV_NO_NUMBA", "CompiledPath", "cache_dir", "sources_key", "decide", "load", "status", "on_load"]

ENV_NO_NUMBA = "AMPCORE_CPU_NO_NUMBA"
_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"", "0", "false", "no", "off"}
# Called with numba once it is imported (the thread setting applies itself this way); see on_load.
_LOAD_HOOKS: list[Callable[[ModuleType], None]] = []


@dataclass(frozen=True)
class CompiledPath:
    """Which path the cpu backend's kernels take: ``enabled`` (compiled by numba) or the NumPy fallback.

    ``reason`` says why the fallback was chosen ("" when enabled); ``cache_dir`` is where numba keeps what
    it compiled.
    """

    enabled: bool
    reason: str = ""
    numba_version: str | None = None
    cache_dir: str | None = None

    def describe(self) -> str:
        """One line for ``ampcore info``: ``compiled (numba 0.61.2, cached in ...)`` or ``NumPy fallback: why``."""
        if self.enabled:
            return f"compiled (numba {self.numba_version}, cached in {self.cache_dir})"
        return f"NumPy fallback: {self.reason}"


def cache_dir(environ: Mapping[str, str] | None = None) -> Path:
    """Where numba caches compiled functions: ``$NUMBA_CACHE_DIR`` if set, else
    ``$XDG_CACHE_HOME/ampcore/numba/<sources_key()>``."""
    env = os.environ if environ is None else environ
    if env.get("NUMBA_CACHE_DIR"):
        return Path(env["NUMBA_CACHE_DIR"])
    base = env.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "ampcore" / "numba" / sources_key()


@functools.cache
def sources_key() -> str:
    """16 hex digits of a hash of every compiled module's source: a new directory whenever one changes."""
    digest = hashlib.sha256()
    for path in sorted(Path(__file__).parent.glob("_*_numba.py")):
        digest.update(path.name.encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()[:16]


def _disabled(environ: Mapping[str, str]) -> bool:
    value = environ.get(ENV_NO_NUMBA, "").strip().lower()
    if value in _TRUE:
        return True
    if value in _FALSE:
        return False
    raise ValueError(
        f"{ENV_NO_NUMBA}={environ[ENV_NO_NUMBA]!r} is not a switch; set it to 1 to force the NumPy fallback "
        "or 0 (or unset it) for the compiled path"
    )


def _import_numba() -> ModuleType:
    return importlib.import_module("numba")


def decide(
    environ: Mapping[str, str] | None = None, import_numba: Callable[[], ModuleType] = _import_numba
) -> tuple[CompiledPath, ModuleType | None]:
    """Choose the path (importing numba unless the environment forbids it) and return it with numba, or None.

    Before numba is imported, ``NUMBA_CACHE_DIR`` is set to :func:`cache_dir` where the user has not set it,
    so numba's cache goes there; a numba imported earlier by someone else gets the same directory through its
    ``config.CACHE_DIR``.  ValueError when ``AMPCORE_CPU_NO_NUMBA`` holds something that is not a switch.
    """
    env = os.environ if environ is None else environ
    if _disabled(env):
        return CompiledPath(False, f"{ENV_NO_NUMBA}={env[ENV_NO_NUMBA]} is set"), None
    where = cache_dir(env)
    if environ is None and not os.environ.get("NUMBA_CACHE_DIR"):
        os.environ["NUMBA_CACHE_DIR"] = str(where)
    try:
        numba = import_numba()
    except ImportError as exc:
        if exc.name == "numba":
            return CompiledPath(False, "numba is not installed (pip install numba)"), None
        return CompiledPath(False, f"importing numba failed: {type(exc).__name__}: {exc}"), None
    except Exception as exc:  # noqa: BLE001 - numba's import can fail in many ways (llvmlite, NumPy); fall back, say why
        return CompiledPath(False, f"importing numba failed: {type(exc).__name__}: {exc}"), None
    config = getattr(numba, "config", None)
    if config is not None and not env.get("NUMBA_CACHE_DIR") and getattr(config, "CACHE_DIR", "") != str(where):
        config.CACHE_DIR = str(where)  # numba was imported before we could set its environment
    return CompiledPath(True, "", getattr(numba, "__version__", "?"), str(where)), numba


@functools.cache
def _decided() -> tuple[CompiledPath, ModuleType | None]:
    path, numba = decide()
    if numba is not None:
        for hook in _LOAD_HOOKS:
            hook(numba)
    return path, numba


def status() -> CompiledPath:
    """This process's path, decided once (the first call imports numba unless the fallback is forced)."""
    return _decided()[0]


def loaded_numba() -> ModuleType | None:
    """numba if this process has decided on the compiled path already, else None (never imports it)."""
    if _decided.cache_info().currsize == 0:
        return None
    return _decided()[1]


def on_load(hook: Callable[[ModuleType], None]) -> None:
    """Call ``hook(numba)`` once numba is imported for the compiled path (at once if it already is)."""
    _LOAD_HOOKS.append(hook)
    numba = loaded_numba()
    if numba is not None:
        hook(numba)


def load(name: str) -> ModuleType | None:
    """The compiled module ``ampcore_cpu.<name>`` (it imports numba), or None on the NumPy fallback path."""
    if not status().enabled:
        return None
    return importlib.import_module(f"{__package__}.{name}")


@functools.cache
def warm() -> bool:
    """Load every compiled loop of the backend before memory is measured; returns whether numba is in use.

    numba compiles a loop (or reads it from its on-disk cache) on its first
    call, and that builds tens of MiB of short-lived Python objects (type
    inference, LLVM modules, the cache's pickles).  tracemalloc counts them, so
    whichever configuration first ran a compiled loop in ``ampcore bench``
    reported them as its peak (the float16 AMP configuration's peak was
    1.7-1.9x float32's on the mlp and cnn).  That memory is the process's, paid
    once, not a configuration's, so :meth:`CPUBackend.peak_memory` calls this
    first: each loop once, on tiny arrays of the types the backend passes it.
    """
    names = ("_bf16conv_numba", "_gelu_numba", "_halfconv_numba", "_optim_numba", "_f16c_numba")
    names += ("_lowp_max_numba", "_pool_numba", "_select_numba", "_gelu32_numba", "_gelu16_numba", "_scatter_numba")
    names += ("_softmax_numba",)
    if not status().enabled:
        return False
    loaded = [load(n) for n in names]
    assert all(loaded)  # status().enabled: numba imported
    bf16conv, gelu, halfconv, optim, f16c, lowp_max, pool, select, gelu32, gelu16, scatter, softmax = loaded
    bits32, bits16 = np.zeros(1, np.uint32), np.zeros(1, np.uint16)
    halfconv.down(bits32, bits16)
    select.gather(bits16, np.zeros(1 << 16, np.uint32), bits32)  # halfconv's lookup without F16C
    if f16c.F16C:
        f16c.up(bits16, bits32)
    bf16conv.down(bits32, bits16)
    x, out = np.zeros(1, np.float32), np.zeros(1, np.float64)
    gelu.gelu(x, out)
    gelu.gelu_backward(x, x, out)
    ok = np.zeros(1, np.bool_)
    gelu32.gelu(x, x, ok)
    gelu32.gelu_backward(x, x, x, ok)
    select.gather(bits16, np.zeros(1 << 16, np.uint16), bits16)  # the 16-bit GELU's forward
    select.gather(np.zeros(1, np.uint8), np.zeros(256, np.float32), x)  # float8 codes to float32
    gelu16.backward_bf16(bits16, bits16, out, bits16)
    gelu16.backward_f16(bits16, bits16, out, bits16)
    for rows in (np.zeros((1, 1), np.float32), np.zeros((1, 1), np.float64)):
        scatter.add_rows(rows, np.zeros(1, np.int64), rows.copy())
    for bits in (np.zeros((1, 1), np.float32), np.zeros((1, 1), np.uint16), np.zeros((1, 1), np.int16)):
        e = np.zeros((1, 1), np.float32)
        softmax.shifted(bits, e)
        softmax.normalized(e, bits.copy())
        softmax.backward(bits, bits, bits.copy())
        softmax.row_sums(e, e.reshape(1))
        softmax.log_normalized(e, e.reshape(1), bits.copy())
        softmax.log_backward(e, bits, bits.copy())
    optim.adamw(x, x, x, x, np.zeros(8, np.float32), True, True)
    optim.unscale(x, np.float32(1.0))
    optim.unscale(out, np.float32(1.0))
    bits2d = np.zeros((1, 1), np.uint16)
    lowp_max.max_along(bits2d.reshape(1, 1, 1), bits2d)
    importlib.import_module(f"{__package__}.loops").warm()
    for image, nan_above in ((np.zeros((1, 2, 2), np.float32), 0), (np.zeros((1, 2, 2), np.uint16), 0x7C00)):
        pooled = image[:, :1, :1].copy()
        pool.forward2x2(image, nan_above, False, pooled)
        pool.backward2x2(image, pooled, nan_above, np.zeros_like(image))
    mask = np.zeros(1, np.uint8)
    for bits in (bits16, bits32, np.zeros(1, np.uint64)):
        select.select(mask, bits, bits, bits)
        for a_first in (True, False):
            select.select_scalar(mask, bits, bits[0], a_first, bits)
    return True
