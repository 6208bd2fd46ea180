"""torch.backends.cuda: ``matmul.allow_tf32`` (float32 GEMM precision) and the attention switches.

``matmul.allow_tf32`` reads and writes :func:`ampcore.set_float32_matmul_precision`,
as torch's does (True: ``"high"``, a backend may use TF32; False: ``"highest"``).
``allow_fp16_reduced_precision_reduction`` and
``allow_bf16_reduced_precision_reduction`` are accepted and change nothing:
ampcore's 16-bit GEMMs accumulate in float32 always.  The
scaled-dot-product-attention switches (``enable_flash_sdp`` and friends) are
accepted and change nothing: ampcore's ``scaled_dot_product_attention`` does
not choose among those kernels.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..kernels import get_float32_matmul_precision, set_float32_matmul_precision
from ..names import missing_names_getattr as _missing_names_getattr
from ..plugins.registry import registry

__all__ = [
    "matmul",
    "is_built",
    "enable_flash_sdp",
    "flash_sdp_enabled",
    "enable_mem_efficient_sdp",
    "mem_efficient_sdp_enabled",
    "enable_math_sdp",
    "math_sdp_enabled",
    "enable_cudnn_sdp",
    "cudnn_sdp_enabled",
]


class _Matmul:
    """``backends.cuda.matmul``: ``allow_tf32`` is the float32 matmul precision; the reduction flags are kept."""

    def __init__(self) -> None:
        self.allow_fp16_reduced_precision_reduction = True
        self.allow_bf16_reduced_precision_reduction = True

    @property
    def allow_tf32(self) -> bool:
        return get_float32_matmul_precision() != "highest"

    @allow_tf32.setter
    def allow_tf32(self, value: bool) -> None:
        set_float32_matmul_precision("high" if value else "highest")

    def __repr__(self) -> str:
        return f"<ampcore.backends.cuda.matmul allow_tf32={self.allow_tf32}>"


matmul = _Matmul()


def is_built() -> bool:
    """True when the ``cuda`` backend (ampcore-cuda) is installed."""
    registry.ensure_loaded()
    return "cuda" in registry.records


_sdp = {"flash": True, "mem_efficient": True, "math": True, "cudnn": True}


def enable_flash_sdp(enabled: bool) -> None:
    """Accepted; no effect."""
    _sdp["flash"] = bool(enabled)


def flash_sdp_enabled() -> bool:
    return _sdp["flash"]


def enable_mem_efficient_sdp(enabled: bool) -> None:
    """Accepted; no effect."""
    _sdp["mem_efficient"] = bool(enabled)


def mem_efficient_sdp_enabled() -> bool:
    return _sdp["mem_efficient"]


def enable_math_sdp(enabled: bool) -> None:
    """Accepted; no effect."""
    _sdp["math"] = bool(enabled)


def math_sdp_enabled() -> bool:
    return _sdp["math"]


def enable_cudnn_sdp(enabled: bool) -> None:
    """Accepted; no effect."""
    _sdp["cudnn"] = bool(enabled)


def cudnn_sdp_enabled() -> bool:
    return _sdp["cudnn"]


if not TYPE_CHECKING:  # a torch name this module lacks says so and points to the porting guide; mypy still checks
    __getattr__ = _missing_names_getattr(__name__, __all__)
