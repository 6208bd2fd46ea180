"""Cast policies: which dtype each op runs in inside an autocast region.

A :class:`Policy` is an immutable table op name -> :class:`Entry` (a
category and where the decision came from).  Policies are layered by
building new ones: ``builtin("cpu")`` -> the backend's plugin adjustments ->
the user's ``override(...)``; nothing is ever edited in place, so a policy an
autocast region runs with cannot change under it.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from types import MappingProxyType

from ..dispatch import is_registered, registered_ops
from ..names import close_matches, did_you_mean

__all__ = ["Category", "Entry", "Policy", "UnknownOpError", "BANNED_REASONS"]


class Category(str, enum.Enum):  # noqa: UP042 - StrEnum would change str() of a member to its value
    """What autocast does with an op's floating inputs."""

    LOWER = "lower"  # cast to the autocast dtype (float16 / bfloat16)
    FP32 = "fp32"  # cast to float32
    PROMOTE = "promote"  # cast to the widest floating input type
    BANNED = "banned"  # raise: unsafe to autocast (see the entry's reason)
    UNLISTED = "unlisted"  # not autocast: runs in its inputs' types

    @classmethod
    def parse(cls, value: Category | str) -> Category:
        """A Category from itself or its name (``"lower"``, ``"fp32"``, ...); ValueError listing the valid ones."""
        if isinstance(value, Category):
            return value
        if isinstance(value, str):
            try:
                return cls(value.strip().lower())
            except ValueError:
                pass
        valid = ", ".join(repr(c.value) for c in cls)
        hint = did_you_mean(value, [c.value for c in cls])
        raise ValueError(f"unknown cast-policy category {value!r}{hint}; valid categories are {valid}")


# Why an op is banned, for the error autocast raises.
BANNED_REASONS: dict[str, str] = {
    "binary_cross_entropy": (
        "binary_cross_entropy (and nn.BCELoss) is unsafe to autocast: its backward can produce gradients that "
        "float16 cannot represent. Use binary_cross_entropy_with_logits (or nn.BCEWithLogitsLoss), which fuses "
        "the sigmoid and is safe to autocast; or disable autocast for this call with "
        "autocast(device_type, enabled=False) and pass float32 inputs"
    ),
}


class UnknownOpError(KeyError):
    """The op is neither in the policy nor registered with the dispatcher."""

    def __str__(self) -> str:  # KeyError would quote the whole message
        return str(self.args[0])


@dataclass(frozen=True)
class Entry:
    """One op's decision: its category and which layer set it (e.g. ``"torch cpu list"``, ``"user"``)."""

    category: Category
    source: str


def _names(value: str | Iterable[str], argument: str) -> list[str]:
    """Op names from a list (or one name); TypeError for anything else."""
    items = [value] if isinstance(value, str) else value
    try:
        names = list(items)
    except TypeError:
        raise TypeError(f"{argument}= takes op names (a list of str), got {value!r}") from None
    for name in names:
        if not isinstance(name, str) or not name:
            raise TypeError(f"{argument}= takes op names (non-empty str), got {name!r}")
    return names


class Policy:
    """An immutable op -> category table with a name.

    ``decision(op)`` is total over the ops the dispatcher knows: an op in the
    table gets its entry, any other registered op is ``UNLISTED`` (runs in its
    inputs' types), and a name known to neither raises :class:`UnknownOpError`
    rather than being silently unlisted.
    """

    __slots__ = ("_name", "_entries")

    _name: str
    _entries: Mapping[str, Entry]

    def __init__(self, name: str, entries: Mapping[str, Entry]):
        if not isinstance(name, str) or not name:
            raise ValueError(f"a policy needs a non-empty name, got {name!r}")
        object.__setattr__(self, "_name", name)
        object.__setattr__(self, "_entries", MappingProxyType(dict(entries)))

    def __setattr__(self, key: str, value: object) -> None:
        raise AttributeError("a Policy is immutable; build a changed one with override() or layered()")

    @property
    def name(self) -> str:
        return self._name

    @property
    def entries(self) -> Mapping[str, Entry]:
        """The listed ops (read-only)."""
        return self._entries

    # --- lookups ---------------------------------------------------------
    def decision(self, op: str) -> Entry:
        entry = self._entries.get(op)
        if entry is not None:
            return entry
        if is_registered(op):
            return Entry(Category.UNLISTED, "unlisted")
        close = close_matches(op, [*self._entries, *registered_ops()])
        if close:
            raise UnknownOpError(
                f"op {op!r} is not in policy {self._name!r} and not registered with the dispatcher; "
                f"did you mean {' or '.join(map(repr, close))}? A new op is registered with @ampcore.op({op!r})"
            )
        raise UnknownOpError(
            f"op {op!r} is not in policy {self._name!r} and not registered with the dispatcher; "
            f"register it with @ampcore.op({op!r}) or give it a category with Policy.override()"
        )

    def category(self, op: str) -> Category:
        return self.decision(op).category

    def ops(self, category: Category | str) -> tuple[str, ...]:
        """The listed ops of ``category``, sorted."""
        wanted = Category.parse(category)
        return tuple(sorted(op for op, e in self._entries.items() if e.category is wanted))

    def __contains__(self, op: object) -> bool:
        return op in self._entries

    def as_dict(self) -> dict[str, str]:
        """op -> category name, JSON-friendly."""
        return {op: e.category.value for op, e in sorted(self._entries.items())}

    # --- building ----------------------------------------------------------
    def override(
        self,
        *,
        lower: str | Iterable[str] = (),
        fp32: str | Iterable[str] = (),
        promote: str | Iterable[str] = (),
        unlisted: str | Iterable[str] = (),
        banned: str | Iterable[str] = (),
        source: str = "user",
        name: str | None = None,
    ) -> Policy:
        """A new policy with these ops moved to these categories (``unlisted`` removes an op from the lists).

        ``ampcore.policy.get("cpu").override(fp32=["gelu"], lower=["my_op"])``.
        Raises ValueError if one op is given two categories.
        """
        layer: dict[str, Category] = {}
        for category, value, argument in (
            (Category.LOWER, lower, "lower"),
            (Category.FP32, fp32, "fp32"),
            (Category.PROMOTE, promote, "promote"),
            (Category.UNLISTED, unlisted, "unlisted"),
            (Category.BANNED, banned, "banned"),
        ):
            for op in _names(value, argument):
                if op in layer and layer[op] is not category:
                    raise ValueError(
                        f"op {op!r} given two categories in one override: {layer[op].value!r} and {category.value!r}"
                    )
                layer[op] = category
        return self.layered(layer, source, name=name)

    def layered(self, mapping: Mapping[str, Category | str], source: str, *, name: str | None = None) -> Policy:
        """A new policy with ``mapping`` (op -> category or its name) laid over this one."""
        if not isinstance(mapping, Mapping):
            raise TypeError(f"a policy layer must map op names to categories, got {type(mapping).__name__}")
        entries = dict(self._entries)
        for op, category in mapping.items():
            if not isinstance(op, str) or not op:
                raise TypeError(f"policy layer from {source}: op names must be non-empty str, got {op!r}")
            parsed = Category.parse(category)
            if parsed is Category.UNLISTED:
                entries.pop(op, None)
            else:
                entries[op] = Entry(parsed, source)
        return Policy(name or self._name, entries)

    # --- display -----------------------------------------------------------
    def describe(self, ops: Iterable[str] | None = None) -> str:
        """A plain-text table: op, category, source (the listed ops, or the ``ops`` given)."""
        names = sorted(self._entries) if ops is None else list(ops)
        rows = [(op, *self._describe_one(op)) for op in names]
        width = max([len("op")] + [len(r[0]) for r in rows])
        lines = [f"policy {self._name!r}", f"{'op'.ljust(width)}  {'category'.ljust(8)}  source"]
        lines += [f"{op.ljust(width)}  {cat.ljust(8)}  {src}" for op, cat, src in rows]
        return "\n".join(lines)

    def _describe_one(self, op: str) -> tuple[str, str]:
        try:
            e = self.decision(op)
        except UnknownOpError:
            return "unknown", "not registered"
        return e.category.value, e.source

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Policy) and dict(self._entries) == dict(other._entries)

    def __hash__(self) -> int:
        return hash(frozenset(self._entries.items()))

    def __repr__(self) -> str:
        counts = ", ".join(
            f"{c.value}={len(self.ops(c))}" for c in (Category.LOWER, Category.FP32, Category.PROMOTE, Category.BANNED)
        )
        return f"<Policy {self._name!r}: {counts}>"
