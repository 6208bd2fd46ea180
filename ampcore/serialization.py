"""``ampcore.save`` / ``ampcore.load``: checkpoints as safetensors files, torch.save's and torch.load's interface.

One file holds one object, in the safetensors format (the field's standard:
a JSON header, then raw little-endian tensor bytes; no code runs on load)::

    tensors        every Tensor in ``obj``, named by its path ("model.fc.weight",
                   "optimizer.state.0.exp_avg"); bytes exactly as stored on the
                   device (bfloat16 as BF16, float16 as F16), so they round-trip bit for bit
    __metadata__   {"format": "ampcore", "ampcore.version": "1", "ampcore.structure": <JSON>}

The structure is the object's tree in JSON: dicts (any hashable keys, order
kept; OrderedDict noted), lists, tuples, sets, None, bools, ints, floats (inf
and NaN too), complex numbers, strings, bytes, ``ampcore.dtype`` and
``ampcore.device`` values, and tensor references (name, dtype, device, requires_grad).  A model's
``state_dict()`` saved alone is a flat safetensors file whose tensor names are
its keys, so ``safetensors.torch.load_file`` reads it as a torch state dict.

Anything else (a user class, a namedtuple, a function) is pickled into the
structure; its tensors still go into the safetensors part.  ``load`` rebuilds
such objects only with ``weights_only=False``, the explicit opt-in for files
you trust: with the default ``weights_only=True`` (torch >= 2.6) loading never
runs code, and a pickled object raises :class:`WeightsOnlyUnpicklingError`
naming its type.
"""

from __future__ import annotations

import base64
import contextlib
import io
import json
import math
import os
import pickle
import struct
from collections import OrderedDict
from collections.abc import Callable, Iterator, Mapping
from typing import IO, Any

import ml_dtypes
import numpy as np
import safetensors
import safetensors.numpy

from . import dtypes as dt
from .autograd import no_grad
from .backend import BackendUnavailableError
from .creation import tensor as _tensor
from .device import Device, parse_device
from .plugins import UnknownBackendError
from .tensor import Tensor

__all__ = [
    "FileLike",
    "MapLocation",
    "WeightsOnlyUnpicklingError",
    "CheckpointCorruptError",
    "add_safe_globals",
    "clear_safe_globals",
    "get_safe_globals",
    "safe_globals",
    "load",
    "load_safetensors",
    "save",
    "save_safetensors",
]

FileLike = str | os.PathLike | IO[bytes]
MapLocation = None | str | Device | Mapping[str, Any] | Callable[[Tensor, str], Any]

_FORMAT = "ampcore"
_VERSION = "1"
# safetensors dtype tag -> NumPy dtype (safetensors.numpy.load has no BF16; ml_dtypes gives it exactly).
_ST_DTYPES: dict[str, np.dtype] = {
    "F64": np.dtype(np.float64),
    "F32": np.dtype(np.float32),
    "F16": np.dtype(np.float16),
    "BF16": np.dtype(ml_dtypes.bfloat16),
    "I64": np.dtype(np.int64),
    "I32": np.dtype(np.int32),
    "I16": np.dtype(np.int16),
    "I8": np.dtype(np.int8),
    "U8": np.dtype(np.uint8),
    "BOOL": np.dtype(np.bool_),
}
_ALLOWED = (
    "tensors, dicts, lists, tuples, sets, None, bools, ints, floats, complex numbers, strings, bytes, dtypes "
    "and devices"
)


class WeightsOnlyUnpicklingError(pickle.UnpicklingError):
    """``load(weights_only=True)`` met an object outside the allow-list; ``type_name`` names it."""

    def __init__(self, type_name: str) -> None:
        self.type_name = type_name
        super().__init__(
            f"weights_only load refused an object of type {type_name!r}: only {_ALLOWED} load without running "
            "code. If you trust the file's source, load it with ampcore.load(f, weights_only=False), or allow "
            "the type with ampcore.serialization.add_safe_globals([...])"
        )


class CheckpointCorruptError(pickle.UnpicklingError):
    """The file is a checkpoint cut short or damaged (a copy or a save that did not finish); ``why`` says how."""

    def __init__(self, source: str, why: str) -> None:
        self.why = why
        super().__init__(
            f"{source} is truncated or corrupt: {why}; save it again (ampcore.save) or load an intact copy"
        )


# ---------------------------------------------------------------------------------------------------------- save
class _Encoder:
    """Walks an object: tensors to ``self.arrays`` (by path name), the rest to a JSON-able tree."""

    def __init__(self, flat: bool) -> None:
        self.arrays: dict[str, np.ndarray] = {}
        self._names: dict[int, str] = {}
        self._keep: list[Tensor] = []  # keeps ids unique while encoding
        self._flat = flat  # a flat str -> Tensor dict: one tensor per key, even when two keys share one

    def encode(self, obj: Any, path: str) -> Any:
        if obj is None or isinstance(obj, (bool, str)):
            return obj
        if isinstance(obj, int):
            return int(obj)
        if isinstance(obj, float):
            return float(obj) if math.isfinite(obj) else {"$": "float", "v": repr(float(obj))}
        if isinstance(obj, complex):
            return {"$": "complex", "v": [self.encode(obj.real, path), self.encode(obj.imag, path)]}
        if isinstance(obj, Tensor):
            return self._tensor(obj, path)
        if isinstance(obj, dt.DType):
            return {"$": "dtype", "v": obj.name}
        if isinstance(obj, Device):
            return {"$": "device", "v": str(obj)}
        if isinstance(obj, (bytes, bytearray)):
            kind = "bytes" if isinstance(obj, bytes) else "bytearray"
            return {"$": kind, "v": base64.b64encode(bytes(obj)).decode("ascii")}
        if type(obj) in (set, frozenset):
            return {"$": type(obj).__name__, "v": [self.encode(v, path) for v in obj]}
        if type(obj) is list:
            return [self.encode(v, f"{path}.{i}" if path else str(i)) for i, v in enumerate(obj)]
        if type(obj) is tuple:
            return {"$": "tuple", "v": [self.encode(v, f"{path}.{i}" if path else str(i)) for i, v in enumerate(obj)]}
        if type(obj) in (dict, OrderedDict):
            items = [[self.encode(k, path), self.encode(v, f"{path}.{k}" if path else str(k))] for k, v in obj.items()]
            return {"$": "odict" if type(obj) is OrderedDict else "dict", "v": items}
        return self._pickled(obj, path)

    def _tensor(self, t: Tensor, path: str) -> dict[str, Any]:
        name = None if self._flat else self._names.get(id(t))
        if name is None:
            name = self._fresh_name(path)
            with no_grad():
                self.arrays[name] = np.asarray(t.detach().numpy(), order="C")
            self._names[id(t)] = name
            self._keep.append(t)
        return {"$": "tensor", "name": name, "dtype": t.dtype.name, "device": str(t.device), "grad": t.requires_grad}

    def _fresh_name(self, path: str) -> str:
        base = path or "tensor"
        name, n = base, 1
        while name in self.arrays or name == "__metadata__":
            name, n = f"{base}#{n}", n + 1
        return name

    def _pickled(self, obj: Any, path: str) -> dict[str, Any]:
        buffer = io.BytesIO()
        pickler = pickle.Pickler(buffer, protocol=pickle.HIGHEST_PROTOCOL)
        count = iter(range(1 << 62))

        def persistent_id(value: Any) -> Any:
            if isinstance(value, Tensor):
                return json.dumps(self._tensor(value, f"{path}.#{next(count)}" if path else f"#{next(count)}"))
            return None

        pickler.persistent_id = persistent_id  # type: ignore[method-assign]
        pickler.dump(obj)
        cls = type(obj)
        return {
            "$": "pickle",
            "type": f"{cls.__module__}.{cls.__qualname__}",
            "v": base64.b64encode(buffer.getvalue()).decode("ascii"),
        }


def _is_flat_state_dict(obj: Any) -> bool:
    return isinstance(obj, Mapping) and all(isinstance(k, str) and isinstance(v, Tensor) for k, v in obj.items())


def save(obj: Any, f: FileLike) -> None:
    """Save ``obj`` (a checkpoint: nested dicts, lists and tuples of tensors, numbers, strings, None)
    to ``f``, a path or a binary file opened for writing, as a safetensors file (torch.save).

    Tensors are stored with their exact bytes, dtype, device and
    ``requires_grad``; a tensor that appears twice is stored once and loads
    as one tensor.  A model's ``state_dict()`` saved alone is a plain safetensors
    state dict (``safetensors.torch.load_file`` reads it).  Objects of other
    types are pickled and then load only with ``weights_only=False``.
    """
    flat = _is_flat_state_dict(obj)
    enc = _Encoder(flat)
    structure = enc.encode(obj, "")
    metadata = {"format": _FORMAT, "ampcore.version": _VERSION, "ampcore.structure": json.dumps(structure)}
    data = safetensors.numpy.save(enc.arrays, metadata=metadata)
    _write(f, data)


def save_safetensors(
    state_dict: Mapping[str, Tensor], path: FileLike, metadata: Mapping[str, str] | None = None
) -> None:
    """Write a flat ``name -> Tensor`` dict (``model.state_dict()``) as a plain safetensors file, the way
    ``safetensors.torch.save_file`` does (metadata ``{"format": "pt"}`` unless ``metadata`` is given).

    TypeError naming the first key that is not a string or value that is not a Tensor.
    """
    if not isinstance(state_dict, Mapping):
        raise TypeError(f"save_safetensors needs a mapping of name -> Tensor, got {type(state_dict).__name__}")
    arrays = {}
    for key, value in state_dict.items():
        if not isinstance(key, str) or not isinstance(value, Tensor):
            raise TypeError(
                f"save_safetensors needs str keys and Tensor values; entry {key!r} is "
                f"{type(key).__name__} -> {type(value).__name__} (use ampcore.save for nested checkpoints)"
            )
        with no_grad():
            arrays[key] = np.asarray(value.detach().numpy(), order="C")
    _write(path, safetensors.numpy.save(arrays, metadata=dict(metadata) if metadata is not None else {"format": "pt"}))


def _write(f: FileLike, data: bytes) -> None:
    if isinstance(f, (str, os.PathLike)):
        with open(f, "wb") as out:
            out.write(data)
    elif hasattr(f, "write"):
        f.write(data)
    else:
        raise TypeError(f"f must be a path or a binary file opened for writing, got {type(f).__name__}")


# ---------------------------------------------------------------------------------------------------------- load
def _read(f: FileLike) -> bytes:
    if isinstance(f, (str, os.PathLike)):
        with open(f, "rb") as src:
            return src.read()
    if hasattr(f, "read"):
        data = f.read()
        if not isinstance(data, (bytes, bytearray)):
            raise TypeError("f must be opened in binary mode ('rb')")
        return bytes(data)
    raise TypeError(f"f must be a path or a binary file opened for reading, got {type(f).__name__}")


def _source(f: FileLike) -> str:
    return f"checkpoint {os.fspath(f)!r}" if isinstance(f, (str, os.PathLike)) else "the checkpoint"


def _damage(data: bytes) -> str | None:
    """How ``data`` falls short of a safetensors file it starts like (or is empty); None when it is not one.

    A pickle (protocol 2 and later) starts with 0x80 and is left to the pickle path.
    """
    if not data:
        return "the file is empty"
    if data[:1] == b"\x80":
        return None
    if len(data) < 9:  # a cut header's length field has NUL bytes; a tiny text pickle does not
        return f"it has {len(data)} bytes, less than a safetensors header" if b"\x00" in data else None
    (n,) = struct.unpack("<Q", data[:8])
    if data[8:9] == b"{" and n > len(data) - 8:
        return f"its header announces {n} bytes of JSON, but only {len(data) - 8} bytes follow"
    return None


def _header_metadata(data: bytes) -> dict[str, str] | None:
    """The ``__metadata__`` of a safetensors file (its documented header: u64 length, JSON); None if ``data``
    is not one."""
    if len(data) < 8:
        return None
    (n,) = struct.unpack("<Q", data[:8])
    if n > len(data) - 8:
        return None
    try:
        header = json.loads(data[8 : 8 + n])
    except (UnicodeDecodeError, ValueError):
        return None
    if not isinstance(header, dict):
        return None
    meta = header.get("__metadata__") or {}
    return meta if isinstance(meta, dict) else {}


def _arrays(data: bytes, source: str = "the checkpoint") -> dict[str, np.ndarray]:
    out = {}
    try:
        entries = safetensors.deserialize(data)
    except safetensors.SafetensorError as err:  # the header parsed, so the tensor data is what is damaged
        raise CheckpointCorruptError(source, f"its tensor data does not match its header ({err})") from err
    for name, info in entries:
        np_dtype = _ST_DTYPES.get(info["dtype"])
        if np_dtype is None:
            raise ValueError(
                f"tensor {name!r} has safetensors dtype {info['dtype']!r}, which ampcore cannot hold; "
                f"it holds {sorted(_ST_DTYPES)}"
            )
        out[name] = np.reshape(np.frombuffer(bytes(info["data"]), dtype=np_dtype), tuple(info["shape"]))
    return out


class _Placer:
    """Puts loaded arrays on their device, as ``map_location`` says."""

    def __init__(self, map_location: MapLocation) -> None:
        if not (
            map_location is None
            or isinstance(map_location, (str, Device, Mapping))
            or (callable(map_location) and not isinstance(map_location, type))
        ):
            raise TypeError(
                "map_location must be None, a device ('cpu', 'opencl:0', ampcore.device(...)), a dict "
                f"of saved device -> device, or a callable(tensor, location), got {map_location!r}"
            )
        self._map = map_location

    def place(self, array: np.ndarray, dtype: dt.DType, saved: str, requires_grad: bool) -> Tensor:
        m = self._map
        if m is not None and not isinstance(m, (str, Device, Mapping)):
            out = m(self._make(array, dtype, "cpu", saved), saved)
            out = out if out is not None else self._make(array, dtype, saved, saved)
            if not isinstance(out, Tensor):
                raise TypeError(f"map_location callable returned {type(out).__name__}, expected a Tensor or None")
        else:
            target: Any = saved
            if isinstance(m, (str, Device)):
                target = m
            elif isinstance(m, Mapping):
                target = m.get(saved, next((v for k, v in m.items() if str(k) == saved), saved))
            out = self._make(array, dtype, target, saved)
        return out.requires_grad_(True) if requires_grad and not out.requires_grad else out

    @staticmethod
    def _make(array: np.ndarray, dtype: dt.DType, target: Any, saved: str) -> Tensor:
        try:
            return _tensor(array, dtype=dtype, device=target)
        except (BackendUnavailableError, UnknownBackendError) as err:
            raise RuntimeError(
                f"a tensor was saved on {saved!r} and would load on {str(target)!r}, which is not usable here "
                f"({err}); pass map_location='cpu' (or a dict such as {{{saved!r}: 'cpu'}}) to load it elsewhere"
            ) from err


class _Decoder:
    def __init__(self, arrays: dict[str, np.ndarray], placer: _Placer, weights_only: bool) -> None:
        self._arrays = arrays
        self._placer = placer
        self._weights_only = weights_only
        self._loaded: dict[str, Tensor] = {}

    def decode(self, node: Any) -> Any:
        if isinstance(node, list):
            return [self.decode(v) for v in node]
        if not isinstance(node, dict):
            return node
        kind = node.get("$")
        if kind == "tensor":
            return self._tensor(node)
        if kind in ("dict", "odict"):
            out: dict[Any, Any] = OrderedDict() if kind == "odict" else {}
            for k, v in node["v"]:
                out[_hashable(self.decode(k))] = self.decode(v)
            return out
        if kind == "tuple":
            return tuple(self.decode(v) for v in node["v"])
        if kind == "float":
            return float(node["v"])
        if kind == "complex":
            return complex(self.decode(node["v"][0]), self.decode(node["v"][1]))
        if kind in ("bytes", "bytearray"):
            raw = base64.b64decode(node["v"])
            return raw if kind == "bytes" else bytearray(raw)
        if kind in ("set", "frozenset"):
            items = [_hashable(self.decode(v)) for v in node["v"]]
            return set(items) if kind == "set" else frozenset(items)
        if kind == "dtype":
            return dt.as_dtype(node["v"])
        if kind == "device":
            return parse_device(node["v"])
        if kind == "pickle":
            return self._unpickle(node)
        raise ValueError(f"not an ampcore checkpoint: unknown node kind {kind!r} in its structure")

    def _tensor(self, node: Mapping[str, Any]) -> Tensor:
        name = node["name"]
        if name not in self._loaded:
            if name not in self._arrays:
                raise ValueError(f"the checkpoint's structure names tensor {name!r}, which the file does not hold")
            dtype = dt.as_dtype(node["dtype"])
            array = self._arrays[name]
            if array.dtype != dtype.numpy:
                raise ValueError(f"tensor {name!r} is stored as {array.dtype} but recorded as {dtype.name}")
            self._loaded[name] = self._placer.place(array, dtype, node["device"], bool(node.get("grad")))
        return self._loaded[name]

    def _unpickle(self, node: Mapping[str, Any]) -> Any:
        if self._weights_only:
            if str(node.get("type")) not in _allowed_names():
                raise WeightsOnlyUnpicklingError(str(node.get("type")))
            unpickler: pickle.Unpickler = _AllowListUnpickler(io.BytesIO(base64.b64decode(node["v"])))
        else:
            unpickler = pickle.Unpickler(io.BytesIO(base64.b64decode(node["v"])))
        unpickler.persistent_load = lambda pid: self._tensor(json.loads(pid))  # type: ignore[method-assign]
        return unpickler.load()


# ------------------------------------------------------------------------------------------------- safe globals
_SAFE_GLOBALS: list[Any] = []


def _qualified(obj: Any) -> str:
    return f"{obj.__module__}.{obj.__qualname__}"


def _allowed_names() -> dict[str, Any]:
    return {_qualified(obj): obj for obj in _SAFE_GLOBALS}


class _AllowListUnpickler(pickle.Unpickler):
    """Unpickles only the classes and functions :func:`add_safe_globals` allowed (torch's weights_only rule)."""

    def find_class(self, module: str, name: str) -> Any:
        found = _allowed_names().get(f"{module}.{name}")
        if found is None:
            raise WeightsOnlyUnpicklingError(f"{module}.{name}")
        return found


def add_safe_globals(safe_globals: list[Any]) -> None:
    """Allow these classes (or functions) in ``load(weights_only=True)``: an object pickled at save time whose
    type, and every global its pickle names, is allowed loads without ``weights_only=False``, as in torch."""
    for obj in safe_globals:
        if not hasattr(obj, "__module__") or not hasattr(obj, "__qualname__"):
            raise TypeError(f"safe globals are classes or functions, got {obj!r}")
        if obj not in _SAFE_GLOBALS:
            _SAFE_GLOBALS.append(obj)


def get_safe_globals() -> list[Any]:
    """The classes and functions :func:`add_safe_globals` allowed."""
    return list(_SAFE_GLOBALS)


def clear_safe_globals() -> None:
    """Forget every allowed global."""
    _SAFE_GLOBALS.clear()


@contextlib.contextmanager
def safe_globals(safe_globals: list[Any]) -> Iterator[None]:
    """``with ampcore.serialization.safe_globals([MyConfig]): ampcore.load(f)``: allowed inside the block only."""
    before = list(_SAFE_GLOBALS)
    add_safe_globals(safe_globals)
    try:
        yield
    finally:
        _SAFE_GLOBALS[:] = before


def _hashable(key: Any) -> Any:
    if isinstance(key, list):
        return tuple(_hashable(k) for k in key)
    return key


def load(f: FileLike, map_location: MapLocation = None, weights_only: bool = True) -> Any:
    """Load what :func:`save` wrote (torch.load), or any safetensors file (a ``name -> Tensor`` dict).

    ``map_location``: None puts each tensor back on the device it was saved
    from; a device (``"cpu"``, ``"opencl:0"``, ``ampcore.device(...)``) puts
    every tensor there; a dict maps saved devices to devices
    (``{"opencl:0": "cpu"}``; unlisted ones stay); a callable
    ``fn(tensor_on_cpu, saved_location)`` returns the tensor to use (None: the
    default).  Bytes load exactly as saved.

    ``weights_only=True`` (the default, as torch >= 2.6): only the safetensors
    data and the JSON structure are read, never code; an object that was
    pickled at save time raises :class:`WeightsOnlyUnpicklingError` naming its
    type.  ``weights_only=False``, for files you trust, unpickles such objects
    and also reads a plain pickle file (a checkpoint made with ``pickle.dump``).
    """
    if not isinstance(weights_only, bool):
        raise TypeError(f"weights_only must be True or False, got {weights_only!r}")
    placer = _Placer(map_location)
    data = _read(f)
    meta = _header_metadata(data)
    if meta is None:
        damage = _damage(data)
        if damage is not None:
            raise CheckpointCorruptError(_source(f), damage)
        if weights_only:
            raise pickle.UnpicklingError(
                "not a safetensors file (ampcore.save writes safetensors); if it is a pickle checkpoint from a "
                "source you trust, load it with ampcore.load(f, weights_only=False)"
            )
        obj = pickle.loads(data)
        return _relocate(obj, placer) if map_location is not None else obj
    arrays = _arrays(data, _source(f))
    if meta.get("format") != _FORMAT or "ampcore.structure" not in meta:
        # A plain safetensors state dict (e.g. from safetensors.torch.save_file): name -> tensor, on cpu by default.
        return {name: placer.place(a, dt.as_dtype(a.dtype), "cpu", False) for name, a in arrays.items()}
    if meta.get("ampcore.version") != _VERSION:
        raise ValueError(
            f"checkpoint format version {meta.get('ampcore.version')!r} is not one this ampcore reads ({_VERSION!r})"
        )
    return _Decoder(arrays, placer, weights_only).decode(json.loads(meta["ampcore.structure"]))


def load_safetensors(path: FileLike, device: str | Device = "cpu") -> dict[str, Tensor]:
    """A safetensors file (from :func:`save_safetensors`, ``safetensors.torch.save_file`` or
    ``safetensors.numpy.save_file``) as a ``name -> Tensor`` dict on ``device``, for ``load_state_dict``."""
    data = _read(path)
    if _header_metadata(data) is None:
        damage = _damage(data)
        if damage is not None:
            raise CheckpointCorruptError(_source(path), damage)
        raise ValueError(f"{path!r} is not a safetensors file")
    placer = _Placer(device)
    arrays = _arrays(data, _source(path))
    return {name: placer.place(a, dt.as_dtype(a.dtype), "cpu", False) for name, a in arrays.items()}


def _relocate(obj: Any, placer: _Placer) -> Any:
    """map_location for a plain pickle checkpoint: every tensor in the (nested) containers moved."""
    if isinstance(obj, Tensor):
        return placer.place(obj.detach().numpy(), obj.dtype, str(obj.device), obj.requires_grad)
    if isinstance(obj, list):
        return [_relocate(v, placer) for v in obj]
    if type(obj) is tuple:
        return tuple(_relocate(v, placer) for v in obj)
    if isinstance(obj, dict):
        out = type(obj)() if type(obj) in (dict, OrderedDict) else {}
        for k, v in obj.items():
            out[k] = _relocate(v, placer)
        return out
    return obj
