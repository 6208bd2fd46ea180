"""A sketch of the NCCL path for ampcore.distributed: collectives on CUDA arrays, device to device, via CuPy.

Host staging copies every gradient bucket to the host and back; NCCL reduces
in GPU memory (NVLink, InfiniBand).  Plug it under an MPI communicator, which
still carries the host-side collectives (configuration checks, checkpoints)::

    group = ampcore.distributed.init()
    use_nccl(group)                      # cuda tensors now skip the host
    ddp = DistributedDataParallel(model, process_group=group)

Status: written against ``cupy.cuda.nccl``'s documented API and tested with a
one-rank communicator where a GPU and CuPy with NCCL are present
(tests/test_cuda_nccl.py skips otherwise, saying why).  Not yet measured on
several GPUs.  bfloat16 sums run in NCCL's bfloat16 arithmetic, unlike the
host path's float32 sum.
"""

from __future__ import annotations

from typing import Any

from ampcore import dtypes as dt
from ampcore.distributed import REDUCE_OPS, DevicePath, MPICommunicator

from .array import CuArray
from .codegen import ctype
from .runtime import import_cupy

__all__ = ["NCCLPath", "use_nccl"]


def _nccl() -> Any:
    import_cupy()
    from cupy.cuda import nccl  # imported only here: CuPy without NCCL still runs everything else

    return nccl


class NCCLPath(DevicePath):
    """NCCL collectives among the ranks of ``group`` (one GPU per rank, on the current CUDA stream)."""

    def __init__(self, group: MPICommunicator) -> None:
        nccl = _nccl()
        uid = group.broadcast_object(nccl.get_unique_id() if group.rank == 0 else None, 0)
        self._nccl = nccl
        self._comm = nccl.NcclCommunicator(group.size, uid, group.rank)
        self._size = group.size
        self._types = {
            dt.float32: nccl.NCCL_FLOAT32,
            dt.float16: nccl.NCCL_FLOAT16,
            dt.float64: nccl.NCCL_FLOAT64,
            dt.bfloat16: getattr(nccl, "NCCL_BFLOAT16", None),
            dt.int32: nccl.NCCL_INT32,
            dt.int64: nccl.NCCL_INT64,
            dt.bool_: nccl.NCCL_UINT8,
        }
        self._ops = {"sum": nccl.NCCL_SUM, "avg": nccl.NCCL_SUM, "max": nccl.NCCL_MAX, "min": nccl.NCCL_MIN}

    def _type(self, dtype: dt.DType) -> int:
        code = self._types.get(dtype)
        if code is None:
            raise TypeError(f"NCCL has no type for {dtype.name} in this CuPy build; use float32 or host staging")
        return code

    @staticmethod
    def _stream() -> int:
        return import_cupy().cuda.get_current_stream().ptr

    def all_reduce(self, array: CuArray, dtype: dt.DType, op: str) -> CuArray:
        if op not in REDUCE_OPS:
            raise ValueError(f"unknown reduce op {op!r}; use one of {', '.join(map(repr, REDUCE_OPS))}")
        src = array.data.ravel()
        out = import_cupy().empty_like(src)
        self._comm.allReduce(src.data.ptr, out.data.ptr, src.size, self._type(dtype), self._ops[op], self._stream())
        if op == "avg":
            if dtype not in (dt.float32, dt.float64, dt.float16):
                raise TypeError(f"avg over NCCL needs a float32, float64 or float16 tensor, got {dtype.name}")
            out /= self._size
        return CuArray(out.reshape(array.data.shape), dtype)

    def broadcast(self, array: CuArray, dtype: dt.DType, src: int) -> CuArray:
        data = array.data.ravel()
        out = import_cupy().empty_like(data)
        self._comm.broadcast(data.data.ptr, out.data.ptr, data.size, self._type(dtype), src, self._stream())
        return CuArray(out.reshape(array.data.shape), dtype)

    def all_gather(self, array: CuArray, dtype: dt.DType) -> list[CuArray]:
        cupy = import_cupy()
        data = array.data.ravel()
        out = cupy.empty((self._size, data.size), dtype=ctype(dtype).cupy_dtype)
        self._comm.allGather(data.data.ptr, out.data.ptr, data.size, self._type(dtype), self._stream())
        return [CuArray(out[r].reshape(array.data.shape), dtype) for r in range(self._size)]


def use_nccl(group: MPICommunicator) -> NCCLPath:
    """Route ``group``'s collectives on cuda tensors through NCCL (a collective: call it on every rank)."""
    path = NCCLPath(group)
    group.set_device_path("cuda", path)
    return path
