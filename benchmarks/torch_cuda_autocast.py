"""What torch's CUDA autocast does with the ops issue 37 added, beside what ampcore's cuda policy says: a GPU run
settles what the CPU cannot show (torch 2.13 registers upsample ops and einsum for AutocastCUDA, though its
documented lists name only some of them).

For each op: torch's output dtype under ``torch.autocast("cuda", dtype=torch.float16)`` on float32 and on
float16 inputs, the category that implies, and ampcore's cuda category (``ampcore policy --device cuda``).
Exits 1 if any differs.  Needs torch with CUDA and a GPU (run by ``benchmarks/gpu_checks.sh``).

    python benchmarks/torch_cuda_autocast.py
"""

from __future__ import annotations

import sys

from ampcore import policy as P
from ampcore.dispatch import is_registered


def main() -> int:
    import torch
    import torch.nn.functional as F

    if not torch.cuda.is_available():
        print("torch has no CUDA device here: nothing to compare")
        return 1
    dev = "cuda"

    def t(dtype, *shape):
        return torch.rand(*shape, device=dev, dtype=dtype) + 0.5

    calls = {
        "upsample_nearest2d": lambda d: F.interpolate(t(d, 1, 2, 4, 4), scale_factor=2),
        "upsample_bilinear2d": lambda d: F.interpolate(t(d, 1, 2, 4, 4), scale_factor=2, mode="bilinear"),
        "einsum": lambda d: torch.einsum("ij,jk->ik", t(d, 3, 4), t(d, 4, 5)),
        "norm": lambda d: torch.norm(t(d, 3, 4), dim=1),
        "prod": lambda d: torch.prod(t(d, 3, 4), 1),
        "cumprod": lambda d: torch.cumprod(t(d, 3, 4), 1),
        "cdist": lambda d: torch.cdist(t(d, 3, 4), t(d, 5, 4)),
        "conv_transpose2d": lambda d: F.conv_transpose2d(t(d, 1, 2, 4, 4), t(d, 2, 3, 3, 3)),
        "conv3d": lambda d: F.conv3d(t(d, 1, 2, 4, 4, 4), t(d, 3, 2, 3, 3, 3)),
        "addbmm": lambda d: torch.addbmm(t(d, 3, 5), t(d, 2, 3, 4), t(d, 2, 4, 5)),
        "adaptive_avg_pool2d": lambda d: F.adaptive_avg_pool2d(t(d, 1, 2, 5, 5), 2),
        "reflection_pad2d": lambda d: F.pad(t(d, 1, 2, 4, 4), (1, 1, 1, 1), mode="reflect"),
        "LSTMCell": lambda d: torch.lstm_cell(
            t(d, 3, 5), (t(d, 3, 6), t(d, 3, 6)), t(d, 24, 5), t(d, 24, 6), t(d, 24), t(d, 24)
        )[0],
        "GRUCell": lambda d: torch.gru_cell(t(d, 3, 5), t(d, 3, 6), t(d, 18, 5), t(d, 18, 6), t(d, 18), t(d, 18)),
        "RNNCell": lambda d: torch.rnn_tanh_cell(t(d, 3, 5), t(d, 3, 6), t(d, 6, 5), t(d, 6, 6), t(d, 6), t(d, 6)),
    }
    cuda = P.builtin("cuda")
    failed = 0
    print(f"{'op':22} {'torch f32->':>12} {'torch f16->':>12} {'torch says':>10} {'ampcore cuda':>12}")
    for op, call in calls.items():
        with torch.autocast("cuda", dtype=torch.float16):
            from32, from16 = call(torch.float32).dtype, call(torch.float16).dtype
        category = "lower" if from32 == torch.float16 else "fp32" if from16 == torch.float32 else "unlisted"
        ours = cuda.category(op).value if op in cuda.entries or is_registered(op) else "-"
        mark = "" if ours == category else "   DIFFERS"
        failed += bool(mark)
        print(f"{op:22} {str(from32):>12} {str(from16):>12} {category:>10} {ours:>12}{mark}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
