"""einsum: Einstein summation over labelled dimensions, as torch.einsum, by batched matrix products.

Each operand first loses what it alone carries: a label repeated within it becomes its diagonal, and a label no
other operand and not the output names is summed out.  Then the operands are contracted left to right, two at
a time, as one batched GEMM ``(batch, left, k) @ (batch, k, right)``: the labels both share and something
later needs are the batch, those they share and nothing later needs are ``k`` (float32 accumulation, one
rounding), the rest ride along.  ``...`` stands for the same broadcast dimensions in every operand.

Under autocast it runs in the lower precision: torch's CUDA autocast registers einsum as a lower-precision op
(autocast_mode.cpp; the docs' list omits it), and on the CPU torch runs it as bmm, which is one.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ...tensor_base import TensorBase
from ..declare import Example, Input, composite
from ..linalg import matmul
from ..reduction import sum  # noqa: A004 - torch's op name, the reduction
from ..shape import expand, permute, reshape
from .movement import diagonal

Labels = list[Any]  # a letter, or ("...", i) for the i-th dimension under the ellipsis


def _parse(equation: str, operands: list[Any]) -> tuple[list[Labels], Labels]:
    """The labels of each operand's dimensions and of the output (implicit: the labels seen once, sorted)."""
    text = equation.replace(" ", "")
    lhs, arrow, rhs = text.partition("->")
    terms = lhs.split(",")
    if len(terms) != len(operands):
        raise ValueError(f"einsum(): {equation!r} names {len(terms)} operands, {len(operands)} were given")
    width = 0
    labelled: list[Labels] = []
    for term, x in zip(terms, operands):
        labels = _term_labels(term, x.ndim, equation)
        width = max(width, _ellipsis_width(labels))
        labelled.append(labels)
    if arrow:
        out = _term_labels(rhs, None, equation, width)
    else:
        letters = [label for labels in labelled for label in labels if isinstance(label, str)]
        out = [("...", i) for i in range(width)] + sorted(c for c in set(letters) if letters.count(c) == 1)
    seen = {label for labels in labelled for label in labels}
    for label in out:
        if label not in seen:
            raise ValueError(f"einsum(): output label {label!r} of {equation!r} names no input dimension")
    if len(set(out)) != len(out):
        raise ValueError(f"einsum(): the output of {equation!r} repeats a label")
    return labelled, out


def _ellipsis_width(labels: Labels) -> int:
    return len([label for label in labels if not isinstance(label, str)])


def _term_labels(term: str, ndim: int | None, equation: str, width: int = 0) -> Labels:
    """One term's labels; its ellipsis covers ``ndim`` minus its letters (the output's: ``width``), right-aligned
    so the ellipsis dimensions of different operands broadcast like NumPy's."""
    head, dots, tail = term.partition("...")
    letters = head + tail
    if not all(c.isalpha() for c in letters) or "." in tail:
        raise ValueError(f"einsum(): {equation!r}: subscripts are letters and at most one '...' per operand")
    if ndim is None:
        n_dots = width if dots else 0
    else:
        n_dots = ndim - len(letters)
        if (n_dots != 0 and not dots) or n_dots < 0:
            raise ValueError(f"einsum(): {equation!r}: term {term!r} does not fit an operand of {ndim} dimensions")
    ellipsis: Labels = [("...", i) for i in range(n_dots)]
    return [*head, *ellipsis, *tail]


def _align_ellipsis(labelled: list[Labels]) -> list[Labels]:
    """Ellipsis dimensions numbered from the right, so (2, 3) and (3,) under '...' share the 3."""
    width = max((_ellipsis_width(labels) for labels in labelled), default=0)
    out = []
    for labels in labelled:
        n = _ellipsis_width(labels)
        out.append([label if isinstance(label, str) else ("...", width - n + label[1]) for label in labels])
    return out


def _own_reductions(x: Any, labels: Labels, needed: set[Any]) -> tuple[Any, Labels]:
    """Repeated labels become the diagonal; labels nothing else needs are summed."""
    labels = list(labels)
    while len(set(labels)) != len(labels):
        label = next(lab for lab in labels if labels.count(lab) > 1)
        i = labels.index(label)
        j = labels.index(label, i + 1)
        x = diagonal(x, 0, i, j)  # the diagonal becomes the last dimension
        labels = [lab for k, lab in enumerate(labels) if k not in (i, j)] + [label]
    drop = [i for i, label in enumerate(labels) if label not in needed]
    if drop:
        x = sum(x, tuple(drop))
        labels = [label for i, label in enumerate(labels) if i not in drop]
    return x, labels


def _sizes(pairs: list[tuple[Any, Labels]]) -> dict[Any, int]:
    sizes: dict[Any, int] = {}
    for x, labels in pairs:
        for n, label in zip(x.shape, labels):
            if sizes.get(label, 1) not in (1, n) and n != 1:
                raise ValueError(f"einsum(): dimension {label!r} has sizes {sizes[label]} and {n}")
            sizes[label] = max(sizes.get(label, 1), n)
    return sizes


def _arranged(x: Any, labels: Labels, order: Labels, sizes: dict[Any, int]) -> Any:
    """``x`` permuted to ``order`` (labels it lacks become size-1 dims) and broadcast to ``sizes``."""
    x = permute(x, [labels.index(label) for label in order if label in labels])
    present = [label for label in order if label in labels]
    shape = tuple(x.shape[present.index(label)] if label in labels else 1 for label in order)
    x = reshape(x, shape)
    target = tuple(sizes[label] for label in order)
    return expand(x, target) if shape != target else x


def _contract(a: Any, la: Labels, b: Any, lb: Labels, keep: set[Any]) -> tuple[Any, Labels]:
    sizes = _sizes([(a, la), (b, lb)])
    batch = [label for label in la if label in lb and label in keep]
    inner = [label for label in la if label in lb and label not in keep]
    left = [label for label in la if label not in lb]
    right = [label for label in lb if label not in la]
    n_batch = int(np.prod([sizes[label] for label in batch], dtype=np.int64))
    rows = int(np.prod([sizes[label] for label in left], dtype=np.int64))
    k = int(np.prod([sizes[label] for label in inner], dtype=np.int64))
    cols = int(np.prod([sizes[label] for label in right], dtype=np.int64))
    a3 = reshape(_arranged(a, la, batch + left + inner, sizes), (n_batch, rows, k))
    b3 = reshape(_arranged(b, lb, batch + inner + right, sizes), (n_batch, k, cols))
    out = reshape(matmul(a3, b3), tuple(sizes[label] for label in batch + left + right))
    return out, batch + left + right


@composite(
    "einsum",
    category="lower",
    signature="einsum(equation, *operands) -> Tensor",
    example=Example(
        (Input((2, 3, 4)), Input((2, 4, 5))),
        {"equation": "bij,bjk->bik"},
        rule="sum",
        n=4,
        n_grad=(5, 3),
        call=lambda op, a, b, equation: op(equation, a, b),
    ),
    reference=lambda a, b, equation: np.einsum(equation, a, b),
)
def einsum(equation: str, *operands: Any) -> Any:
    """torch.einsum(equation, *operands) (operands may also come as one list): the sum of products over the
    labels the output leaves out; implicit output (no ``->``) keeps the labels seen once, sorted.  ValueError
    names a malformed equation or mismatched sizes."""
    if len(operands) == 1 and isinstance(operands[0], (list, tuple)):
        operands = tuple(operands[0])
    if not isinstance(equation, str) or not operands or not all(isinstance(x, TensorBase) for x in operands):
        raise TypeError("einsum() takes an equation string and one or more tensors")
    labelled, out = _parse(equation, list(operands))
    labelled = _align_ellipsis(labelled)
    pairs = []
    for i, (x, labels) in enumerate(zip(operands, labelled)):
        others = {label for j, ls in enumerate(labelled) if j != i for label in ls}
        pairs.append(_own_reductions(x, labels, others | set(out)))
    result, labels = pairs[0]
    for i in range(1, len(pairs)):
        later = {label for _, ls in pairs[i + 1 :] for label in ls} | set(out)
        result, labels = _contract(result, labels, pairs[i][0], pairs[i][1], later)
    result, labels = _own_reductions(result, labels, set(out))
    sizes = _sizes([(result, labels)])
    sizes.update({label: 1 for label in out if label not in sizes})
    return _arranged(result, labels, out, sizes)
