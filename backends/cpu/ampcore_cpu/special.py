"""A vectorised erf and erfc for NumPy (which has no erf ufunc).

Rational approximations and coefficients from S. L. Moshier's Cephes Math
Library (ndtr.c, release 2.2): erf(x) = x T(x^2) / U(x^2) for |x| <= 1, and
erf(x) = 1 - erfc(|x|) beyond, with erfc(a) = exp(-a^2) P(a) / Q(a) for
a < 8 and exp(-a^2) R(a) / S(a) above.  Relative error about 1e-16 in
float64, so float32/float16/bfloat16 results round correctly from it.
:func:`erfc` keeps that relative accuracy in the tail, where ``1 - erf`` would
cancel: exp(-a^2) is taken as exp(-h^2) exp(-(a - h)(a + h)) with ``h`` the
top 25 bits of ``a`` (h^2 exact), since exp(-fl(a^2)) is off by a^2 ulps.
"""

from __future__ import annotations

import numpy as np

_T = (
    9.60497373987051638749e0,
    9.00260197203842689217e1,
    2.23200534594684319226e3,
    7.00332514112805075473e3,
    5.55923013010394962768e4,
)
_U = (
    1.0,
    3.35617141647503099647e1,
    5.21357949780152679795e2,
    4.59432382970980127987e3,
    2.26290000613890934246e4,
    4.92673942608635921086e4,
)
_P = (
    2.46196981473530512524e-10,
    5.64189564831068821977e-1,
    7.46321056442269912687e0,
    4.86371970985681366614e1,
    1.96520832956077098242e2,
    5.26445194995477358631e2,
    9.34528527171957607540e2,
    1.02755188689515710272e3,
    5.57535335369399327526e2,
)
_Q = (
    1.0,
    1.32281951154744992508e1,
    8.67072140885989742329e1,
    3.54937778887819891062e2,
    9.75708501743205489753e2,
    1.82390916687909736289e3,
    2.24633760818710981792e3,
    1.65666309194161350182e3,
    5.57535340817727675546e2,
)
_R = (
    5.64189583547755073984e-1,
    1.27536670759978104416e0,
    5.01905042251180477414e0,
    6.16021097993053585195e0,
    7.40974269950448939160e0,
    2.97886665372100240670e0,
)
_S = (
    1.0,
    2.26052863220117276590e0,
    9.39603524938001434673e0,
    1.20489539808096656605e1,
    1.70814450747565897222e1,
    9.60896809063285878198e0,
    3.36907645100081516050e0,
)

# erfc(a) is below 1e-300 past this, so erf is exactly +-1 in float64.
_SATURATE = 27.0


def _horner(x: np.ndarray, coefficients: tuple[float, ...]) -> np.ndarray:
    """Polynomial with ``coefficients`` from the highest power down."""
    out = np.full_like(x, coefficients[0])
    for c in coefficients[1:]:
        out *= x
        out += c
    return out


def erf(x: np.ndarray) -> np.ndarray:
    """erf of every element, in float64 (NaN stays NaN, +-inf gives +-1)."""
    x = np.asarray(x, dtype=np.float64)
    out = np.empty_like(x)
    a = np.abs(x)
    inner = a <= 1.0
    xi = x[inner]
    z = xi * xi
    out[inner] = xi * _horner(z, _T) / _horner(z, _U)
    outer = ~inner  # NaN lands here and propagates
    ao = np.minimum(a[outer], _SATURATE)
    ratio = np.empty_like(ao)
    near = ao < 8.0
    an = ao[near]
    ratio[near] = _horner(an, _P) / _horner(an, _Q)
    far = ~near
    af = ao[far]
    ratio[far] = _horner(af, _R) / _horner(af, _S)
    with np.errstate(under="ignore"):
        erfc = np.exp(-ao * ao) * ratio
    out[outer] = np.copysign(1.0 - erfc, x[outer])
    return out


# erfc(a) is 0 in float64 (below the smallest subnormal) past this.
_ERFC_ZERO = 27.5


def _exp_minus_square(a: np.ndarray) -> np.ndarray:
    """exp(-a^2) for 0 <= a <= _ERFC_ZERO, to a few ulps: a = h + l with h^2 exact."""
    h = np.floor(a * 2.0**20) * 2.0**-20  # at most 25 significant bits for a < 32
    with np.errstate(under="ignore"):
        return np.exp(-h * h) * np.exp(-(a - h) * (a + h))


def erfc(x: np.ndarray) -> np.ndarray:
    """erfc of every element in float64, relatively accurate in the tail (NaN stays NaN, erfc(-inf) = 2,
    erfc(inf) = 0)."""
    x = np.asarray(x, dtype=np.float64)
    out = np.empty_like(x)
    a = np.abs(x)
    inner = a < 1.0
    out[inner] = 1.0 - erf(x[inner])  # erfc in (0.15, 1.85): nothing cancels
    outer = ~inner  # NaN lands here and propagates
    ao = np.minimum(a[outer], _ERFC_ZERO)
    ratio = np.empty_like(ao)
    near = ao < 8.0
    ratio[near] = _horner(ao[near], _P) / _horner(ao[near], _Q)
    ratio[~near] = _horner(ao[~near], _R) / _horner(ao[~near], _S)
    tail = _exp_minus_square(ao) * ratio
    out[outer] = np.where(x[outer] > 0, tail, 2.0 - tail)
    return out
