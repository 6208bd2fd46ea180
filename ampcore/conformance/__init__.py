"""The shared conformance suite: what makes a backend "ampcore-conformant".

Run it on any installed backend::

    ampcore conformance --backend NAME [--json report.json]
    pytest --pyargs ampcore.conformance --ampcore-backend NAME

It is a pytest plugin (entry point ``pytest11``) whose checks each take a
``backend`` fixture (a :class:`BackendUnderTest`); every kernel and op is
compared with a float64 NumPy reference within the tolerance rules of
:mod:`ampcore.conformance.tolerance` (elementwise results by their ulps,
sums by the float32 accumulator's error bound, composites by
:func:`tolerance`), and the end of the run prints an op x dtype report.  ``docs/writing-a-backend.md`` walks a
backend author through it.
"""

from .gaps import KnownGap, KnownGapsError, load_known_gaps
from .subject import NOT_SUPPORTED, BackendUnderTest
from .tolerance import (
    EPS,
    assert_accumulated,
    assert_close,
    assert_elementwise,
    assert_same_nonfinite,
    tolerance,
)

__all__ = [
    "BackendUnderTest",
    "NOT_SUPPORTED",
    "EPS",
    "tolerance",
    "assert_close",
    "assert_elementwise",
    "assert_accumulated",
    "assert_same_nonfinite",
    "KnownGap",
    "KnownGapsError",
    "load_known_gaps",
]
