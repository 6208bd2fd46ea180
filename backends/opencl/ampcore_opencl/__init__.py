"""ampcore's OpenCL backend (pyopencl): float16 storage on every device, native half where the device has it.

pyopencl is imported lazily, so ``import ampcore_opencl`` works without it and
the backend is listed as unavailable with the reason.
"""
