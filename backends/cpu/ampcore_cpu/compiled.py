"""Load every compiled loop of the backend before memory is measured.

numba compiles a loop (or reads it from its on-disk cache) on its first call,
and that builds tens of MiB of short-lived Python objects (type inference,
LLVM modules, the cache's pickles).  tracemalloc counts them, so whichever
configuration first ran a compiled loop in ``ampcore bench`` reported them as
its peak: the float16 AMP configuration's peak memory was 1.7-1.9x float32's
on the mlp and cnn, and 38.7 MiB (mlp) / 37.7 MiB (cnn) when measured again
in the same process.  That memory is the process's, paid once, not a
configuration's, so :meth:`CPUBackend.peak_memory` calls :func:`warm` first.
"""

from __future__ import annotations

import functools

import numpy as np


@functools.cache
def warm() -> bool:
    """Call each compiled loop once on tiny arrays of the types the backend passes it (the types pick the
    compiled version).  Returns whether numba is in use; without it there is nothing to load."""
    try:
        from . import _bf16conv_numba, _gelu_numba, _halfconv_numba, _lowp_numba, _optim_numba
    except ImportError:
        return False
    bits32, bits16 = np.zeros(1, np.uint32), np.zeros(1, np.uint16)
    _halfconv_numba.down(bits32, bits16)
    _halfconv_numba.up(bits16, np.zeros(1 << 16, np.uint32), bits32)
    _bf16conv_numba.down(bits32, bits16)
    x, out = np.zeros(1, np.float32), np.zeros(1, np.float64)
    _gelu_numba.gelu(x, out)
    _gelu_numba.gelu_backward(x, x, out)
    consts = np.zeros(8, np.float32)
    _optim_numba.adamw(x, x, x, x, consts, True, True)
    bits2d = np.zeros((1, 1), np.uint16)
    for f16 in (True, False):
        _lowp_numba.binary(0, bits2d, bits2d, bits2d, f16)
    return True
