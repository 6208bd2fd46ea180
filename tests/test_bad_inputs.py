"""Bad input catalog: every bad call raises the documented exception type, its message names the bad value
(and, where there is one, the remedy), and the objects involved are left exactly as they were.

Three tables, walked by one parametrized test each (the parametrize id is the row's label):

* ``BAD`` -- 156 bad calls: unknown backend/device names, malformed device strings, wrong types and values
  for the public arguments of tensor creation, ``Tensor.to``, ``nn.Linear``, ``Module``, the optimizers,
  ``autocast`` and ``GradScaler``; non-tensors to ``scaler.scale()``; mismatched devices; dtypes a device
  cannot store; shape mismatches in matmul/add/cat/stack/linear; misbehaving backends and kernels.
* ``KEEPS`` -- 37 bad calls on live objects (tensors, modules, optimizers, scalers) that must change nothing:
  ``load_state_dict`` with a missing key / wrong shape / wrong dtype, rejected setters, a kernel that raises
  inside an optimizer step or a forward op.
* ``PLUGINS`` -- 3 broken plugins installed as real entry points and loaded by a fresh in-process
  ``Registry`` (plus one fresh-interpreter check through the public API, ``run_python``).

197 bad inputs are tried in all (156 + 37 + 3 + 1).  Rows that expose a bug in ampcore carry ``bug=`` (one
line) and run as ``xfail(strict=True)``.
"""

from __future__ import annotations

import re
import textwrap
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import ampcore
from ampcore import KernelError, PluginLoadError, UnknownBackendError, nn, optim
from ampcore.amp.state import thread_state
from ampcore.nn import StateDictError as ModuleStateDictError
from ampcore.nn import functional as F
from ampcore.optim import StateDictError as OptimStateDictError
from ampcore.plugins.registry import Registry
from ampcore.testing import FakeBackend


# --------------------------------------------------------------------------- fixtures and helpers
class QuietFake(FakeBackend):
    """A fake whose injected failure says only ``device lost``, as a real driver would: naming the op and the
    backend is then the core's job, not the backend's."""

    def _wrap(self, name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        inner = super()._wrap(name, fn)

        def kernel(*args: Any, **kwargs: Any) -> Any:
            try:
                return inner(*args, **kwargs)
            except RuntimeError as err:
                if "injected failure" in str(err):
                    raise RuntimeError("device lost") from None
                raise

        kernel.__name__ = name
        return kernel


@dataclass
class Env:
    """Fake devices for one row, registered on first use: ``fake`` stores everything, ``narrow`` cannot store
    float16/bfloat16, ``quiet`` fails (``arm``) with a message that names nothing."""

    register: Callable[..., FakeBackend]

    @cached_property
    def fake(self) -> str:
        return self.register().name

    @cached_property
    def narrow(self) -> str:
        return self.register(storable=["float64", "float32", "int64", "int32", "bool"]).name

    @cached_property
    def quiet_backend(self) -> QuietFake:
        return self.register(cls=QuietFake)

    @property
    def quiet(self) -> str:
        return self.quiet_backend.name

    def arm(self, kernel: str, nth: int = 1) -> None:
        """Make the ``nth`` call of ``kernel`` from now on fail on ``quiet``."""
        backend = self.quiet_backend
        backend.fail_on = (kernel, backend.calls.get(kernel, 0) + nth)

    def names(self) -> dict[str, str]:
        """The names of the fakes this row used, for the ``{fake}``-style placeholders of its needles."""
        used = {key: self.__dict__[key] for key in ("fake", "narrow") if key in self.__dict__}
        if "quiet_backend" in self.__dict__:
            used["quiet"] = self.quiet
        return used


@pytest.fixture
def env(register_fake, monkeypatch) -> Env:
    ampcore.manual_seed(0)
    monkeypatch.setattr(thread_state, "last_dtype", {})  # no bfloat16 autocast remembered by the scaler
    return Env(register_fake)


def check_message(err: BaseException, needles: tuple[str, ...], env: Env) -> None:
    message = str(err)
    for needle in needles:
        needle = needle.format(**env.names())
        assert needle in message, f"{needle!r} not in the message {message!r}"


def linear(*, device: str = "cpu", seed: int = 0) -> nn.Linear:
    ampcore.manual_seed(seed)
    return nn.Linear(3, 2, device=device)


def with_grads(model: nn.Module) -> nn.Module:
    for p in model.parameters():
        p.grad = ampcore.ones_like(p) * 0.5
    return model


def stepped_adam(model: nn.Module | None = None) -> optim.Adam:
    model = with_grads(model or linear())
    opt = optim.Adam(model.parameters(), lr=0.1)
    opt.step()
    return opt


def used_scaler(**kwargs: Any) -> ampcore.GradScaler:
    """A scaler after one clean iteration (its scale lives on the device)."""
    model = linear()
    opt = optim.SGD(model.parameters(), lr=0.1)
    scaler = ampcore.GradScaler("cpu", **kwargs)
    scaler.scale(model(ampcore.ones(4, 3)).sum()).backward()
    scaler.step(opt)
    scaler.update()
    return scaler


SCALER_STATE = {
    "scale": 1024.0,
    "growth_factor": 2.0,
    "backoff_factor": 0.5,
    "growth_interval": 10,
    "_growth_tracker": 3,
}


def scaler_state(**changes: Any) -> dict[str, Any]:
    out = {**SCALER_STATE, **changes}
    return {k: v for k, v in out.items() if v is not _DROP}


_DROP = object()


def optim_state(opt: optim.Optimizer, change: Callable[[dict], None]) -> dict[str, Any]:
    saved = opt.state_dict()
    saved = {
        "state": {k: dict(v) for k, v in saved["state"].items()},
        "param_groups": [dict(g) for g in saved["param_groups"]],
    }
    change(saved)
    return saved


def snapshot(obj: Any) -> Any:
    """A plain, comparable picture of ``obj`` (bit patterns for tensors)."""
    if isinstance(obj, ampcore.Tensor):
        data = obj.detach().to("cpu").numpy()
        return (
            "Tensor",
            obj.dtype.name,
            str(obj.device),
            tuple(obj.shape),
            obj.requires_grad,
            np.ascontiguousarray(data).tobytes(),
            None if obj.grad is None else snapshot(obj.grad),
        )
    if isinstance(obj, nn.Module):
        return (
            "Module",
            repr(obj),
            obj.training,
            [(name, snapshot(p)) for name, p in obj.state_dict(keep_vars=True).items()],
        )
    if isinstance(obj, optim.Optimizer):
        return ("Optimizer", repr(obj), snapshot(obj.state_dict()))
    if isinstance(obj, ampcore.GradScaler):
        return ("GradScaler", repr(obj), obj.is_enabled(), obj._scale is None, snapshot(obj.state_dict()))
    if isinstance(obj, dict):
        return {k: snapshot(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [snapshot(v) for v in obj]
    return obj


# --------------------------------------------------------------------------- table 1: bad calls
@dataclass(frozen=True)
class Bad:
    label: str
    call: Callable[[Env], Any]
    exc: type[BaseException]
    needles: tuple[str, ...]  # substrings of the message; {fake}, {narrow}, {quiet} are the fakes' names
    bug: str | None = None  # a known ampcore bug: the row is xfail(strict=True)


LIN = lambda: nn.Linear(2, 2).parameters()  # noqa: E731 - a row helper
GS = ampcore.GradScaler
F17 = "unknown dtype 'float17'"
KNOWN = "known dtypes are 'float64', 'float32', 'float16', 'bfloat16'"

BAD = [
    # -- unknown backend / device names ------------------------------------------------------------------
    Bad(
        "ones-unknown-backend",
        lambda e: ampcore.ones(1, device="opnecl"),
        UnknownBackendError,
        ("'opnecl'", "installed backends are", "'cpu'"),
    ),
    Bad(
        "tensor-unknown-backend",
        lambda e: ampcore.tensor([1.0], device="opnecl"),
        UnknownBackendError,
        ("'opnecl'", "'cpu'"),
    ),
    Bad("get_backend-unknown", lambda e: ampcore.get_backend("opnecl"), UnknownBackendError, ("'opnecl'", "'cpu'")),
    Bad(
        "set_default_device-unknown", lambda e: ampcore.set_default_device("opnecl"), UnknownBackendError, ("'opnecl'",)
    ),
    Bad("to-unknown-backend", lambda e: ampcore.ones(2).to("opnecl"), UnknownBackendError, ("'opnecl'", "'cpu'")),
    Bad("Linear-unknown-backend", lambda e: nn.Linear(2, 3, device="opnecl"), UnknownBackendError, ("'opnecl'",)),
    Bad("autocast-unknown-backend", lambda e: ampcore.autocast("opnecl"), UnknownBackendError, ("'opnecl'", "'cpu'")),
    Bad(
        "get_autocast_dtype-unknown", lambda e: ampcore.get_autocast_dtype("opnecl"), UnknownBackendError, ("'opnecl'",)
    ),
    Bad("GradScaler-unknown-backend", lambda e: GS("opnecl"), UnknownBackendError, ("'opnecl'", "'cpu'")),
    Bad("policy-get-unknown", lambda e: ampcore.policy.get("opnecl"), UnknownBackendError, ("'opnecl'",)),
    Bad(
        "device-index-out-of-range",
        lambda e: ampcore.zeros(2, device="cpu:7"),
        ValueError,
        ("'cpu:7' does not exist", "1 device(s)"),
    ),
    Bad("to-device-index-out-of-range", lambda e: ampcore.ones(2).to("cpu:3"), ValueError, ("'cpu:3'",)),
    Bad(
        "fake-device-index-out-of-range",
        lambda e: ampcore.ones(1, device=f"{e.fake}:1"),
        ValueError,
        ("'{fake}:1' does not exist",),
    ),
    # -- malformed device strings and wrong device types ---------------------------------------------------
    Bad(
        "device-malformed-index",
        lambda e: ampcore.device("cuda:x"),
        ValueError,
        ("malformed device 'cuda:x'", "'name:index'"),
    ),
    Bad("device-empty-index", lambda e: ampcore.zeros(2, device="cpu:"), ValueError, ("malformed device 'cpu:'",)),
    Bad("device-no-name", lambda e: ampcore.zeros(2, device=":0"), ValueError, ("malformed device ':0'",)),
    Bad("device-negative-index", lambda e: ampcore.zeros(2, device="cpu:-1"), ValueError, ("'cpu:-1'",)),
    Bad("device-space", lambda e: ampcore.zeros(2, device="cpu 0"), ValueError, ("'cpu 0'",)),
    Bad("device-empty-string", lambda e: ampcore.zeros(2, device=""), ValueError, ("malformed device ''",)),
    Bad("device-int", lambda e: ampcore.device(3), TypeError, ("got 3", "'cpu'")),
    Bad("device-list", lambda e: ampcore.zeros(2, device=["cpu"]), TypeError, ("['cpu']",)),
    Bad("tensor-device-int", lambda e: ampcore.tensor([1.0], device=5), TypeError, ("got 5",)),
    Bad("autocast-device-int", lambda e: ampcore.autocast(0), TypeError, ("device_type", "got 0")),
    Bad("autocast-device-with-index", lambda e: ampcore.autocast("cpu:0"), ValueError, ("'cpu:0'", "pass 'cpu'")),
    Bad("is_autocast_enabled-device-int", lambda e: ampcore.is_autocast_enabled(5), TypeError, ("got 5",)),
    Bad("GradScaler-device-int", lambda e: GS(0), TypeError, ("device", "got 0")),
    # -- dtypes ---------------------------------------------------------------------------------------
    Bad("tensor-dtype-unknown-name", lambda e: ampcore.tensor([1.0], dtype="float17"), ValueError, (F17, KNOWN)),
    Bad("tensor-dtype-int", lambda e: ampcore.tensor([1.0], dtype=3), TypeError, ("expected a dtype", "got 3")),
    Bad(
        "tensor-dtype-numpy-complex",
        lambda e: ampcore.tensor([1.0], dtype=np.complex64),
        ValueError,
        ("complex64", "no ampcore equivalent"),
    ),
    Bad(
        "zeros-dtype-unknown-name",
        lambda e: ampcore.zeros(2, dtype="half_precision"),
        ValueError,
        ("'half_precision'", KNOWN),
    ),
    Bad("randn-integer-dtype", lambda e: ampcore.randn(2, dtype="int64"), TypeError, ("floating dtype", "int64")),
    Bad("rand-bool-dtype", lambda e: ampcore.rand(2, dtype="bool"), TypeError, ("floating dtype", "bool")),
    Bad("to-dtype-unknown-name", lambda e: ampcore.ones(2).to(dtype="float17"), ValueError, (F17,)),
    Bad("to-int-argument", lambda e: ampcore.ones(2).to(3), TypeError, ("device, a dtype or a tensor", "got 3")),
    Bad("to-object-argument", lambda e: ampcore.ones(2).to(object()), TypeError, ("<object object",)),
    Bad("Linear-dtype-unknown", lambda e: nn.Linear(2, 3, dtype="float17"), ValueError, (F17,)),
    Bad("Linear-integer-dtype", lambda e: nn.Linear(2, 3, dtype="int64"), TypeError, ("int64", "requires_grad=False")),
    Bad(
        "Module.to-integer-dtype", lambda e: nn.Linear(2, 3).to(ampcore.int64), TypeError, ("floating dtypes", "int64")
    ),
    Bad("Module.to-int-argument", lambda e: nn.Linear(2, 3).to(5), TypeError, ("got 5",)),
    Bad("autocast-dtype-unknown", lambda e: ampcore.autocast("cpu", dtype="float17"), ValueError, (F17,)),
    Bad(
        "autocast-dtype-int64-strict",
        lambda e: ampcore.autocast("cpu", dtype="int64", strict=True),
        ValueError,
        ("float16 or bfloat16", "got int64"),
    ),
    Bad(
        "autocast-dtype-float32-strict",
        lambda e: ampcore.autocast("cpu", dtype="float32", strict=True),
        ValueError,
        ("float16 or bfloat16", "got float32"),
    ),
    Bad(
        "autocast-dtype-not-storable-strict",
        lambda e: ampcore.autocast(e.narrow, dtype="float16", strict=True),
        ValueError,
        ("'{narrow}'", "cannot store and compute float16"),
    ),
    Bad("GradScaler.for_dtype-unknown", lambda e: GS.for_dtype("float17"), ValueError, (F17,)),
    Bad("finfo-integer-dtype", lambda e: ampcore.finfo("int64"), TypeError, ("floating dtype", "'int64'")),
    Bad("promote_types-unknown", lambda e: ampcore.promote_types("float32", "float17"), ValueError, (F17,)),
    Bad(
        "requires_grad-on-int-tensor",
        lambda e: ampcore.tensor([1], requires_grad=True),
        TypeError,
        ("floating", "int64"),
    ),
    # -- dtype a device cannot store (register_fake(storable=...)) ----------------------------------------
    Bad(
        "zeros-float16-on-narrow-device",
        lambda e: ampcore.zeros(2, dtype="float16", device=e.narrow),
        TypeError,
        ("'{narrow}:0' cannot store float16", "it can store bool, float32, float64"),
    ),
    Bad(
        "tensor-float16-on-narrow-device",
        lambda e: ampcore.tensor([1.0], dtype="float16", device=e.narrow),
        TypeError,
        ("cannot store float16",),
    ),
    Bad(
        "to-bfloat16-on-narrow-device",
        lambda e: ampcore.ones(2, device=e.narrow).to("bfloat16"),
        TypeError,
        ("'{narrow}:0' cannot store bfloat16",),
    ),
    Bad(
        "Linear-float16-on-narrow-device",
        lambda e: nn.Linear(2, 2, dtype="float16", device=e.narrow),
        TypeError,
        ("cannot store float16",),
    ),
    # -- sizes -----------------------------------------------------------------------------------------
    Bad("zeros-negative-size", lambda e: ampcore.zeros(-1), ValueError, ("non-negative ints", "(-1,)")),
    Bad("zeros-float-size", lambda e: ampcore.zeros(2.5), ValueError, ("(2.5,)",)),
    Bad("zeros-str-size", lambda e: ampcore.zeros("3"), ValueError, ("('3',)",)),
    Bad("zeros-negative-in-tuple", lambda e: ampcore.zeros((2, -3)), ValueError, ("(2, -3)",)),
    Bad("randn-negative-size", lambda e: ampcore.randn(-2), ValueError, ("(-2,)",)),
    Bad("randn-bool-size", lambda e: ampcore.randn(True), ValueError, ("(True,)",)),
    Bad("randn-generator-int", lambda e: ampcore.randn(2, generator=5), TypeError, ("generator", "5")),
    Bad("manual_seed-str", lambda e: ampcore.manual_seed("x"), TypeError, ("seed must be an int", "'x'")),
    Bad("arange-zero-step", lambda e: ampcore.arange(0, 5, 0), ValueError, ("step must be non-zero",)),
    Bad("tensor-dict-data", lambda e: ampcore.tensor({"a": 1}), TypeError, ("dict", "nested lists of numbers")),
    Bad("tensor-str-data", lambda e: ampcore.tensor("abc"), TypeError, ("cannot make a tensor", "<U3")),
    Bad("from_numpy-list", lambda e: ampcore.from_numpy([1.0]), TypeError, ("numpy.ndarray", "list")),
    Bad(
        "requires_grad-str", lambda e: ampcore.tensor([1.0], requires_grad="yes"), TypeError, ("requires_grad", "'yes'")
    ),
    Bad("Linear-negative-in", lambda e: nn.Linear(-1, 2), ValueError, ("in_features", "non-negative int", "-1")),
    Bad("Linear-float-in", lambda e: nn.Linear(2.0, 2), ValueError, ("in_features", "2.0")),
    Bad("Linear-str-out", lambda e: nn.Linear(2, "3"), ValueError, ("out_features", "'3'")),
    Bad("Linear-bool-in", lambda e: nn.Linear(True, 3), ValueError, ("in_features", "True")),
    Bad("Module.train-str", lambda e: nn.Linear(2, 3).train("yes"), ValueError, ("bool", "'yes'")),
    Bad("Sequential-int-child", lambda e: nn.Sequential(5), TypeError, ("int is not a Module",)),
    # -- optimizers ------------------------------------------------------------------------------------
    Bad("SGD-negative-lr", lambda e: optim.SGD(LIN(), lr=-1), ValueError, ("invalid learning rate -1",)),
    Bad("SGD-str-lr", lambda e: optim.SGD(LIN(), lr="0.1"), ValueError, ("learning rate '0.1'",)),
    Bad("SGD-nan-lr", lambda e: optim.SGD(LIN(), lr=float("nan")), ValueError, ("learning rate nan",)),
    Bad("SGD-bool-lr", lambda e: optim.SGD(LIN(), lr=True), ValueError, ("learning rate True",)),
    Bad(
        "SGD-negative-momentum",
        lambda e: optim.SGD(LIN(), lr=0.1, momentum=-0.5),
        ValueError,
        ("momentum value -0.5", ">= 0"),
    ),
    Bad("SGD-str-momentum", lambda e: optim.SGD(LIN(), lr=0.1, momentum="0.9"), ValueError, ("momentum value '0.9'",)),
    Bad(
        "SGD-negative-weight_decay",
        lambda e: optim.SGD(LIN(), lr=0.1, weight_decay=-1e-4),
        ValueError,
        ("weight_decay value -0.0001",),
    ),
    Bad(
        "SGD-nesterov-without-momentum",
        lambda e: optim.SGD(LIN(), lr=0.1, nesterov=True),
        ValueError,
        ("Nesterov", "momentum=0.0"),
    ),
    Bad(
        "SGD-params-a-tensor",
        lambda e: optim.SGD(ampcore.ones(2, requires_grad=True), lr=0.1),
        TypeError,
        ("iterable of tensors", "Tensor"),
    ),
    Bad("SGD-params-empty", lambda e: optim.SGD([], lr=0.1), ValueError, ("empty parameter list",)),
    Bad("SGD-params-int", lambda e: optim.SGD(5, lr=0.1), TypeError, ("got int",)),
    Bad("SGD-params-list-of-ints", lambda e: optim.SGD([1, 2], lr=0.1), TypeError, ("only optimize Tensors", "int")),
    Bad(
        "SGD-params-int-tensor",
        lambda e: optim.SGD([ampcore.ones(2, dtype="int64")], lr=0.1),
        TypeError,
        ("floating", "int64"),
    ),
    Bad(
        "Adam-beta2-one",
        lambda e: optim.Adam(LIN(), betas=(0.9, 1.0)),
        ValueError,
        ("beta parameter at index 1 1.0", "< 1.0"),
    ),
    Bad("Adam-beta1-negative", lambda e: optim.Adam(LIN(), betas=(-0.1, 0.9)), ValueError, ("index 0 -0.1",)),
    Bad("Adam-betas-scalar", lambda e: optim.Adam(LIN(), betas=0.9), ValueError, ("invalid betas 0.9", "pair")),
    Bad(
        "Adam-betas-triple", lambda e: optim.Adam(LIN(), betas=(0.9, 0.9, 0.9)), ValueError, ("(0.9, 0.9, 0.9)", "pair")
    ),
    Bad("Adam-negative-eps", lambda e: optim.Adam(LIN(), eps=-1e-8), ValueError, ("epsilon value -1e-08",)),
    Bad(
        "Adam-str-weight_decay", lambda e: optim.Adam(LIN(), weight_decay="0"), ValueError, ("weight_decay value '0'",)
    ),
    Bad("AdamW-negative-lr", lambda e: optim.AdamW(LIN(), lr=-1e-3), ValueError, ("learning rate -0.001",)),
    # -- autocast arguments ------------------------------------------------------------------------------
    Bad(
        "autocast-enabled-str",
        lambda e: ampcore.autocast("cpu", enabled="yes"),
        TypeError,
        ("enabled must be True or False", "'yes'"),
    ),
    Bad(
        "autocast-cache_enabled-int",
        lambda e: ampcore.autocast("cpu", cache_enabled=1),
        TypeError,
        ("cache_enabled", "got 1"),
    ),
    Bad(
        "autocast-policy-str",
        lambda e: ampcore.autocast("cpu", policy="fp16"),
        TypeError,
        ("ampcore.policy.Policy", "'fp16'"),
    ),
    Bad("autocast-trace-str", lambda e: ampcore.autocast("cpu", trace="yes"), TypeError, ("trace", "'yes'")),
    # -- GradScaler construction -------------------------------------------------------------------------
    Bad("GradScaler-init_scale-zero", lambda e: GS("cpu", init_scale=0), ValueError, ("init_scale", "> 0", "got 0")),
    Bad("GradScaler-init_scale-negative", lambda e: GS("cpu", init_scale=-1.0), ValueError, ("got -1.0",)),
    Bad("GradScaler-init_scale-inf", lambda e: GS("cpu", init_scale=float("inf")), ValueError, ("finite", "got inf")),
    Bad("GradScaler-init_scale-nan", lambda e: GS("cpu", init_scale=float("nan")), ValueError, ("got nan",)),
    Bad("GradScaler-init_scale-str", lambda e: GS("cpu", init_scale="65536"), ValueError, ("got '65536'",)),
    Bad(
        "GradScaler-init_scale-beyond-float32",
        lambda e: GS("cpu", init_scale=1e39),
        ValueError,
        ("1e+39", "does not fit float32", "use a value between"),
    ),
    Bad(
        "GradScaler-growth_factor-one",
        lambda e: GS("cpu", growth_factor=1.0),
        ValueError,
        ("growth_factor", "greater than 1", "got 1.0"),
    ),
    Bad("GradScaler-growth_factor-half", lambda e: GS("cpu", growth_factor=0.5), ValueError, ("got 0.5",)),
    Bad("GradScaler-growth_factor-str", lambda e: GS("cpu", growth_factor="2"), ValueError, ("got '2'",)),
    Bad(
        "GradScaler-backoff_factor-one",
        lambda e: GS("cpu", backoff_factor=1.0),
        ValueError,
        ("backoff_factor", "between 0 and 1", "got 1.0"),
    ),
    Bad("GradScaler-backoff_factor-two", lambda e: GS("cpu", backoff_factor=2.0), ValueError, ("got 2.0",)),
    Bad("GradScaler-backoff_factor-zero", lambda e: GS("cpu", backoff_factor=0.0), ValueError, ("got 0.0",)),
    Bad("GradScaler-backoff_factor-negative", lambda e: GS("cpu", backoff_factor=-0.5), ValueError, ("got -0.5",)),
    Bad(
        "GradScaler-growth_interval-zero",
        lambda e: GS("cpu", growth_interval=0),
        ValueError,
        ("growth_interval", "positive integer", "got 0"),
    ),
    Bad("GradScaler-growth_interval-negative", lambda e: GS("cpu", growth_interval=-5), ValueError, ("got -5",)),
    Bad("GradScaler-growth_interval-float", lambda e: GS("cpu", growth_interval=2000.0), ValueError, ("got 2000.0",)),
    Bad("GradScaler-growth_interval-bool", lambda e: GS("cpu", growth_interval=True), ValueError, ("got True",)),
    Bad(
        "GradScaler-enabled-str",
        lambda e: GS("cpu", enabled="yes"),
        TypeError,
        ("enabled must be True or False", "'yes'"),
    ),
    Bad("GradScaler-enabled-int", lambda e: GS("cpu", enabled=1), TypeError, ("got 1",)),
    Bad(
        "GradScaler-min-above-max",
        lambda e: GS("cpu", min_scale=10.0, max_scale=1.0),
        ValueError,
        ("min_scale 10.0", "max_scale 1.0"),
    ),
    Bad(
        "GradScaler-init_scale-above-max",
        lambda e: GS("cpu", max_scale=1024.0),
        ValueError,
        ("init_scale 65536.0", "1024.0"),
    ),
    Bad(
        "GradScaler-stall_warning_after-zero",
        lambda e: GS("cpu", stall_warning_after=0),
        ValueError,
        ("stall_warning_after", "got 0"),
    ),
    # -- scaler.scale() and friends ------------------------------------------------------------------------
    Bad("scale-float", lambda e: GS("cpu").scale(1.0), TypeError, ("takes a Tensor", "got float")),
    Bad("scale-ndarray", lambda e: GS("cpu").scale(np.ones(2)), TypeError, ("got ndarray",)),
    Bad("scale-dict", lambda e: GS("cpu").scale({"loss": ampcore.ones(1)}), TypeError, ("got dict",)),
    Bad("scale-list-with-a-float", lambda e: GS("cpu").scale([ampcore.ones(1), 2.0]), TypeError, ("got float",)),
    Bad(
        "scale-int-tensor", lambda e: GS("cpu").scale(ampcore.ones(1, dtype="int64")), TypeError, ("floating", "int64")
    ),
    Bad(
        "scale-tensor-on-another-device",
        lambda e: GS("cpu").scale(ampcore.ones(1, device=e.fake)),
        ValueError,
        ("'cpu'", "'{fake}'", "GradScaler('{fake}')"),
    ),
    Bad(
        "unscale_-before-scale",
        lambda e: GS("cpu").unscale_(optim.SGD(LIN(), lr=0.1)),
        RuntimeError,
        ("unscale_() was called before scale()",),
    ),
    Bad("update-before-scale", lambda e: GS("cpu").update(), RuntimeError, ("update() was called before scale()",)),
    Bad("update-new_scale-str", lambda e: used_scaler().update("x"), ValueError, ("new_scale", "got 'x'")),
    Bad(
        "update-new_scale-int-tensor",
        lambda e: used_scaler().update(ampcore.ones(1, dtype="int64")),
        ValueError,
        ("1-element floating", "int64"),
    ),
    Bad("update-new_scale-two-elements", lambda e: used_scaler().update(ampcore.ones(2)), ValueError, ("shape (2,)",)),
    # -- mismatched devices -------------------------------------------------------------------------------
    Bad(
        "add-two-devices",
        lambda e: ampcore.ones(2) + ampcore.ones(2, device=e.fake),
        ValueError,
        ("different devices ('cpu' and '{fake}')", ".to(device)"),
    ),
    Bad(
        "matmul-two-devices",
        lambda e: ampcore.ones(2, 2) @ ampcore.ones(2, 2, device=e.fake),
        ValueError,
        ("'cpu' and '{fake}'",),
    ),
    Bad(
        "cat-two-devices",
        lambda e: ampcore.cat([ampcore.ones(2), ampcore.ones(2, device=e.fake)]),
        ValueError,
        ("'cpu' and '{fake}'",),
    ),
    Bad(
        "where-two-devices",
        lambda e: ampcore.where(ampcore.ones(2) > 0, ampcore.ones(2), ampcore.ones(2, device=e.fake)),
        ValueError,
        ("'{fake}'",),
    ),
    Bad(
        "Linear-input-on-another-device",
        lambda e: nn.Linear(3, 2)(ampcore.ones(4, 3, device=e.fake)),
        ValueError,
        ("'{fake}' and 'cpu'",),
    ),
    # -- shape mismatches ---------------------------------------------------------------------------------
    Bad(
        "matmul-inner-dims",
        lambda e: ampcore.ones(2, 3) @ ampcore.ones(2, 3),
        ValueError,
        ("(2, 3) and (2, 3)", "3 (last of the first) != 2"),
    ),
    Bad(
        "matmul-zero-dim",
        lambda e: ampcore.matmul(ampcore.ones(()), ampcore.ones(3)),
        ValueError,
        ("at least 1 dimension", "()"),
    ),
    Bad(
        "add-unbroadcastable",
        lambda e: ampcore.ones(2, 3) + ampcore.ones(4),
        ValueError,
        ("(2, 3) and (4,) cannot be broadcast",),
    ),
    Bad("add-str", lambda e: ampcore.ones(2) + "a", TypeError, ("'a'", "Tensor or a Python number")),
    Bad(
        "cat-shapes-differ",
        lambda e: ampcore.cat([ampcore.ones(2, 3), ampcore.ones(2, 4)]),
        ValueError,
        ("(2, 3) and (2, 4)", "dimension 0"),
    ),
    Bad("cat-nothing", lambda e: ampcore.cat([]), ValueError, ("at least one tensor",)),
    Bad(
        "cat-dim-out-of-range",
        lambda e: ampcore.cat([ampcore.ones(2), ampcore.ones(2)], dim=3),
        IndexError,
        ("dimension 3", "1 dimension(s)"),
    ),
    Bad("cat-a-list-among-tensors", lambda e: ampcore.cat([ampcore.ones(2), [1.0]]), TypeError, ("list",)),
    Bad(
        "stack-shapes-differ",
        lambda e: ampcore.stack([ampcore.ones(2), ampcore.ones(3)]),
        ValueError,
        ("(2,) and (3,)",),
    ),
    Bad("reshape-wrong-numel", lambda e: ampcore.ones(6).reshape(4, 2), ValueError, ("(4, 2)", "6 elements")),
    Bad("sum-dim-out-of-range", lambda e: ampcore.ones(2, 3).sum(dim=5), IndexError, ("dimension 5",)),
    Bad(
        "linear-input-features",
        lambda e: nn.Linear(3, 2)(ampcore.ones(4, 5)),
        ValueError,
        ("(4, 5)", "(2, 3)", "in_features"),
    ),
    Bad("F.linear-weight-str", lambda e: F.linear(ampcore.ones(2, 3), "w"), TypeError, ("'weight'", "str")),
    Bad(
        "embedding-index-out-of-range",
        lambda e: nn.Embedding(4, 2)(ampcore.tensor([5])),
        IndexError,
        ("index 5", "4 embeddings", "0..3"),
    ),
    Bad(
        "backward-non-scalar",
        lambda e: (ampcore.ones(2, requires_grad=True) * 2).backward(),
        RuntimeError,
        ("shape (2,)", "gradient=ones_like(output)"),
    ),
    Bad("item-two-elements", lambda e: ampcore.ones(2).item(), ValueError, ("one element", "(2,)")),
    # -- misbehaving backends and kernels -----------------------------------------------------------------
    Bad(
        "register_backend-not-a-backend",
        lambda e: ampcore.register_backend("notabackend"),
        TypeError,
        ("'notabackend'", "not an ampcore.Backend"),
    ),
    Bad(
        "register_backend-name-with-colon",
        lambda e: ampcore.register_backend(FakeBackend("a:b")),
        ValueError,
        ("'a:b'", "without ':'"),
    ),
    Bad(
        "register_backend-name-taken",
        lambda e: ampcore.register_backend(FakeBackend("cpu")),
        ValueError,
        ("'cpu'", "already taken"),
    ),
    Bad(
        "register_backend-missing-kernels",
        lambda e: ampcore.register_backend(FakeBackend("holes", missing=("exp",))),
        ampcore.MissingKernelsError,
        ("exp",),
    ),
    Bad(
        "kernel-raises-in-exp",
        lambda e: (e.arm("exp"), ampcore.ones(2, device=e.quiet).exp()),
        KernelError,
        ("op 'exp'", "backend '{quiet}'", "device lost"),
    ),
    Bad(
        "kernel-raises-in-matmul",
        lambda e: (ampcore.ones(2, 2, device=e.quiet), e.arm("matmul"))[0] @ ampcore.ones(2, 2, device=e.quiet),
        KernelError,
        ("op 'matmul'", "backend '{quiet}'"),
    ),
    Bad(
        "kernel-raises-in-sum",
        lambda e: (e.arm("sum"), ampcore.ones(3, device=e.quiet).sum()),
        KernelError,
        ("op 'sum'", "backend '{quiet}'"),
    ),
    Bad(
        "kernel-raises-in-backward",
        lambda e: _backward_with_failing_mul(e),
        KernelError,
        ("op 'mul'", "backend '{quiet}'", "device lost"),
    ),
]


def _backward_with_failing_mul(e: Env, x: ampcore.Tensor | None = None) -> None:
    x = ampcore.ones(2, device=e.quiet, requires_grad=True) if x is None else x
    y = (x * 3.0).sum()
    e.arm("mul")  # the next mul is the backward of x * 3.0
    y.backward()


def params(rows: list) -> list:
    return [
        pytest.param(row, id=row.label, marks=[pytest.mark.xfail(strict=True, reason=row.bug)] if row.bug else [])
        for row in rows
    ]


@pytest.mark.parametrize("row", params(BAD))
def test_bad_call_raises_its_type_naming_the_bad_value(row: Bad, env: Env) -> None:
    with pytest.raises(row.exc) as info:
        row.call(env)
    check_message(info.value, row.needles, env)


# --------------------------------------------------------------------------- table 2: bad calls that change nothing
@dataclass(frozen=True)
class Keeps:
    label: str
    make: Callable[[Env], dict[str, Any]]  # the live objects
    call: Callable[[dict[str, Any], Env], Any]  # the bad call on them
    exc: type[BaseException]
    needles: tuple[str, ...]
    bug: str | None = None


def _model_and_sd(change: Callable[[dict], None]) -> Callable[[Env], dict[str, Any]]:
    def make(e: Env) -> dict[str, Any]:
        model = linear(seed=1)
        saved = dict(linear(seed=2).state_dict())
        change(saved)
        return {"model": model, "saved": saved}

    return make


def _opt_and_sd(change: Callable[[dict], None]) -> Callable[[Env], dict[str, Any]]:
    def make(e: Env) -> dict[str, Any]:
        model = linear()
        opt = stepped_adam(model)
        other = stepped_adam(with_grads(linear(seed=3)))
        other.step()
        return {"model": model, "opt": opt, "saved": optim_state(other, change)}

    return make


def _fresh_and_used_scaler(e: Env) -> dict[str, Any]:
    return {"fresh": GS("cpu", init_scale=256.0), "used": used_scaler(growth_interval=7)}


def _load_both(bad: dict[str, Any]) -> Callable[[dict[str, Any], Env], None]:
    """Load ``bad`` into the fresh scaler (before its first scale()) and, if that raised, into the used one."""

    def call(o: dict[str, Any], e: Env) -> None:
        with pytest.raises(type(_first_error(bad))):
            o["fresh"].load_state_dict(bad)
        o["used"].load_state_dict(bad)

    return call


def _first_error(bad: dict[str, Any]) -> BaseException:
    try:
        GS("cpu").load_state_dict(bad)
    except Exception as err:  # noqa: BLE001 - we want whatever it raises
        return err
    raise AssertionError(f"GradScaler accepted {bad!r}")


def _sgd_on_quiet(e: Env) -> dict[str, Any]:
    model = with_grads(linear(device=e.quiet))
    return {"model": model, "opt": optim.SGD(model.parameters(), lr=0.1, momentum=0.9)}


def _bad_grad(kind: str) -> Callable[[Env], dict[str, Any]]:
    """Two parameters: the first (weight) has a good gradient, the second (bias) a bad one."""

    def make(e: Env) -> dict[str, Any]:
        model = with_grads(linear())
        if kind == "shape":
            model.bias.grad = ampcore.ones(5)
        elif kind == "device":
            model.bias.grad = ampcore.ones(2, device=e.fake)
        else:
            model.bias.grad = ampcore.ones(2, dtype="int64")
        return {"model": model, "opt": optim.SGD(model.parameters(), lr=0.1)}

    return make


KEEPS = [
    # -- tensors -----------------------------------------------------------------------------------------
    Keeps(
        "Tensor.to-unknown-backend",
        lambda e: {"t": ampcore.randn(3)},
        lambda o, e: o["t"].to("opnecl"),
        UnknownBackendError,
        ("'opnecl'",),
    ),
    Keeps(
        "Tensor.to-dtype-not-storable",
        lambda e: {"t": ampcore.randn(3, device=e.narrow)},
        lambda o, e: o["t"].to("float16"),
        TypeError,
        ("'{narrow}:0' cannot store float16",),
    ),
    Keeps(
        "matmul-shape-mismatch",
        lambda e: {"a": ampcore.randn(2, 3), "b": ampcore.randn(2, 3)},
        lambda o, e: o["a"] @ o["b"],
        ValueError,
        ("(2, 3) and (2, 3)",),
    ),
    Keeps(
        "kernel-raises-in-forward-op",
        lambda e: {"a": ampcore.randn(2, 2, device=e.quiet, requires_grad=True)},
        lambda o, e: (e.arm("matmul"), o["a"] @ o["a"]),
        KernelError,
        ("op 'matmul'", "backend '{quiet}'"),
    ),
    Keeps(
        "Linear-forward-wrong-features",
        lambda e: {"model": linear(), "x": ampcore.randn(4, 5)},
        lambda o, e: o["model"](o["x"]),
        ValueError,
        ("(4, 5)",),
    ),
    # -- nn.Module.load_state_dict ------------------------------------------------------------------------
    Keeps(
        "Module.load_state_dict-missing-key",
        _model_and_sd(lambda sd: sd.pop("bias")),
        lambda o, e: o["model"].load_state_dict(o["saved"]),
        ModuleStateDictError,
        ("missing key(s): 'bias'", "nothing was loaded"),
    ),
    Keeps(
        "Module.load_state_dict-unexpected-key",
        _model_and_sd(lambda sd: sd.update(extra=ampcore.ones(1))),
        lambda o, e: o["model"].load_state_dict(o["saved"]),
        ModuleStateDictError,
        ("unexpected key(s): 'extra'",),
    ),
    Keeps(
        "Module.load_state_dict-wrong-shape",
        _model_and_sd(lambda sd: sd.update(weight=ampcore.ones(3, 3))),
        lambda o, e: o["model"].load_state_dict(o["saved"]),
        ModuleStateDictError,
        ("'weight': shape (3, 3)", "(2, 3) in the module"),
    ),
    Keeps(
        "Module.load_state_dict-wrong-dtype",
        _model_and_sd(lambda sd: sd.update(bias=ampcore.ones(2, dtype="float16"))),
        lambda o, e: o["model"].load_state_dict(o["saved"]),
        ModuleStateDictError,
        ("'bias': dtype float16", "float32 in the module", ".to(dtype)"),
    ),
    Keeps(
        "Module.load_state_dict-not-a-tensor",
        _model_and_sd(lambda sd: sd.update(bias="zeros")),
        lambda o, e: o["model"].load_state_dict(o["saved"]),
        ModuleStateDictError,
        ("'bias': expected a Tensor",),
    ),
    Keeps(
        "Module.load_state_dict-nonstrict-wrong-shape",
        _model_and_sd(lambda sd: sd.update(bias=np.ones(5, dtype=np.float32))),
        lambda o, e: o["model"].load_state_dict(o["saved"], strict=False),
        ModuleStateDictError,
        ("'bias': shape (5,)",),
    ),
    Keeps(
        "Module.load_state_dict-a-list",
        lambda e: {"model": linear()},
        lambda o, e: o["model"].load_state_dict([1]),
        TypeError,
        ("mapping", "list"),
    ),
    # -- Optimizer.load_state_dict ------------------------------------------------------------------------
    Keeps(
        "Optimizer.load_state_dict-missing-key",
        _opt_and_sd(lambda sd: sd["state"][0].pop("exp_avg")),
        lambda o, e: o["opt"].load_state_dict(o["saved"]),
        OptimStateDictError,
        ("parameter id 0", "missing key(s) ['exp_avg']"),
    ),
    Keeps(
        "Optimizer.load_state_dict-wrong-shape",
        _opt_and_sd(lambda sd: sd["state"][1].update(exp_avg_sq=ampcore.ones(7))),
        lambda o, e: o["opt"].load_state_dict(o["saved"]),
        OptimStateDictError,
        ("'exp_avg_sq' of parameter id 1", "shape (7,)", "(2,)"),
    ),
    Keeps(
        "Optimizer.load_state_dict-integer-state",
        _opt_and_sd(lambda sd: sd["state"][0].update(exp_avg=ampcore.ones(2, 3, dtype="int64"))),
        lambda o, e: o["opt"].load_state_dict(o["saved"]),
        OptimStateDictError,
        ("'exp_avg'", "int64"),
    ),
    Keeps(
        "Optimizer.load_state_dict-negative-step",
        _opt_and_sd(lambda sd: sd["state"][0].update(step=-1)),
        lambda o, e: o["opt"].load_state_dict(o["saved"]),
        OptimStateDictError,
        ("'step'", "non-negative integer", "got -1"),
    ),
    Keeps(
        "Optimizer.load_state_dict-negative-lr",
        _opt_and_sd(lambda sd: sd["param_groups"][0].update(lr=-1.0)),
        lambda o, e: o["opt"].load_state_dict(o["saved"]),
        OptimStateDictError,
        ("learning rate -1.0",),
    ),
    Keeps(
        "Optimizer.load_state_dict-too-few-params",
        _opt_and_sd(lambda sd: sd["param_groups"][0].update(params=[0])),
        lambda o, e: o["opt"].load_state_dict(o["saved"]),
        OptimStateDictError,
        ("1 parameter(s) in the state dict but 2",),
    ),
    Keeps(
        "Optimizer.load_state_dict-no-state-entry",
        _opt_and_sd(lambda sd: sd.pop("state")),
        lambda o, e: o["opt"].load_state_dict(o["saved"]),
        OptimStateDictError,
        ("'state' and 'param_groups'",),
    ),
    # -- Optimizer.step with a bad gradient or a failing kernel: all parameters or none --------------------
    Keeps(
        "Optimizer.step-grad-wrong-shape",
        _bad_grad("shape"),
        lambda o, e: o["opt"].step(),
        ValueError,
        ("(5,)", "(2,)"),
    ),
    Keeps(
        "Optimizer.step-grad-on-another-device",
        _bad_grad("device"),
        lambda o, e: o["opt"].step(),
        ValueError,
        ("'{fake}'", "'cpu'"),
    ),
    Keeps("Optimizer.step-integer-grad", _bad_grad("int"), lambda o, e: o["opt"].step(), TypeError, ("int64",)),
    Keeps(
        "Optimizer.step-kernel-raises",
        _sgd_on_quiet,
        lambda o, e: (e.arm("sub", 2), o["opt"].step()),
        KernelError,
        ("'sub'", "backend '{quiet}'"),
    ),
    # -- GradScaler setters and load_state_dict -------------------------------------------------------------
    Keeps(
        "GradScaler.set_growth_factor-one",
        _fresh_and_used_scaler,
        lambda o, e: o["used"].set_growth_factor(1.0),
        ValueError,
        ("growth_factor", "got 1.0"),
    ),
    Keeps(
        "GradScaler.set_backoff_factor-one",
        _fresh_and_used_scaler,
        lambda o, e: o["used"].set_backoff_factor(1),
        ValueError,
        ("backoff_factor", "got 1"),
    ),
    Keeps(
        "GradScaler.set_growth_interval-zero",
        _fresh_and_used_scaler,
        lambda o, e: o["used"].set_growth_interval(0),
        ValueError,
        ("growth_interval", "got 0"),
    ),
    Keeps(
        "GradScaler.load_state_dict-missing-key",
        _fresh_and_used_scaler,
        _load_both(scaler_state(_growth_tracker=_DROP)),
        ValueError,
        ("lacks ['_growth_tracker']",),
    ),
    Keeps(
        "GradScaler.load_state_dict-growth_factor-one",
        _fresh_and_used_scaler,
        _load_both(scaler_state(growth_factor=1.0)),
        ValueError,
        ("growth_factor", "got 1.0"),
    ),
    Keeps(
        "GradScaler.load_state_dict-backoff-above-one",
        _fresh_and_used_scaler,
        _load_both(scaler_state(backoff_factor=1.5)),
        ValueError,
        ("backoff_factor", "got 1.5"),
    ),
    Keeps(
        "GradScaler.load_state_dict-tracker-out-of-range",
        _fresh_and_used_scaler,
        _load_both(scaler_state(_growth_tracker=10)),
        ValueError,
        ("_growth_tracker", "got 10"),
    ),
    Keeps(
        "GradScaler.load_state_dict-scale-str",
        _fresh_and_used_scaler,
        _load_both(scaler_state(scale="1024")),
        ValueError,
        ("scale", "got '1024'"),
    ),
    Keeps(
        "GradScaler.scale-non-tensor",
        _fresh_and_used_scaler,
        lambda o, e: o["used"].scale([ampcore.ones(1), "loss"]),
        TypeError,
        ("got str",),
    ),
    Keeps(
        "GradScaler.scale-tensor-on-another-device",
        lambda e: {**_fresh_and_used_scaler(e), "t": ampcore.ones(1, device=e.fake)},
        lambda o, e: o["used"].scale(o["t"]),
        ValueError,
        ("'{fake}'", "GradScaler('{fake}')"),
    ),
    Keeps(
        "GradScaler.update-negative-new_scale",
        _fresh_and_used_scaler,
        lambda o, e: o["used"].update(-1.0),
        ValueError,
        ("new_scale", "got -1.0"),
    ),
    Keeps(
        "GradScaler.update-new_scale-requiring-grad",
        _fresh_and_used_scaler,
        lambda o, e: o["used"].update(ampcore.ones(1, requires_grad=True)),
        ValueError,
        ("does not require grad", "requires_grad=True"),
    ),
    # -- a kernel raising at call: a KernelError naming op, kernel and backend, and nothing half-done -------
    Keeps(
        "Optimizer.step-kernel-raises-updates-no-parameter",
        _sgd_on_quiet,
        lambda o, e: (e.arm("sub", 2), o["opt"].step()),
        KernelError,
        ("op 'SGD.step'", "kernel 'sub'", "device lost"),
    ),
    Keeps(
        "backward-kernel-raises-leaves-no-grad",
        lambda e: {"x": ampcore.ones(2, device=e.quiet, requires_grad=True)},
        lambda o, e: _backward_with_failing_mul(e, o["x"]),
        KernelError,
        ("op 'mul' failed in its backward", "kernel 'mul'", "device lost"),
    ),
]


@pytest.mark.parametrize("row", params(KEEPS))
def test_bad_call_raises_and_changes_nothing(row: Keeps, env: Env) -> None:
    objects = row.make(env)
    before = snapshot(objects)
    with pytest.raises(row.exc) as info:
        row.call(objects, env)
    check_message(info.value, row.needles, env)
    assert snapshot(objects) == before


def test_after_a_rejected_load_the_scaler_still_trains_and_loads_a_good_state(env: Env) -> None:
    scaler = used_scaler(growth_interval=7)
    with pytest.raises(ValueError):
        scaler.load_state_dict(scaler_state(backoff_factor=1.0))
    scaler.load_state_dict(scaler_state())
    assert (scaler.get_scale(), scaler.get_growth_tracker(), scaler.get_growth_interval()) == (1024.0, 3, 10)


def test_after_a_failed_optimizer_kernel_the_next_step_applies_once(env: Env) -> None:
    objects = _sgd_on_quiet(env)
    model, opt = objects["model"], objects["opt"]
    before = [p.numpy().copy() for p in model.parameters()]
    env.arm("sub", 2)
    with pytest.raises(KernelError, match="kernel 'sub'"):
        opt.step()
    env.quiet_backend.fail_on = None
    opt.step()
    # First momentum-SGD step: buf = g = 0.5, p -= lr * buf -- applied exactly once, not twice or half.
    for p, b in zip(model.parameters(), before):
        np.testing.assert_allclose(p.numpy(), b - np.float32(0.05), rtol=0, atol=1e-7)
    assert all(
        st["momentum_buffer"].numpy().tolist() == np.full(st["momentum_buffer"].shape, 0.5).tolist()
        for st in opt.state.values()
    )


# --------------------------------------------------------------------------- table 3: broken plugins
BROKEN_AT_IMPORT = """
    raise ImportError("badplug needs libbad.so: pip install ampcore-badplug[driver]")
"""

BACKENDS_HOOK_RAISES = """
    from ampcore.plugins import hookimpl

    @hookimpl
    def ampcore_backends():
        raise RuntimeError("no driver for hookplug")
"""

KERNELS_HOOK_RAISES = """
    from ampcore.plugins import hookimpl

    @hookimpl
    def ampcore_kernels(backend):
        raise RuntimeError("kernplug cannot compile its kernels")
"""


def install_plugin(root: Path, module: str, source: str) -> None:
    """``module.py`` plus a dist-info declaring it in the ``ampcore.backends`` entry-point group (as test_plugins)."""
    (root / f"{module}.py").write_text(textwrap.dedent(source))
    info = root / f"ampcore_{module}-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: ampcore-{module}\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(f"[ampcore.backends]\n{module} = {module}\n")


@dataclass(frozen=True)
class Plugin:
    label: str
    module: str
    source: str
    where: str
    needles: tuple[str, ...]
    asked: Callable[[Registry], Any] = field(default=lambda reg: reg.ensure_loaded())


PLUGINS = [
    Plugin(
        "plugin-raises-at-import",
        "badplug",
        BROKEN_AT_IMPORT,
        "import",
        ("badplug", "ImportError", "libbad.so", "pip install ampcore-badplug[driver]"),
        asked=lambda reg: reg.get_backend("badplug"),
    ),
    Plugin(
        "plugin-backends-hook-raises",
        "hookplug",
        BACKENDS_HOOK_RAISES,
        "ampcore_backends",
        ("hookplug", "no driver for hookplug"),
    ),
    Plugin(
        "plugin-kernels-hook-raises",
        "kernplug",
        KERNELS_HOOK_RAISES,
        "ampcore_kernels",
        ("kernplug", "cannot compile its kernels"),
    ),
]


@pytest.mark.parametrize("row", [pytest.param(r, id=r.label) for r in PLUGINS])
def test_broken_plugin_is_recorded_then_raises_naming_itself_when_strict(row: Plugin, tmp_path, monkeypatch):
    install_plugin(tmp_path, row.module, row.source)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delenv("AMPCORE_STRICT_PLUGINS", raising=False)
    relaxed = Registry()
    relaxed.ensure_loaded()
    broken = [b for b in relaxed.broken if b.name == row.module]
    if row.where == "ampcore_kernels":  # the hook failed for each backend, and each record names its backend
        assert sorted(b.error.split("'")[1] for b in broken) == sorted(relaxed.records)
    else:
        assert len(broken) == 1
    assert all(b.where == row.where for b in broken)
    assert "cpu" in relaxed.records and relaxed.get_backend("cpu").name == "cpu"  # the others keep working
    if row.where == "import":
        with pytest.raises(PluginLoadError) as info:
            row.asked(relaxed)
        assert f"backend {row.module!r} is installed but broken (import)" in str(info.value)
        for needle in row.needles:
            assert needle in str(info.value)
    monkeypatch.setenv("AMPCORE_STRICT_PLUGINS", "1")
    strict = Registry()
    with pytest.raises(PluginLoadError) as info:
        strict.ensure_loaded()
    message = str(info.value)
    assert message.startswith(f"plugin {row.module!r} failed in {row.where}: ")
    assert "AMPCORE_STRICT_PLUGINS" in message
    for needle in row.needles:
        assert needle in message
    with pytest.raises(PluginLoadError, match=re.escape(message)):  # asked again: still blames the same plugin
        strict.ensure_loaded()


def test_plugin_raising_at_import_is_named_through_the_public_api_in_a_fresh_process(tmp_path, run_python):
    install_plugin(tmp_path, "badplug", BROKEN_AT_IMPORT)
    proc = run_python(
        textwrap.dedent("""
        import ampcore
        print(ampcore.ones(2, device="cpu").sum().item())
        try:
            ampcore.ones(1, device="badplug")
        except ampcore.PluginLoadError as err:
            print("PluginLoadError:", err)
    """),
        path=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr
    first, second = proc.stdout.strip().splitlines()
    assert first == "2.0"
    assert second.startswith("PluginLoadError: backend 'badplug' is installed but broken (import)")
    assert "libbad.so" in second and "pip install ampcore-badplug[driver]" in second


def test_the_tables_are_as_large_as_the_docstring_says():
    counts = re.search(r"(\d+) bad inputs are tried in all \((\d+) \+ (\d+) \+ (\d+) \+ (\d+)\)", __doc__)
    assert counts is not None
    total, bad, keeps, plugins, fresh = map(int, counts.groups())
    assert (bad, keeps, plugins, fresh) == (len(BAD), len(KEEPS), len(PLUGINS), 1)
    assert total == bad + keeps + plugins + fresh
    labels = [r.label for r in BAD + KEEPS + PLUGINS]
    assert len(labels) == len(set(labels)), "row labels must be unique (they are the test ids)"


@pytest.mark.parametrize(
    ("data", "where"),
    [
        ([[1, 2], [3]], r"data\[1\] has 1 element\(s\) but data\[0\] has 2 element\(s\) \(dimension 1\)"),
        ([[[1], [2]], [[3], [4, 5]]], r"data\[1\]\[1\] has 2 element\(s\) but data\[0\]\[0\] has 1"),
        ([[1, 2], 3], r"data\[1\] is a number but data\[0\] has 2 element\(s\)"),
    ],
)
def test_a_ragged_list_names_the_row_that_differs(data, where):
    with pytest.raises(ValueError, match=f"ampcore.tensor: {where}.*; every row along a dimension must have"):
        ampcore.tensor(data)
