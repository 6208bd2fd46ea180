"""Fused optimizer-step kernels for the CPU backend."""

OPTIM_KERNELS: dict = {}
