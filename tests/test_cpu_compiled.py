"""The cpu backend's compiled (numba) kernels: the same bits as its NumPy kernels, and memory measured
without numba's one-time compilation."""

import subprocess
import sys
import textwrap

import pytest

from ampcore_cpu import compiled


def test_peak_memory_does_not_count_numba_compiling_the_loops():
    """In a fresh process the first float16 conversion compiles (or loads) numba's loops: tens of MiB of
    Python objects.  peak_memory loads them before tracing, so it reports the arrays (~10 KiB here)."""
    pytest.importorskip("numba")
    script = textwrap.dedent(
        """
        import numpy as np
        import ampcore
        backend = ampcore.get_backend("cpu")
        k, x = backend.kernels, np.ones(4096, np.float32)
        print(backend.peak_memory(lambda: k.cast(k.cast(x, ampcore.float16), ampcore.float32)))
        """
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    assert int(out.stdout.split()[-1]) < 1 << 20


def test_warm_says_whether_numba_is_in_use():
    try:
        import numba  # noqa: F401
    except ImportError:
        assert compiled.warm() is False
    else:
        assert compiled.warm() is True
