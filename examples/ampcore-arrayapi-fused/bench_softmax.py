"""Time softmax, forward and backward, on the arrayapi backend (best of 50, float32 256x1024).

Run it with and without ampcore-arrayapi-fused installed (or on PYTHONPATH) and compare; the first line says
who provides the softmax kernel ("arrayapi_fused", or null for the core's composition of primitives).
"""

import json
import time

import numpy as np

import ampcore


def best_ms(fn, x_host: np.ndarray, g_host: np.ndarray, reps: int = 50) -> float:
    gy = ampcore.tensor(g_host, device="arrayapi")
    best = float("inf")
    for _ in range(reps):
        x = ampcore.tensor(x_host, device="arrayapi", requires_grad=True)
        start = time.perf_counter()
        fn(x).backward(gy)
        best = min(best, time.perf_counter() - start)
    return round(best * 1e3, 2)


def main() -> None:
    rng = np.random.default_rng(0)
    x = (rng.standard_normal((256, 1024)) * 4).astype(np.float32)
    g = rng.standard_normal((256, 1024)).astype(np.float32)
    print(
        json.dumps(
            {
                "softmax provider": ampcore.get_backend("arrayapi").kernels.provider("softmax"),
                "softmax forward+backward ms": best_ms(lambda t: ampcore.nn.functional.softmax(t, dim=-1), x, g),
            }
        )
    )


if __name__ == "__main__":
    main()
