"""ampcore's CUDA backend (CuPy): cuBLAS GEMMs accumulating in float32, fused AMP kernels as CUDA C.

CuPy is imported lazily, so ``import ampcore_cuda`` works without it, without
a driver and without a GPU; the backend is then listed as unavailable with the
reason and the command that fixes it.
"""
