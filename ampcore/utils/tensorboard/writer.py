"""SummaryWriter, as torch.utils.tensorboard.writer's: event files TensorBoard reads, through the ``tensorboard``
package (an optional dependency: ``pip install 'ampcore[tensorboard]'``)."""

from __future__ import annotations

import os
import socket
import time
from datetime import datetime
from typing import Any

from . import summary

__all__ = ["SummaryWriter", "TensorBoardNotInstalledError"]


class TensorBoardNotInstalledError(ImportError):
    """The ``tensorboard`` package is missing; the message says how to install it."""


def _event_file_writer() -> Any:
    try:
        from tensorboard.summary.writer.event_file_writer import EventFileWriter
    except ImportError as err:
        raise TensorBoardNotInstalledError(
            f"SummaryWriter writes through the tensorboard package, which is not installed ({err}); install it "
            "with: pip install 'ampcore[tensorboard]' (or pip install tensorboard)"
        ) from err
    return EventFileWriter


def _step(global_step: Any) -> int:
    return 0 if global_step is None else int(summary.as_array(global_step).reshape(()))


class SummaryWriter:
    """``SummaryWriter(log_dir=None, comment='', purge_step=None, max_queue=10, flush_secs=120,
    filename_suffix='')``: torch's writer; values may be ampcore tensors on any device.

    ``log_dir`` defaults to ``runs/<date>_<host><comment>``, as torch's.  It
    writes scalars, groups of scalars, histograms, images and text;
    ``add_graph``, ``add_embedding`` and ``add_hparams`` raise
    NotImplementedError.  TensorBoardNotInstalledError (an ImportError naming
    the fix) when the ``tensorboard`` package is missing.
    """

    def __init__(
        self,
        log_dir: str | os.PathLike[str] | None = None,
        comment: str = "",
        purge_step: int | None = None,
        max_queue: int = 10,
        flush_secs: int = 120,
        filename_suffix: str = "",
    ) -> None:
        self._writer_class = _event_file_writer()
        if log_dir is None:
            stamp = datetime.now().strftime("%b%d_%H-%M-%S")
            log_dir = os.path.join("runs", f"{stamp}_{socket.gethostname()}{comment}")
        self.log_dir = os.fspath(log_dir)
        self._options = {"max_queue_size": max_queue, "flush_secs": flush_secs, "filename_suffix": filename_suffix}
        self._writer = self._writer_class(self.log_dir, **self._options)
        self._children: dict[str, Any] = {}
        if purge_step is not None:
            from tensorboard.compat.proto.event_pb2 import Event, SessionLog

            self._writer.add_event(Event(step=purge_step, session_log=SessionLog(status=SessionLog.START)))

    def get_logdir(self) -> str:
        """The directory the event files go to."""
        return self.log_dir

    def _add(self, proto: Any, global_step: Any, walltime: float | None, writer: Any = None) -> None:
        from tensorboard.compat.proto.event_pb2 import Event

        event = Event(summary=proto, wall_time=time.time() if walltime is None else walltime, step=_step(global_step))
        (writer or self._writer).add_event(event)

    def add_scalar(
        self,
        tag: str,
        scalar_value: Any,
        global_step: Any = None,
        walltime: float | None = None,
        new_style: bool = False,
        double_precision: bool = False,
    ) -> None:
        """Log one number (a Python number, or a one-element tensor or array) under ``tag`` at ``global_step``."""
        self._add(summary.scalar(tag, scalar_value), global_step, walltime)

    def add_scalars(
        self, main_tag: str, tag_scalar_dict: dict[str, Any], global_step: Any = None, walltime: float | None = None
    ) -> None:
        """Log several numbers as one chart: each to its own run directory ``<log_dir>/<main_tag>_<tag>``."""
        for tag, value in tag_scalar_dict.items():
            run = os.path.join(self.log_dir, f"{main_tag.replace('/', '_')}_{tag}")
            if run not in self._children:
                self._children[run] = self._writer_class(run, **self._options)
            self._add(summary.scalar(main_tag, value), global_step, walltime, self._children[run])

    def add_histogram(
        self,
        tag: str,
        values: Any,
        global_step: Any = None,
        bins: Any = "tensorflow",
        walltime: float | None = None,
        max_bins: int | None = None,
    ) -> None:
        """Log the distribution of ``values`` (a tensor or array, flattened)."""
        self._add(summary.histogram(tag, values, bins, max_bins), global_step, walltime)

    def add_image(
        self,
        tag: str,
        img_tensor: Any,
        global_step: Any = None,
        walltime: float | None = None,
        dataformats: str = "CHW",
    ) -> None:
        """Log an image: floats in [0, 1] or uint8, laid out as ``dataformats`` (``CHW``, ``HWC`` or ``HW``)."""
        self._add(summary.image(tag, img_tensor, dataformats), global_step, walltime)

    def add_images(
        self,
        tag: str,
        img_tensor: Any,
        global_step: Any = None,
        walltime: float | None = None,
        dataformats: str = "NCHW",
    ) -> None:
        """Log a batch of images as one grid row (``NCHW`` or ``NHWC``)."""
        import numpy as np

        batch = summary.as_array(img_tensor)
        formats = dataformats.upper()
        if len(formats) != batch.ndim or formats[0] != "N":
            raise ValueError(f"add_images: dataformats {dataformats!r} does not fit images of shape {batch.shape}")
        per_image = formats[1:]
        row = np.concatenate([summary._to_hwc(im, per_image) for im in batch], axis=1)
        self._add(summary.image(tag, row, "HWC"), global_step, walltime)

    def add_text(self, tag: str, text_string: str, global_step: Any = None, walltime: float | None = None) -> None:
        """Log a (markdown) string."""
        self._add(summary.text(tag, text_string), global_step, walltime)

    def add_figure(
        self, tag: str, figure: Any, global_step: Any = None, close: bool = True, walltime: float | None = None
    ) -> None:
        """Log a matplotlib figure as an image."""
        import io

        import numpy as np
        from PIL import Image

        buffer = io.BytesIO()
        figure.savefig(buffer, format="png")
        if close:
            import matplotlib.pyplot as plt

            plt.close(figure)
        rgb = np.asarray(Image.open(io.BytesIO(buffer.getvalue())).convert("RGB"))
        self._add(summary.image(tag, rgb, "HWC"), global_step, walltime)

    def add_graph(self, model: Any, input_to_model: Any = None, verbose: bool = False, **kwargs: Any) -> None:
        """Not supported: torch traces the model with TorchScript, which ampcore does not have."""
        raise NotImplementedError("SummaryWriter.add_graph needs a traced graph, which ampcore does not make")

    def add_embedding(self, mat: Any, *args: Any, **kwargs: Any) -> None:
        """Not supported yet."""
        raise NotImplementedError("SummaryWriter.add_embedding is not in ampcore yet")

    def add_hparams(self, hparam_dict: dict[str, Any], metric_dict: dict[str, Any], *args: Any, **kwargs: Any) -> None:
        """Not supported yet; log the metrics with :meth:`add_scalar`."""
        raise NotImplementedError("SummaryWriter.add_hparams is not in ampcore yet; log metrics with add_scalar")

    def flush(self) -> None:
        """Write what is queued to disk."""
        for writer in (self._writer, *self._children.values()):
            writer.flush()

    def close(self) -> None:
        """Flush and close the event files; the writer cannot be used after."""
        for writer in (self._writer, *self._children.values()):
            writer.flush()
            writer.close()

    def __enter__(self) -> SummaryWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
