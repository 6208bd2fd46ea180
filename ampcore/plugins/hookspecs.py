"""Hook specifications of the ``ampcore`` pluggy project.

A plugin is any object or module with functions decorated by
``ampcore.plugins.hookimpl``.  Installed plugins are found through the
``ampcore.backends`` entry-point group and loaded one by one; a plugin that
fails is recorded and shown by ``ampcore info`` while the others keep working.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import pluggy

if TYPE_CHECKING:
    from ..backend import Backend

hookspec = pluggy.HookspecMarker("ampcore")
hookimpl = pluggy.HookimplMarker("ampcore")


@hookspec
def ampcore_backends() -> Sequence[Backend] | Backend | None:
    """Contribute backends.

    Called once, when the registry first loads plugins.  Return a Backend, a
    sequence of them, or None.  Every plugin's result is used; two backends
    with one name is an error reported against the later plugin.  The
    returned objects must implement every primitive kernel
    (``ampcore.kernels.PRIMITIVES``) or they are reported as broken, naming
    the missing kernels.
    """


@hookspec
def ampcore_kernels(backend: Backend) -> Mapping[str, Callable[..., Any]] | None:
    """Add or override kernels of an already-loaded backend.

    Called once per backend after all backends are loaded.  Return a mapping
    kernel name -> callable to install on ``backend`` (e.g. a tuned
    ``matmul`` or a fused ``softmax``), or None to leave it alone.  Every
    result is applied; the plugin's name is recorded as the kernel's provider
    (shown by ``ampcore info``).
    """


@hookspec
def ampcore_policy(device_type: str) -> Mapping[str, str] | None:
    """Adjust the cast policy autocast uses for ``device_type`` (a backend name).

    Called when ``ampcore.policy.get(device_type)`` builds the policy (it is
    cached and rebuilt when plugins or backends change).  Return a mapping op
    name -> category (``"lower"``, ``"fp32"``, ``"promote"``, ``"banned"``, or
    ``"unlisted"`` to take an op off the lists), layered over the built-in
    table the backend names (later plugins win), or None to leave this device
    type alone.  A hook that raises or names an unknown category is recorded
    as broken and skipped.
    """
