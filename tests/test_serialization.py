"""ampcore.save / ampcore.load: safetensors checkpoints, bit-exact tensors, map_location, weights_only."""

from __future__ import annotations

import dataclasses
import io
import json
import math
import pickle
from collections import OrderedDict
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest
import safetensors
import safetensors.numpy

import ampcore
from ampcore import nn
from ampcore.serialization import WeightsOnlyUnpicklingError

DTYPES = [ampcore.float64, ampcore.float32, ampcore.float16, ampcore.bfloat16, ampcore.int64, ampcore.int32]


def bits(t: ampcore.Tensor) -> bytes:
    return np.asarray(t.numpy(), order="C").tobytes()


def random_bits(dtype: ampcore.DType, shape: tuple[int, ...], seed: int = 0) -> np.ndarray:
    """Every bit pattern is fair game (NaN payloads, -0.0, subnormals, inf): the round trip must keep them all."""
    rng = np.random.default_rng(seed)
    raw = rng.integers(0, 256, size=int(np.prod(shape)) * dtype.itemsize, dtype=np.uint8)
    return raw.view(dtype.numpy).reshape(shape)


def roundtrip(obj, **load_kwargs):
    buffer = io.BytesIO()
    ampcore.save(obj, buffer)
    buffer.seek(0)
    return ampcore.load(buffer, **load_kwargs)


@pytest.mark.parametrize("dtype", DTYPES + [ampcore.bool_], ids=lambda d: d.name)
@pytest.mark.parametrize("shape", [(), (0, 3), (5,), (2, 3, 4)])
def test_every_dtype_round_trips_bit_for_bit(dtype, shape):
    array = (
        random_bits(dtype, shape) if dtype != ampcore.bool_ else np.arange(int(np.prod(shape))).reshape(shape) % 3 == 0
    )
    t = ampcore.tensor(array, dtype=dtype)
    out = roundtrip({"t": t})["t"]
    assert out.dtype == dtype and out.shape == t.shape and out.device == t.device
    assert bits(out) == bits(t)


def test_low_precision_tensors_are_stored_with_safetensors_own_dtype_tags(tmp_path):
    path = tmp_path / "ck.safetensors"
    ampcore.save({"h": ampcore.ones(2, dtype=ampcore.float16), "b": ampcore.ones(2, dtype=ampcore.bfloat16)}, path)
    tags = {name: info["dtype"] for name, info in safetensors.deserialize(path.read_bytes())}
    assert tags == {"h": "F16", "b": "BF16"}


def test_nested_structure_and_non_tensor_leaves_round_trip():
    t = ampcore.randn(3)
    obj = {
        "a": [1, 2.5, -0.0, "s", None, True, False, math.inf, -math.inf, 3 + 4j],
        "t": (t, (t,), []),
        7: {"nested": OrderedDict([("x", 1), ("y", ampcore.float16)])},
        (1, 2): ampcore.device("cpu"),
        "big": 2**70,
        "raw": (b"\x00\xff", bytearray(b"ab"), {1, "x"}, frozenset({(1, 2)})),
    }
    out = roundtrip(obj)
    assert list(out) == ["a", "t", 7, (1, 2), "big", "raw"]
    assert out["raw"] == obj["raw"] and [type(v) for v in out["raw"]] == [bytes, bytearray, set, frozenset]
    assert out["a"][:9] == [1, 2.5, -0.0, "s", None, True, False, math.inf, -math.inf]
    assert math.copysign(1.0, out["a"][2]) == -1.0 and isinstance(out["a"][0], int) and out["a"][9] == 3 + 4j
    assert type(out["t"]) is tuple and type(out["t"][1]) is tuple and out["t"][2] == []
    assert type(out[7]["nested"]) is OrderedDict and out[7]["nested"]["y"] is ampcore.float16
    assert out[(1, 2)] == ampcore.device("cpu") and out["big"] == 2**70
    assert math.isnan(roundtrip([math.nan])[0])
    # One tensor saved twice is one tensor loaded.
    assert out["t"][0] is out["t"][1][0] and bits(out["t"][0]) == bits(t)


def test_requires_grad_is_kept_and_loaded_tensors_are_leaves():
    w = ampcore.randn(2, requires_grad=True)
    y = w * 2  # autograd history is not saved, values are
    out = roundtrip({"w": w, "y": y, "c": ampcore.ones(1)})
    assert out["w"].requires_grad and out["w"].is_leaf and out["y"].is_leaf and not out["c"].requires_grad
    assert bits(out["y"]) == bits(y.detach())


def test_save_to_a_path_and_to_a_file_object_reads_back_the_same(tmp_path):
    obj = {"w": ampcore.arange(6).reshape(2, 3), "n": 3}
    ampcore.save(obj, tmp_path / "a.pt")
    ampcore.save(obj, str(tmp_path / "b.pt"))
    with open(tmp_path / "c.pt", "wb") as f:
        ampcore.save(obj, f)
    for name in ("a.pt", "b.pt", "c.pt"):
        out = ampcore.load(tmp_path / name)
        assert out["n"] == 3 and bits(out["w"]) == bits(obj["w"]) and out["w"].dtype == ampcore.int64
    with open(tmp_path / "a.pt", "rb") as f:
        assert ampcore.load(f)["n"] == 3
    with pytest.raises(TypeError, match="binary"), open(tmp_path / "a.pt", encoding="latin-1") as f:
        ampcore.load(f)


# --------------------------------------------------------------------------- training state
def _train_steps(model, opt, scaler, xs, ys):
    losses = []
    for x, y in zip(xs, ys):
        opt.zero_grad()
        with ampcore.autocast("cpu", dtype=ampcore.float16):
            loss = nn.functional.cross_entropy(model(x), y)
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
        losses.append(bits(loss))
    return losses


@pytest.mark.parametrize("opt_cls", [ampcore.optim.AdamW, ampcore.optim.SGD])
def test_model_optimizer_and_scaler_checkpoint_resumes_bit_for_bit(tmp_path, opt_cls):
    def build():
        ampcore.manual_seed(0)
        model = nn.Sequential(nn.Linear(6, 8), nn.ReLU(), nn.Linear(8, 3))
        kwargs = {"momentum": 0.9} if opt_cls is ampcore.optim.SGD else {}
        return model, opt_cls(model.parameters(), lr=1e-2, **kwargs), ampcore.GradScaler("cpu", init_scale=2.0**20)

    ampcore.manual_seed(1)
    xs = [ampcore.randn(4, 6) for _ in range(6)]
    ys = [ampcore.tensor([0, 1, 2, 1]) for _ in range(6)]
    model, opt, scaler = build()
    straight = _train_steps(model, opt, scaler, xs, ys)

    model, opt, scaler = build()
    first = _train_steps(model, opt, scaler, xs[:3], ys[:3])
    path = tmp_path / "ck.pt"
    ampcore.save(
        {"model": model.state_dict(), "optimizer": opt.state_dict(), "scaler": scaler.state_dict(), "step": 3}, path
    )
    ck = ampcore.load(path)
    assert ck["scaler"] == scaler.state_dict() and ck["step"] == 3
    model2, opt2, scaler2 = build()
    model2.load_state_dict(ck["model"])
    opt2.load_state_dict(ck["optimizer"])
    scaler2.load_state_dict(ck["scaler"])
    assert ck["optimizer"]["param_groups"] == opt.state_dict()["param_groups"]
    resumed = _train_steps(model2, opt2, scaler2, xs[3:], ys[3:])
    assert first + resumed == straight


# --------------------------------------------------------------------------- map_location
def test_map_location_moves_tensors_bit_for_bit(register_fake):
    fake = register_fake(devices=2)
    dev0, dev1 = f"{fake.name}:0", f"{fake.name}:1"
    h = ampcore.tensor(random_bits(ampcore.float16, (4,)), dtype=ampcore.float16)
    obj = {"cpu": h, "f0": h.to(dev0), "f1": h.to(dev1)}
    assert {k: str(v.device) for k, v in roundtrip(obj).items()} == {"cpu": "cpu", "f0": dev0, "f1": dev1}
    every = roundtrip(obj, map_location="cpu")
    assert {str(v.device) for v in every.values()} == {"cpu"} and all(bits(v) == bits(h) for v in every.values())
    assert {str(v.device) for v in roundtrip(obj, map_location=ampcore.device(dev1)).values()} == {dev1}
    mapped = roundtrip(obj, map_location={dev0: "cpu", "cpu": dev1})
    assert {k: str(v.device) for k, v in mapped.items()} == {"cpu": dev1, "f0": "cpu", "f1": dev1}
    seen = []

    def fn(t, location):
        seen.append((str(t.device), location))
        return t.to(dev0) if location == dev1 else None

    moved = roundtrip(obj, map_location=fn)
    assert sorted(seen) == sorted([("cpu", "cpu"), ("cpu", dev0), ("cpu", dev1)])
    assert {k: str(v.device) for k, v in moved.items()} == {"cpu": "cpu", "f0": dev0, "f1": dev0}
    assert all(bits(v) == bits(h) for v in moved.values())


def test_map_location_of_a_bad_type_is_a_type_error():
    with pytest.raises(TypeError, match="map_location must be"):
        roundtrip({"t": ampcore.ones(1)}, map_location=3)


def _file_with(structure, arrays, fmt="ampcore"):
    meta = {"format": fmt, "ampcore.version": "1", "ampcore.structure": json.dumps(structure)}
    return io.BytesIO(safetensors.numpy.save(arrays, metadata=meta))


def test_a_device_that_is_not_here_asks_for_map_location():
    node = {"$": "tensor", "name": "w", "dtype": "float32", "device": "nosuchdevice:0", "grad": False}
    with pytest.raises(RuntimeError, match="'nosuchdevice:0'.*map_location='cpu'"):
        ampcore.load(_file_with(node, {"w": np.ones(2, np.float32)}))
    out = ampcore.load(_file_with(node, {"w": np.ones(2, np.float32)}), map_location="cpu")
    assert out.device == ampcore.device("cpu")


# --------------------------------------------------------------------------- weights_only
class Custom:
    def __init__(self, t):
        self.t = t


def test_weights_only_refuses_other_types_by_name_and_weights_only_false_loads_them():
    t = ampcore.randn(3)
    buffer = io.BytesIO()
    ampcore.save({"obj": Custom(t), "t": t}, buffer)
    buffer.seek(0)
    with pytest.raises(WeightsOnlyUnpicklingError, match=r"test_serialization\.Custom.*weights_only=False") as info:
        ampcore.load(buffer)
    assert isinstance(info.value, pickle.UnpicklingError) and info.value.type_name.endswith("Custom")
    buffer.seek(0)
    out = ampcore.load(buffer, weights_only=False)
    assert isinstance(out["obj"], Custom) and bits(out["obj"].t) == bits(t)
    assert out["obj"].t is out["t"]  # its tensor went into the safetensors part, once


class _Boom:
    def __reduce__(self):
        return (Path.touch, (Path(_Boom.target),))


def test_weights_only_never_runs_code_from_a_pickle(tmp_path):
    _Boom.target = str(tmp_path / "ran")
    malicious = tmp_path / "evil.pt"
    malicious.write_bytes(pickle.dumps({"x": _Boom()}))
    with pytest.raises(pickle.UnpicklingError, match="weights_only=False"):
        ampcore.load(malicious)
    buffer = io.BytesIO()
    ampcore.save({"x": _Boom()}, buffer)
    buffer.seek(0)
    with pytest.raises(WeightsOnlyUnpicklingError, match="_Boom"):
        ampcore.load(buffer)
    assert not (tmp_path / "ran").exists()
    ampcore.load(malicious, weights_only=False)  # the explicit opt-in does run it
    assert (tmp_path / "ran").exists()


def test_a_pickle_checkpoint_from_before_loads_with_weights_only_false_and_map_location(tmp_path):
    t = ampcore.randn(3)
    path = tmp_path / "old.pkl"
    path.write_bytes(pickle.dumps({"model": {"w": t}, "epoch": 2}))
    out = ampcore.load(path, weights_only=False, map_location="cpu")
    assert out["epoch"] == 2 and bits(out["model"]["w"]) == bits(t)


def test_weights_only_must_be_a_bool():
    with pytest.raises(TypeError, match="weights_only"):
        roundtrip({}, weights_only="yes")


# --------------------------------------------------------------------------- plain safetensors state dicts
def _mlp(dtype=ampcore.float32):
    ampcore.manual_seed(3)
    return nn.Sequential(nn.Linear(4, 5), nn.ReLU(), nn.Linear(5, 2)).to(dtype)


def test_a_saved_state_dict_is_a_plain_safetensors_state_dict(tmp_path):
    model = _mlp(ampcore.bfloat16)
    sd = model.state_dict()
    for path, write in (
        (tmp_path / "a.safetensors", ampcore.save),
        (tmp_path / "b.safetensors", ampcore.save_safetensors),
    ):
        write(sd, path)
        plain = safetensors.deserialize(path.read_bytes())
        assert {name: info["dtype"] for name, info in plain} == dict.fromkeys(sd, "BF16")
        for name, info in plain:
            assert bytes(info["data"]) == bits(sd[name]) and info["shape"] == list(sd[name].shape)
        loaded = ampcore.load_safetensors(path)
        assert sorted(loaded) == sorted(sd) and all(bits(loaded[k]) == bits(sd[k]) for k in sd)


def _torch_style_file(path: Path, model: nn.Module, np_dtype) -> None:
    """What ``safetensors.torch.save_file(model.state_dict(), path)`` writes for torch's nn.Sequential of the same
    shape: names "0.weight", "0.bias", "2.weight", "2.bias" (weights out x in), metadata {"format": "pt"}."""
    arrays = {k: np.asarray(v.numpy().astype(np_dtype), order="C") for k, v in model.state_dict().items()}
    safetensors.numpy.save_file(arrays, str(path), metadata={"format": "pt"})


@pytest.mark.parametrize(
    ("dtype", "np_dtype"),
    [(ampcore.float32, np.float32), (ampcore.float16, np.float16), (ampcore.bfloat16, ml_dtypes.bfloat16)],
    ids=["F32", "F16", "BF16"],
)
def test_a_torch_written_safetensors_state_dict_loads_into_the_same_model(tmp_path, dtype, np_dtype):
    source = _mlp(dtype)
    path = tmp_path / "torch.safetensors"
    _torch_style_file(path, source, np_dtype)
    assert sorted(source.state_dict()) == ["0.bias", "0.weight", "2.bias", "2.weight"]
    for sd in (ampcore.load(path), ampcore.load_safetensors(path)):
        ampcore.manual_seed(99)
        target = nn.Sequential(nn.Linear(4, 5), nn.ReLU(), nn.Linear(5, 2)).to(dtype)
        target.load_state_dict(sd)
        x = ampcore.randn(3, 4).to(dtype)
        assert bits(target(x)) == bits(source(x))


def test_load_safetensors_rejects_what_is_not_safetensors(tmp_path):
    path = tmp_path / "x.bin"
    path.write_bytes(b"not a safetensors file")
    with pytest.raises(ValueError, match="not a safetensors file"):
        ampcore.load_safetensors(path)
    with pytest.raises(TypeError, match="entry 'a'"):
        ampcore.save_safetensors({"a": 1}, tmp_path / "y.safetensors")


def test_real_torch_reads_and_writes_the_same_files(tmp_path):
    torch = pytest.importorskip(
        "torch", reason="torch is not installed (the test command installs its CPU wheel: torch==2.13.0)"
    )
    st_torch = pytest.importorskip("safetensors.torch")
    model = _mlp(ampcore.bfloat16)
    ampcore.save(model.state_dict(), tmp_path / "a.safetensors")
    theirs = st_torch.load_file(str(tmp_path / "a.safetensors"))
    assert theirs["0.weight"].dtype == torch.bfloat16
    assert theirs["0.weight"].view(torch.int16).numpy().tobytes() == bits(model.state_dict()["0.weight"])
    tmodel = torch.nn.Sequential(torch.nn.Linear(4, 5), torch.nn.ReLU(), torch.nn.Linear(5, 2)).to(torch.bfloat16)
    st_torch.save_file(tmodel.state_dict(), str(tmp_path / "t.safetensors"))
    model.load_state_dict(ampcore.load(tmp_path / "t.safetensors"))
    assert bits(model.state_dict()["2.bias"]) == tmodel.state_dict()["2.bias"].view(torch.int16).numpy().tobytes()


# --------------------------------------------------------------------------- damaged files, safe globals
@pytest.mark.parametrize(
    ("cut", "why"),
    [
        (lambda n: 0, "the file is empty"),
        (lambda n: 5, "it has 5 bytes, less than a safetensors header"),
        (lambda n: 60, "its header announces"),
        (lambda n: n - 10, "its tensor data does not match its header"),
    ],
)
def test_a_truncated_checkpoint_says_truncated_or_corrupt_and_how(tmp_path, cut, why):
    path = tmp_path / "ckpt.pt"
    ampcore.save({"w": ampcore.ones(100), "step": 3}, path)
    data = path.read_bytes()
    path.write_bytes(data[: cut(len(data))])
    with pytest.raises(ampcore.serialization.CheckpointCorruptError, match=f"is truncated or corrupt: {why}"):
        ampcore.load(path)


@dataclasses.dataclass
class _Config:
    lr: float


def test_safe_globals_allow_a_pickled_class_only_inside_the_block(tmp_path):
    path = tmp_path / "cfg.pt"
    ampcore.save({"cfg": _Config(0.1), "w": ampcore.ones(2)}, path)
    with pytest.raises(ampcore.serialization.WeightsOnlyUnpicklingError, match="add_safe_globals"):
        ampcore.load(path)
    with ampcore.serialization.safe_globals([_Config]):
        assert ampcore.load(path)["cfg"] == _Config(0.1)
    assert ampcore.serialization.get_safe_globals() == []
    with pytest.raises(ampcore.serialization.WeightsOnlyUnpicklingError):
        ampcore.load(path)
