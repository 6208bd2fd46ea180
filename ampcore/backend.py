"""The backend contract: what a device plugin supplies.

Subclass :class:`Backend`, fill in the abstract methods, return an instance
from the ``ampcore_backends`` hook, and register the plugin module under the
``ampcore.backends`` entry-point group.  ``docs/writing-a-backend.md`` walks
through it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .dtypes import _BY_NUMPY, DType, as_dtype
from .kernels import KernelTable

__all__ = ["Backend", "Capabilities", "Availability", "BackendUnavailableError", "FLOAT8_SUPPORT"]

# How a device runs float8: in hardware, emulated exactly through float32, or not at all.
FLOAT8_SUPPORT = ("native", "emulated", "none")


@dataclass(frozen=True)
class Availability:
    """Whether a backend can run here, and if not, why and how to fix it."""

    ok: bool
    reason: str = ""

    def __bool__(self) -> bool:
        return self.ok


@dataclass(frozen=True)
class Capabilities:
    """What one device of a backend can do.

    ``storable`` dtypes can hold tensors; of those, ``native`` ones are
    computed in their own precision and ``emulated`` ones are computed in a
    wider type and rounded on the way out.  ``policy`` names the built-in
    cast-policy table autocast starts from (``"cpu"`` or ``"cuda"``).
    ``fallback_ops`` lists, per low-precision dtype, the ops this device
    cannot run in it (say, no bfloat16 GEMM before compute capability 8.0):
    autocast runs them in float32 instead and its trace says why.

    ``float8`` says how this device runs float8 (the formats in
    :data:`ampcore.dtypes.FLOAT8_DTYPES`, the ``quantize_float8`` and
    ``scaled_mm`` kernels): ``"native"`` (hardware float8, sm_89+),
    ``"emulated"`` (exact, through float32) or ``"none"`` (the default: no
    float8 tensors; ``float8_reason`` says why).  A device with float8 lists
    the float8 dtypes in ``storable``.
    """

    device_name: str
    storable: frozenset[DType]
    native: frozenset[DType]
    emulated: frozenset[DType] = frozenset()
    autocast_dtype: DType | None = None
    policy: str = "cpu"
    memory_bytes: int | None = None
    fallback_ops: Mapping[DType, frozenset[str]] = field(default_factory=dict)
    extra: Mapping[str, Any] = field(default_factory=dict)
    float8: str = "none"
    float8_reason: str = ""

    def __post_init__(self) -> None:
        if self.float8 not in FLOAT8_SUPPORT:
            raise ValueError(f"Capabilities float8 must be one of {FLOAT8_SUPPORT}, got {self.float8!r}")

    def as_dict(self) -> dict[str, Any]:
        """A JSON-friendly view, for ``ampcore info`` and reports."""
        names = lambda ds: sorted(d.name for d in ds)  # noqa: E731 - local formatting helper
        return {
            "device_name": self.device_name,
            "storable": names(self.storable),
            "native": names(self.native),
            "emulated": names(self.emulated),
            "autocast_dtype": self.autocast_dtype.name if self.autocast_dtype else None,
            "policy": self.policy,
            "memory_bytes": self.memory_bytes,
            "fallback_ops": {d.name: sorted(ops) for d, ops in self.fallback_ops.items()},
            "float8": self.float8,
            **({"float8_reason": self.float8_reason} if self.float8_reason else {}),
            **{str(k): v for k, v in self.extra.items()},
        }


class BackendUnavailableError(RuntimeError):
    """The named backend is installed but cannot run here, or (``device`` given) that one device of it cannot."""

    def __init__(self, name: str, reason: str, device: str | None = None):
        self.name = name
        self.reason = reason
        self.device = device
        if device is None:
            super().__init__(f"backend {name!r} is installed but unavailable: {reason}")
        else:
            super().__init__(f"device {device!r} of backend {name!r} is unusable: {reason}")


class Backend:
    """Base class for backends.  Subclasses set ``name`` and implement the
    methods that raise NotImplementedError.

    ``priority`` orders automatic selection: the highest-priority available
    backend is the default device (cpu is 100; GPU backends should be higher).
    """

    name: str = ""
    device_type: str = ""
    priority: int = 0
    kernels: KernelTable  # set by the registry when the backend is loaded

    # --- discovery -----------------------------------------------------
    def availability(self) -> Availability:
        """Whether the device library and a device are present; never raises."""
        return Availability(True)

    def device_count(self) -> int:
        """How many devices ``name:0`` .. ``name:N-1`` exist (when available), usable or not."""
        return 1

    def device_status(self, index: int = 0) -> Availability:
        """Whether device ``index`` can run kernels here, and if not, why and the fix; never raises.

        A backend whose devices can fail one by one (an OpenCL device whose
        compiler cannot build for this CPU, say) overrides this.  Selecting an
        unusable device raises :class:`BackendUnavailableError` with the reason,
        and the default device is the first usable one.  The backend is available
        only if at least one device is usable.  The default: every device is.
        """
        return Availability(True)

    def capabilities(self, index: int = 0) -> Capabilities:
        raise NotImplementedError

    def kernel_functions(self) -> Mapping[str, Callable[..., Any]]:
        """This backend's own kernels: every primitive, and any fused ones."""
        raise NotImplementedError

    # --- array I/O -----------------------------------------------------
    def from_numpy(self, array: np.ndarray, dtype: DType, device_index: int = 0) -> Any:
        """A device array holding ``array`` converted to ``dtype``."""
        raise NotImplementedError

    def to_numpy(self, array: Any) -> np.ndarray:
        """A host copy (bfloat16 as ``ml_dtypes.bfloat16``)."""
        raise NotImplementedError

    def dtype_of(self, array: Any) -> DType:
        # A dict lookup first: the core reads the dtype of every kernel's output (ampcore.kernel_outputs).
        found = _BY_NUMPY.get(array.dtype)
        return found if found is not None else as_dtype(array.dtype)

    def shape_of(self, array: Any) -> tuple[int, ...]:
        return tuple(array.shape)

    def nbytes(self, array: Any) -> int:
        """Bytes the array occupies on the device (2 per element for fp16/bf16)."""
        return int(array.nbytes)

    def synchronize(self, device_index: int = 0) -> None:
        """Wait for queued work (for timing); a no-op on synchronous backends."""

    def warm_up(self, device_index: int = 0) -> None:
        """Load what this backend loads once per process (compiled kernels, a context, a probed GEMM path), so
        that timing a workload does not charge it to whichever workload ran first (``ampcore train`` calls this
        before its clock starts); a no-op by default."""

    def memory_allocated(self, device_index: int = 0) -> int | None:
        """Bytes the backend's arrays hold on the device now (``ampcore.<name>.memory_allocated()``);
        ``None`` (the default) when the backend does not track it, which that function reports as 0."""
        return None

    def max_memory_allocated(self, device_index: int = 0) -> int | None:
        """The most bytes the backend's arrays held on the device since :meth:`reset_peak_memory_stats`
        (``ampcore.<name>.max_memory_allocated()``); ``None`` (the default) when it does not track it."""
        return None

    def reset_peak_memory_stats(self, device_index: int = 0) -> None:
        """Restart :meth:`max_memory_allocated` from the bytes held now; a no-op by default."""

    def empty_cache(self, device_index: int = 0) -> None:
        """Return cached free memory (a pool's kept blocks) to the device (``ampcore.<name>.empty_cache()``);
        a no-op by default."""

    # --- measurement ---------------------------------------------------
    def peak_memory(self, fn: Callable[[], Any], device_index: int = 0) -> int | None:
        """Run ``fn()`` once and return the most bytes of device memory it had allocated at once.

        Memory already held when ``fn`` starts is not counted, so a caller
        that builds a model inside ``fn`` measures everything the model needs.
        ``None`` (the default) means this backend cannot tell; ``fn`` still
        runs.  ``ampcore bench`` reports it as peak memory.
        """
        fn()
        return None

    # --- host threads --------------------------------------------------
    def set_num_threads(self, n: int) -> None:
        """Use ``n`` host threads for this backend's work (its BLAS, compiled loops, a CPU runtime's pool).

        Called with ``ampcore.get_num_threads()`` when the backend is loaded, and by
        ``ampcore.set_num_threads(n)``.  The default does nothing: a backend whose work does not run on
        host threads (a GPU's) ignores the setting.
        """

    def thread_counts(self) -> Mapping[str, int]:
        """The host threads each library of this backend uses now, such as ``{"blas": 2, "numba": 2}``,
        for ``ampcore info`` and ``ampcore bench``; empty (the default) when it runs on none."""
        return {}

    # --- captured steps (ampcore.compile) -------------------------------
    def fused_kernel(self, program: Any, operand_dtypes: Sequence[DType], result_dtype: DType) -> Any:
        """The kernel of a captured program's fused elementwise chain (:mod:`ampcore.capture.fusion`), or None.

        ``program`` is an :class:`ampcore.expr.Program` of correctly rounded functions and rounding nodes
        (``round_float16``, ``round_bfloat16``), computed in float32 for float32/float16/bfloat16 operands
        (float64 for float64), each node rounded on its own; its operands may differ in dtype
        (``operand_dtypes``: each is widened exactly to the compute type when loaded; bool ones are bools),
        and the result is rounded once to ``result_dtype``.  Operands broadcast, as the ``elementwise``
        primitive's.  The kernel takes the operands and returns a new array; it must give the bits the
        chain's kernels give one by one.  None (the default): the chain's kernels run one by one.  The C
        backends render the program with :func:`ampcore.expr.render` (the rounding nodes are spelled with
        :mod:`ampcore.cgen`'s conversions) and load each operand with :func:`ampcore.cgen.load` of its own
        dtype tag.
        """
        return None

    def fused_gemm_kernel(
        self, gemm: str, program: Any, product_dtype: DType, operand_dtypes: Sequence[DType], result_dtype: DType
    ) -> Any:
        """The kernel of a captured GEMM (``gemm``: ``"matmul"`` or ``"scaled_mm"``) and the elementwise chain that
        alone reads its result (a linear layer's bias, activation and casts: :mod:`ampcore.capture.fusion`), or
        None (the default: the GEMM runs as its own kernel, and the chain as :meth:`fused_kernel` makes it).

        The kernel is called as ``kernel(*gemm_args, *rest)``, with the GEMM kernel's own arguments: their
        product as that kernel computes it, but kept as the float32 result it rounds last (float64 for a
        float64 matmul) instead of its ``product_dtype`` result, then ``program`` (as for :meth:`fused_kernel`)
        over that product, as its input 0, and ``rest``, whose dtypes are ``operand_dtypes[1:]``
        (``operand_dtypes[0]`` is the product's compute type).  ``program`` starts with the rounding eager gives
        a 16-bit product, so the result is eager's GEMM followed by the chain, bit for bit; where a call's
        product cannot be had unrounded, round it as the GEMM does and widen it (the program's rounding of a
        rounded value changes nothing).
        """
        return None

    def capture_runner(self, program: Any) -> Any:
        """A runner replaying ``program`` (an :class:`ampcore.capture.Program`) faster than the core's
        reference, :func:`ampcore.capture.reference_runner` (whose signature it has: ``run(inputs, seeds,
        dynamics) -> results``), or None (the default: the reference replays it).  A CUDA backend captures the
        kernels in a CUDA graph once and launches the graph; an OpenCL one prebuilds its list of enqueues.
        Called once per recorded program, after fusion."""
        return None

    def capture_support(self) -> str:
        """What ``ampcore info`` says this backend's captured steps do."""
        return "kernel-by-kernel replay (the core's reference runner); elementwise chains not fused"

    # --- conformance ---------------------------------------------------
    def conformance_known_gaps(self) -> str | None:
        """Path of the TOML file listing the conformance checks this backend is known to fail, with reasons.

        ``None`` (the default): no known gaps, every check must pass.  See
        :mod:`ampcore.conformance.gaps` for the format.
        """
        return None

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name!r}>"
