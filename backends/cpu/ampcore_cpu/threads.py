"""The cpu backend's host threads: BLAS (OpenBLAS, and oneMKL) through threadpoolctl, and numba's own setting.

``ampcore.set_num_threads(n)`` (or ``AMPCORE_NUM_THREADS``, or the default)
reaches :func:`set_threads` through ``CPUBackend.set_num_threads``.  BLAS is
limited at once; oneMKL (:mod:`.mkl`), loaded on the first low-precision GEMM,
takes the setting through threadpoolctl when it loads; numba, imported only on the compiled path's first use, takes
the setting when it is imported (its pool cannot grow past the CPUs it found,
``numba.config.NUMBA_NUM_THREADS``, so a larger setting is capped there and
:func:`counts` shows the cap).  A loaded 2-core machine made the reason plain:
the mlp step took 203 ms with OpenBLAS's default threads against 36 ms with one.
"""

from __future__ import annotations

from types import ModuleType

from threadpoolctl import ThreadpoolController

from . import compiled, mkl

__all__ = ["counts", "set_threads", "wanted"]

_wanted: int | None = None
_controller: ThreadpoolController | None = None


def _blas() -> ThreadpoolController:
    """The BLAS libraries loaded in this process (NumPy's, and any loaded since the last look)."""
    global _controller
    _controller = ThreadpoolController()  # cheap (~1 ms); sees libraries loaded after the first look too
    return _controller.select(user_api="blas")


def _set_numba(numba: ModuleType) -> None:
    if _wanted is not None:
        numba.set_num_threads(min(_wanted, numba.config.NUMBA_NUM_THREADS))


def _set_mkl() -> None:
    if _wanted is not None:
        _blas().select(internal_api="mkl").limit(limits=_wanted)


compiled.on_load(_set_numba)
mkl.on_load(_set_mkl)


def wanted() -> int | None:
    """The thread count ``ampcore.set_num_threads`` (or its default) gave the backend, None before it did."""
    return _wanted


def set_threads(n: int) -> None:
    """Run BLAS and numba's parallel loops on ``n`` threads (numba's capped at the CPUs it found)."""
    global _wanted
    _wanted = n
    _blas().limit(limits=n)
    numba = compiled.loaded_numba()
    if numba is not None:
        _set_numba(numba)


def counts() -> dict[str, int]:
    """The threads each library uses now: ``blas`` (the most any loaded BLAS uses: OpenBLAS, and oneMKL once
    loaded) and, on the compiled path, ``numba``."""
    found: dict[str, int] = {}
    blas = [lib.num_threads for lib in _blas().lib_controllers]
    if blas:
        found["blas"] = max(blas)
    if compiled.status().enabled:
        numba = compiled.loaded_numba()
        if numba is not None:
            found["numba"] = int(numba.get_num_threads())
    return found
