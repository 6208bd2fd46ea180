"""Optimizer: parameter groups, per-parameter state, and torch's state-dict format.

State tensors (momentum buffers, Adam moments) are float32 for float32,
float16 and bfloat16 parameters (the update is computed in float32 and rounded
once into a low-precision parameter) and float64 for float64 parameters.
Step counts are Python ints.

Atomicity: :meth:`Optimizer.step` checks every gradient of every group before
it updates anything, then runs in three phases across all groups::

    finishers = [_update(group) for group in groups]  # out-of-place work: new arrays only
    commits = [finish() for finish in finishers]      # in-place fused kernels, last
    for commit in commits: commit()                   # rebind params, state, step counts

so an exception in any group's computation leaves every parameter and all
state as they were, bit for bit.  The one gap: an in-place fused kernel that
raises after another in-place call of the same step already wrote leaves that
earlier write in place (undoing it would need a copy of every array).  The
fused kernels validate all their inputs before writing anything, so only an
internal kernel error can cause this.

Arrays: a step rebinds each parameter's array (``p._data``).  A backend's fused
kernel may update in place, but only arrays this optimizer wrote itself: the
first time it meets an array (and after anyone rebinds the parameter, e.g.
``load_state_dict``, ``copy_``, ``Module.to``) it steps a private copy, so a
tensor that shares the parameter's old array is never changed behind its back.
"""

from __future__ import annotations

import math
import weakref
from collections import abc, defaultdict
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from .. import dtypes as dt
from ..autograd import enable_grad, no_grad, zero_grads
from ..creation import zeros
from ..dispatch import guarded_kernels
from ..hooks import CAPTURE
from ..syncs import pending_flag, run_deferred_checks
from ..tensor import Tensor

__all__ = ["Optimizer", "StateDictError", "check_foreach_fused", "state_dtype"]

ParamsT = Iterable[Tensor] | Iterable[dict[str, Any]]


class StateDictError(ValueError):
    """An optimizer state dict does not fit this optimizer; nothing was loaded."""


def state_dtype(param: Tensor) -> dt.DType:
    """The dtype of optimizer state for ``param``: float64 for float64, else float32."""
    return dt.float64 if param.dtype == dt.float64 else dt.float32


def check_hyper(name: str, value: Any, low: float = 0.0, high: float | None = None, high_open: bool = False) -> None:
    """ValueError naming ``name`` and ``value`` unless ``low <= value`` (``< high`` or ``<= high``)."""
    ok = isinstance(value, (int, float)) and not isinstance(value, bool) and not math.isnan(value) and value >= low
    if ok and high is not None:
        ok = value < high if high_open else value <= high
    if not ok:
        bound = "" if high is None else (f" and < {high}" if high_open else f" and <= {high}")
        raise ValueError(f"invalid {name} {value!r}: must be a number >= {low}{bound}")


class _ArrayRef:
    """Remembers an array without keeping it alive where the array type allows weak references."""

    __slots__ = ("_get",)

    def __init__(self, array: Any) -> None:
        try:
            self._get: Callable[[], Any] = weakref.ref(array)
        except TypeError:
            self._get = lambda: array

    def __call__(self) -> Any:
        return self._get()


class Optimizer:
    """Base class: ``param_groups`` (list of dicts with ``"params"`` and hyper-parameters),
    ``state`` (parameter -> dict), ``zero_grad``, ``step`` and the state-dict round trip.

    Subclasses set ``_state_spec(group)`` (state key -> ``"tensor"``,
    ``"optional_tensor"`` or ``"step"``), ``_validate_group(group)`` and
    ``_update(group, params)`` (see its docstring for the two-phase contract).
    """

    def __init__(self, params: ParamsT, defaults: dict[str, Any]) -> None:
        if isinstance(params, (Tensor, dict)) or not isinstance(params, abc.Iterable):
            raise TypeError(f"params should be an iterable of tensors or of dicts, got {type(params).__name__}")
        self.defaults = dict(defaults)
        self.state: defaultdict[Tensor, dict[str, Any]] = defaultdict(dict)
        self.param_groups: list[dict[str, Any]] = []
        self._owned: dict[Tensor, _ArrayRef] = {}
        self._skip: dict[Any, Tensor] | None = None  # per device, while a GradScaler's fused step runs
        # Tensors or dicts; a list of tensors becomes one group below.
        groups: list[Any] = list(params)
        if not groups:
            raise ValueError("optimizer got an empty parameter list")
        if not isinstance(groups[0], dict):
            groups = [{"params": groups}]
        for group in groups:
            self.add_param_group(group)

    # ------------------------------------------------------------------ groups
    def add_param_group(self, param_group: dict[str, Any]) -> None:
        """Add a group: its ``"params"`` plus hyper-parameters (missing ones from the defaults).

        TypeError for non-leaf or non-floating tensors or a set of params;
        ValueError for bad hyper-parameters or a parameter already in a group.
        """
        if not isinstance(param_group, dict):
            raise TypeError(f"a parameter group must be a dict, got {type(param_group).__name__}")
        params = param_group.get("params")
        if isinstance(params, Tensor):
            params = [params]
        elif isinstance(params, set):
            raise TypeError(
                "parameter groups need an ordered collection of tensors; a set's order changes "
                "between runs, so use a list"
            )
        elif params is None:
            raise ValueError("a parameter group needs a 'params' entry")
        params = list(params)
        for p in params:
            if not isinstance(p, Tensor):
                raise TypeError(f"optimizers can only optimize Tensors, got {type(p).__name__}")
            if not p.is_leaf:
                raise ValueError(f"optimizers can only optimize leaf tensors; this one was computed by {p.grad_fn!r}")
            if not p.dtype.is_floating_point:
                raise TypeError(f"optimizers can only optimize floating tensors, got {p.dtype.name}")
        if len({id(p) for p in params}) != len(params):
            raise ValueError("a parameter group contains the same parameter more than once")
        group = {**self.defaults, **param_group, "params": params}
        self._validate_group(group)
        existing = {id(p) for g in self.param_groups for p in g["params"]}
        if any(id(p) in existing for p in params):
            raise ValueError("some parameters appear in more than one parameter group")
        self.param_groups.append(group)

    def _validate_group(self, group: dict[str, Any]) -> None:
        """ValueError naming the first bad hyper-parameter of ``group``."""

    def _state_spec(self, group: dict[str, Any]) -> dict[str, str]:
        """State key -> "tensor" | "optional_tensor" | "step" for parameters of ``group``."""
        return {}

    def _update(self, group: dict[str, Any], params: list[Tensor]) -> Callable[[], Callable[[], None]]:
        """Stage one group's step without changing anything visible; return ``finish``.

        ``_update`` runs every out-of-place computation of the group.
        ``finish()`` runs after every group's ``_update`` succeeded; it makes
        the in-place kernel calls (if any) and returns ``commit``.  ``commit()``
        runs after every group's ``finish`` succeeded and only rebinds arrays
        and state (it must not raise).
        """
        raise NotImplementedError(f"{type(self).__name__} does not implement _update")

    # ------------------------------------------------------------------ stepping
    def zero_grad(self, set_to_none: bool = True) -> None:
        """Reset the gradients of every parameter: to None (default) or to zeros."""
        zero_grads((p for group in self.param_groups for p in group["params"]), set_to_none)

    def step(self, closure: Callable[[], Any] | None = None) -> Any:
        """One update of every parameter that has a gradient (others are skipped).

        ``closure`` (optional) re-evaluates the model and returns the loss; it
        runs with gradients enabled before the update and its result is
        returned.  ValueError if a gradient's shape or device does not match
        its parameter; nothing is changed then.  Input checks still queued on
        the device (:mod:`ampcore.syncs`) are read first, so a batch that
        failed one (a class index out of range) raises here and updates nothing.
        """
        loss = None
        if closure is not None:
            with enable_grad():
                loss = closure()
        found_inf: dict[Any, Tensor | None] | None = getattr(self, "found_inf", None)
        if found_inf is None and CAPTURE.active and self._captures_amp_step:
            # A compiled step (ampcore.compile): a queued check skips the update on the device, as under a
            # GradScaler's fused path, instead of a host read (it raises at the next read all the same).
            found_inf = dict.fromkeys(p.device for group in self.param_groups for p in group["params"])
        if found_inf is None:
            run_deferred_checks()
            self._skip = None
        else:  # a GradScaler's fused path: skip on the device where inf/NaN was found or a queued check failed
            self._skip = {d: _skip_flag(f, pending_flag(d), d) for d, f in found_inf.items()}
        plan = [(group, [p for p in group["params"] if p.grad is not None]) for group in self.param_groups]
        for _, params in plan:
            for p in params:
                _check_grad(p)
        try:
            with no_grad():
                finishers = [self._update(group, params) for group, params in plan if params]
                commits = [finish() for finish in finishers]
                for commit in commits:
                    commit()
        finally:
            self._skip = None
        return loss

    @property
    def _captures_amp_step(self) -> bool:
        """Whether a compiled step (ampcore.compile) can take this optimizer's step on the device: step counts
        there and the update skipped there (no host read).  False here; Adam and SGD say True."""
        return False

    def _private(self, p: Tensor) -> Any:
        """``p``'s array if this optimizer wrote it last step, else a copy (so an in-place kernel
        never writes through an array another tensor shares).  ``p`` itself is not rebound."""
        ref = self._owned.get(p)
        if ref is None or ref() is not p._data:
            return guarded_kernels(p._backend, type(self).__name__ + ".step").cast(p._data, p.dtype)  # a new array
        return p._data

    def _mark_owned(self, p: Tensor) -> None:
        self._owned[p] = _ArrayRef(p._data)

    def _new_state_tensor(self, p: Tensor) -> Tensor:
        return zeros(*p.shape, dtype=state_dtype(p), device=p.device)

    # ------------------------------------------------------------------ state dict
    def state_dict(self) -> dict[str, Any]:
        """torch's format: ``{"state": {index: {...}}, "param_groups": [{..., "params": [index, ...]}]}``.

        Parameters are numbered in group order; state tensors are copies.
        """
        index: dict[int, int] = {}
        groups = []
        for group in self.param_groups:
            ids = [index.setdefault(id(p), len(index)) for p in group["params"]]
            groups.append({**{k: v for k, v in group.items() if k != "params"}, "params": ids})
        state = {
            index[id(p)]: {k: _copy_value(v) for k, v in st.items()}
            for p, st in self.state.items()
            if id(p) in index and st
        }
        return {"state": state, "param_groups": groups}

    def load_state_dict(self, state_dict: Mapping[str, Any]) -> None:
        """Load a :meth:`state_dict` (from this optimizer type with the same groups and sizes).

        Checks the number of groups and of parameters per group, the
        hyper-parameters, every state key and every state tensor's shape and
        (floating) dtype before changing anything; :class:`StateDictError` says what is wrong.
        State tensors are copied and converted to the state dtype on each
        parameter's device; the saved hyper-parameters replace the current ones.
        """
        if not isinstance(state_dict, Mapping) or "state" not in state_dict or "param_groups" not in state_dict:
            raise StateDictError("an optimizer state dict needs 'state' and 'param_groups' entries")
        saved_groups = list(state_dict["param_groups"])
        if len(saved_groups) != len(self.param_groups):
            raise StateDictError(
                f"the state dict has {len(saved_groups)} parameter group(s), "
                f"this optimizer has {len(self.param_groups)}"
            )
        id_map: dict[Any, tuple[Tensor, dict[str, Any]]] = {}
        new_groups = []
        for i, (saved, group) in enumerate(zip(saved_groups, self.param_groups)):
            ids = list(saved.get("params", []))
            if len(ids) != len(group["params"]):
                raise StateDictError(
                    f"parameter group {i} has {len(ids)} parameter(s) in the state dict "
                    f"but {len(group['params'])} in this optimizer"
                )
            merged = {**group, **{k: v for k, v in saved.items() if k != "params"}, "params": group["params"]}
            try:
                self._validate_group(merged)
            except ValueError as err:
                raise StateDictError(f"parameter group {i} of the state dict: {err}") from err
            new_groups.append(merged)
            for pid, p in zip(ids, group["params"]):
                if pid in id_map:
                    raise StateDictError(f"parameter id {pid!r} appears more than once in the state dict")
                id_map[pid] = (p, merged)
        new_state: defaultdict[Tensor, dict[str, Any]] = defaultdict(dict)
        with no_grad():
            for pid, st in state_dict["state"].items():
                if pid not in id_map:
                    raise StateDictError(
                        f"the state dict has state for parameter id {pid!r}, which is in none of its parameter groups"
                    )
                p, group = id_map[pid]
                if st:  # an empty entry is a parameter that has not been stepped yet
                    new_state[p] = self._load_param_state(pid, p, st, self._state_spec(group))
        self.param_groups[:] = new_groups
        self.state = new_state

    def _load_param_state(self, pid: Any, p: Tensor, saved: Mapping[str, Any], spec: dict[str, str]) -> dict:
        missing = [k for k, kind in spec.items() if k not in saved and kind != "optional_tensor"]
        unexpected = [k for k in saved if k not in spec]
        if missing or unexpected:
            raise StateDictError(
                f"state of parameter id {pid!r}: missing key(s) {missing}, unexpected key(s) "
                f"{unexpected}; was it saved by another optimizer type or with other options?"
            )
        out: dict[str, Any] = {}
        for key, value in saved.items():
            if spec[key] == "step":
                out[key] = _as_step(pid, key, value)
            elif value is None and spec[key] == "optional_tensor":
                continue
            elif not isinstance(value, Tensor):
                raise StateDictError(
                    f"state {key!r} of parameter id {pid!r} must be a Tensor, got {type(value).__name__}"
                )
            elif value.shape != p.shape:
                raise StateDictError(
                    f"state {key!r} of parameter id {pid!r} has shape {value.shape}, "
                    f"but the parameter has shape {p.shape}"
                )
            elif not value.dtype.is_floating_point:
                raise StateDictError(
                    f"state {key!r} of parameter id {pid!r} has dtype {value.dtype.name}; optimizer "
                    f"state is floating point (any float dtype is converted to "
                    f"{state_dtype(p).name})"
                )
            else:
                moved = value.detach().to(device=p.device, dtype=state_dtype(p))
                out[key] = moved.clone() if moved._data is value._data else moved
        return out

    def __repr__(self) -> str:
        lines = [f"{type(self).__name__} ("]
        for i, group in enumerate(self.param_groups):
            lines.append(f"Parameter Group {i}")
            lines.extend(f"    {k}: {v}" for k, v in sorted(group.items()) if k != "params")
        return "\n".join(lines + [")"])


def _skip_flag(found_inf: Tensor | None, checks: Any, device: Any) -> Tensor:
    """found_inf (1-element float32; zeros where there is none), plus the failed-check flag when input checks
    are queued, on the device."""
    if found_inf is None:
        flag = zeros(1, dtype=dt.float32, device=device)
    else:
        flag = found_inf.detach().reshape(1).to(dtype=dt.float32)
    return flag if checks is None else flag + checks.to(device=flag.device, dtype=dt.float32).reshape(1)


def check_foreach_fused(name: str, foreach: Any, fused: Any) -> None:
    """torch's rules for the ``foreach`` and ``fused`` options: None, True or False, and not both True."""
    for option, value in (("foreach", foreach), ("fused", fused)):
        if value is not None and not isinstance(value, bool):
            raise TypeError(f"{name}: {option} must be None, True or False, got {value!r}")
    if foreach and fused:
        raise RuntimeError(f"{name}: `fused` and `foreach` cannot be `True` together; pass one of them")


def grad_data(p: Tensor) -> Any:
    """``p.grad``'s array, for ``_update``, which ``step`` hands only parameters that have a gradient."""
    g = p.grad
    assert g is not None, "step passes _update only parameters with a gradient"
    return g._data


def _check_grad(p: Tensor) -> None:
    g = p.grad
    if not isinstance(g, Tensor):
        raise TypeError(f"a parameter's .grad must be a Tensor or None, got {type(g).__name__}")
    if g.shape != p.shape:
        raise ValueError(f"gradient of shape {g.shape} does not match its parameter of shape {p.shape}")
    if g.device != p.device:
        raise ValueError(
            f"gradient on {str(g.device)!r} but its parameter on {str(p.device)!r}; move them to one device"
        )
    if not g.dtype.is_floating_point:
        raise TypeError(f"gradients must be floating, got {g.dtype.name}")


def _copy_value(value: Any) -> Any:
    if isinstance(value, Tensor):
        with no_grad():
            return value.detach().clone()
    return value


def _as_step(pid: Any, key: str, value: Any) -> int:
    raw = value.item() if isinstance(value, Tensor) else value
    if (
        isinstance(raw, bool)
        or not isinstance(raw, (int, float))
        or not math.isfinite(raw)
        or raw < 0
        or raw != int(raw)
    ):
        raise StateDictError(f"state {key!r} of parameter id {pid!r} must be a non-negative integer, got {value!r}")
    return int(raw)
