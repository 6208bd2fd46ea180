"""Cast policies: which dtype each op runs in inside an autocast region.

- :class:`Policy` - an immutable op -> :class:`Category` table (``LOWER``,
  ``FP32``, ``PROMOTE``, ``BANNED``; anything else ``UNLISTED``: runs in its
  inputs' types).
- :func:`builtin` - torch's documented tables (``"cuda"``, ``"cpu"``, ``"xpu"``).
- :func:`get` - the policy a device type uses: its backend's built-in table,
  then plugin adjustments (``ampcore_policy`` hook), then :func:`register`-ed
  user categories.  ``get("cpu").override(fp32=["gelu"])`` makes a variant to
  pass to ``autocast(..., policy=...)``.
- :class:`DtypePolicy` - a jmp-style "params=float32,compute=bfloat16,output=float32" recipe.
"""

from .builtin import BUILTIN_TABLES, builtin
from .dtype_policy import DtypePolicy
from .policy import BANNED_REASONS, Category, Entry, Policy, UnknownOpError
from .resolve import get, register, unregister

LOWER, FP32, PROMOTE, BANNED, UNLISTED = (
    Category.LOWER,
    Category.FP32,
    Category.PROMOTE,
    Category.BANNED,
    Category.UNLISTED,
)

__all__ = [
    "Category",
    "Entry",
    "Policy",
    "UnknownOpError",
    "DtypePolicy",
    "BANNED_REASONS",
    "BUILTIN_TABLES",
    "builtin",
    "get",
    "register",
    "unregister",
    "LOWER",
    "FP32",
    "PROMOTE",
    "BANNED",
    "UNLISTED",
]
