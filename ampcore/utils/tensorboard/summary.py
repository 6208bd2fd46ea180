"""Summary protobufs for TensorBoard, made from ampcore tensors, NumPy arrays and numbers.

Only called by :mod:`.writer`, after it has imported the ``tensorboard``
package, whose protobuf classes these build (the same records torch's
``torch.utils.tensorboard.summary`` writes, so TensorBoard shows them alike).
"""

from __future__ import annotations

import io
from typing import Any

import numpy as np

from ...tensor import Tensor

__all__ = ["as_array", "scalar", "histogram", "image", "text", "tensorflow_bins"]


def as_array(value: Any) -> np.ndarray:
    """``value`` on the host: an ampcore tensor (any device, detached), a NumPy array, a number or a list."""
    if isinstance(value, Tensor):
        return value.detach().numpy()
    return np.asarray(value)


def scalar(tag: str, value: Any) -> Any:
    """A scalar summary (``add_scalar``); ``value`` is a number, a one-element tensor or array."""
    from tensorboard.compat.proto.summary_pb2 import Summary

    array = as_array(value)
    if array.size != 1:
        raise ValueError(f"add_scalar({tag!r}): scalar_value must have one element, got shape {array.shape}")
    return Summary(value=[Summary.Value(tag=tag, simple_value=float(array.reshape(()).astype(np.float64)))])


def tensorflow_bins() -> np.ndarray:
    """TensorFlow's default histogram bucket edges (torch's ``bins='tensorflow'``): +-1e-12 growing by 1.1x."""
    positive = 1e-12 * 1.1 ** np.arange(int(np.ceil(np.log(1e32) / np.log(1.1))))
    positive = positive[positive < 1e20]
    return np.concatenate([-positive[::-1], [0.0], positive])


def histogram(tag: str, values: Any, bins: Any = "tensorflow", max_bins: int | None = None) -> Any:
    """A histogram summary of ``values`` (flattened); ``bins`` as NumPy's, or ``'tensorflow'`` (the default)."""
    from tensorboard.compat.proto.summary_pb2 import HistogramProto, Summary

    flat = as_array(values).astype(np.float64).ravel()
    if flat.size == 0:
        raise ValueError(f"add_histogram({tag!r}): the values are empty")
    edges = tensorflow_bins() if isinstance(bins, str) and bins == "tensorflow" else bins
    counts, limits = np.histogram(flat, bins=edges)
    if max_bins is not None and len(counts) > max_bins:  # merge neighbours, as torch does
        group = -(-len(counts) // max_bins)
        pad = (-len(counts)) % group
        counts = np.pad(counts, (0, pad)).reshape(-1, group).sum(axis=1)
        limits = np.concatenate([limits[:-1:group], limits[-1:]])
    used = np.flatnonzero(counts)
    first, last = max(int(used[0]) - 1, 0), int(used[-1]) + 1  # keep one empty bucket on each side
    proto = HistogramProto(
        min=float(flat.min()),
        max=float(flat.max()),
        num=int(flat.size),
        sum=float(flat.sum()),
        sum_squares=float(flat @ flat),
        bucket_limit=limits[first + 1 : last + 1].tolist(),
        bucket=counts[first:last].tolist(),
    )
    return Summary(value=[Summary.Value(tag=tag, histo=proto)])


def _to_hwc(array: np.ndarray, dataformats: str) -> np.ndarray:
    formats = dataformats.upper()
    if len(formats) != array.ndim or sorted(formats) not in (sorted("CHW"), sorted("HW"), sorted("HWC")):
        raise ValueError(f"dataformats {dataformats!r} does not fit an image of shape {array.shape}")
    if "C" not in formats:
        array, formats = array[..., None], formats + "C"
    hwc = np.transpose(array, [formats.index(c) for c in "HWC"])
    if hwc.shape[2] == 1:
        hwc = np.repeat(hwc, 3, axis=2)
    return hwc


def image(tag: str, img: Any, dataformats: str = "CHW") -> Any:
    """An image summary (PNG, via Pillow, which tensorboard installs): floats in [0, 1] or uint8 0..255."""
    from PIL import Image
    from tensorboard.compat.proto.summary_pb2 import Summary

    array = as_array(img)
    hwc = _to_hwc(array, dataformats)
    if hwc.dtype != np.uint8:
        hwc = (np.clip(hwc.astype(np.float64), 0.0, 1.0) * 255.0 + 0.5).astype(np.uint8)
    height, width, channels = hwc.shape
    buffer = io.BytesIO()
    Image.fromarray(hwc).save(buffer, format="PNG")
    encoded = Summary.Image(height=height, width=width, colorspace=channels, encoded_image_string=buffer.getvalue())
    return Summary(value=[Summary.Value(tag=tag, image=encoded)])


def text(tag: str, text_string: str) -> Any:
    """A text summary (TensorBoard's text plugin, markdown)."""
    from tensorboard.compat.proto.summary_pb2 import Summary, SummaryMetadata
    from tensorboard.compat.proto.tensor_pb2 import TensorProto
    from tensorboard.compat.proto.tensor_shape_pb2 import TensorShapeProto
    from tensorboard.plugins.text.plugin_data_pb2 import TextPluginData

    plugin = SummaryMetadata.PluginData(plugin_name="text", content=TextPluginData(version=0).SerializeToString())
    tensor = TensorProto(
        dtype="DT_STRING",
        string_val=[text_string.encode("utf-8")],
        tensor_shape=TensorShapeProto(dim=[TensorShapeProto.Dim(size=1)]),
    )
    metadata = SummaryMetadata(plugin_data=plugin)
    return Summary(value=[Summary.Value(tag=tag + "/text_summary", metadata=metadata, tensor=tensor)])
