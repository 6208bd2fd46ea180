"""torch.nn.utils for ampcore: gradient clipping, flattening parameters to one vector, and :mod:`.rnn`
(PackedSequence and the packing functions)."""

from . import rnn
from .clip_grad import clip_grad_norm_, clip_grad_value_, parameters_to_vector, vector_to_parameters

__all__ = ["rnn", "clip_grad_norm_", "clip_grad_value_", "parameters_to_vector", "vector_to_parameters"]
