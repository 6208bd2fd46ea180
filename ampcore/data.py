"""The small real data set ``ampcore train`` learns, and a seeded train/test split.

``digits.csv.gz`` is the UCI optical-recognition digits set as scikit-learn
ships it (see ``ampcore/data/NOTICE.md``): 1797 rows of 64 pixel counts 0..16
(an 8x8 image, row by row) followed by the label 0..9.
"""

from __future__ import annotations

import gzip
from importlib import resources

import numpy as np

__all__ = ["load_digits", "train_test_split"]

_PIXELS = 64
_MAX_COUNT = 16.0


def load_digits() -> tuple[np.ndarray, np.ndarray]:
    """The digits images as float32 ``(1797, 64)`` in [0, 1] and their int64 labels ``(1797,)``."""
    raw = resources.files("ampcore").joinpath("data", "digits.csv.gz").read_bytes()
    table = np.loadtxt(gzip.decompress(raw).decode("ascii").splitlines(), delimiter=",", dtype=np.int64)
    x = (table[:, :_PIXELS] / _MAX_COUNT).astype(np.float32)
    y = table[:, _PIXELS].astype(np.int64)
    return x, y


def train_test_split(
    x: np.ndarray, y: np.ndarray, test_fraction: float = 0.2, seed: int = 0, stratify: bool = True
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Shuffle with ``seed`` and split into ``(x_train, y_train, x_test, y_test)``.

    With ``stratify`` each label gets ``round(test_fraction * count)`` test rows,
    so both parts keep the label proportions.  Raises ValueError for a fraction
    outside (0, 1) or arrays of different lengths.
    """
    if not 0.0 < test_fraction < 1.0:
        raise ValueError(f"test_fraction must be between 0 and 1 (exclusive), got {test_fraction!r}")
    if len(x) != len(y):
        raise ValueError(f"x and y must have the same length, got {len(x)} and {len(y)}")
    rng = np.random.default_rng(seed)
    if stratify:
        test_parts = []
        for label in np.unique(y):
            rows = rng.permutation(np.flatnonzero(y == label))
            test_parts.append(rows[: int(round(test_fraction * len(rows)))])
        test = np.sort(np.concatenate(test_parts))
    else:
        test = np.sort(rng.permutation(len(y))[: int(round(test_fraction * len(y)))])
    mask = np.zeros(len(y), dtype=bool)
    mask[test] = True
    train = rng.permutation(np.flatnonzero(~mask))
    test = rng.permutation(test)
    return x[train], y[train], x[test], y[test]
