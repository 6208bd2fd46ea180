"""Fused softmax / log-softmax / GELU kernels for the CPU backend."""

NN_KERNELS: dict = {}
