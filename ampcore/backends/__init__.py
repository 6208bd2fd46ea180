"""torch.backends' namespaces: the flags torch code sets, and what each means here.

``ampcore.backends.cuda.matmul.allow_tf32`` is torch's switch for float32
GEMMs, the same setting as :func:`ampcore.set_float32_matmul_precision`
(True is ``"high"``, False ``"highest"``).  The others are accepted and change
nothing, because ampcore has no cuDNN, oneDNN or Metal path:
``cudnn.benchmark`` and ``cudnn.deterministic`` (there is no cuDNN
algorithm search to turn on or restrict), ``cudnn.allow_tf32``, ``cudnn.enabled``,
``mkldnn.enabled`` and the scaled-dot-product-attention switches of
``backends.cuda``.  ``is_available()`` answers honestly: cuDNN, oneDNN and
MPS are not used, so False.  docs/porting-from-torch.md lists them.
"""

from typing import TYPE_CHECKING

from ..names import missing_names_getattr as _missing_names_getattr
from . import cuda, cudnn, mkldnn, mps

__all__ = ["cuda", "cudnn", "mkldnn", "mps"]


if not TYPE_CHECKING:  # a torch name this module lacks says so and points to the porting guide; mypy still checks
    __getattr__ = _missing_names_getattr(__name__, __all__)
