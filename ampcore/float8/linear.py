"""Float8Linear and ``convert_to_float8_training``: torchao's float8 training API over ampcore's kernels.

``Float8Linear`` is an :class:`ampcore.nn.Linear` whose three GEMMs run in
float8 through ``scaled_mm``: the forward casts input and weight (e4m3), the
backward casts grad_output (e5m2 under the hybrid format) and computes
grad_input and grad_weight.  The float32 parameters are the master weights:
they are read, cast for the GEMM and never changed by it.  Under an autocast
region the output has the region's dtype (bfloat16/float16), otherwise the
input's; every other op of the model follows autocast as usual.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .. import dtypes as dt
from ..amp.state import thread_state
from ..amp.trace import TraceRecord
from ..autograd import Function, FunctionCtx, is_grad_enabled
from ..nn.module import Module
from ..nn.modules.linear import Linear
from ..tensor import Tensor
from .casting import Operand, TensorCaster, gemm
from .recipes import Recipe, TensorwiseScaling, parse_recipe

__all__ = ["Float8GemmConfig", "Float8LinearConfig", "Float8Linear", "as_config"]


@dataclass(frozen=True)
class Float8GemmConfig:
    """torchao's per-GEMM setting: ``use_fast_accum`` lets sm_89+ accumulate part of the sum in lower precision."""

    use_fast_accum: bool = False


@dataclass(frozen=True)
class Float8LinearConfig:
    """How ``convert_to_float8_training`` converts each linear layer (torchao's ``Float8LinearConfig``).

    ``recipe`` is one of ampcore.float8's recipes (or its string form);
    the three ``gemm_config_*`` fields carry torchao's defaults (fast
    accumulation for the output GEMM only).  ``Float8LinearConfig.from_recipe_name("rowwise")``
    is torchao's constructor; the string may carry a recipe's fields (``"delayed,margin=1"``).
    """

    recipe: Recipe = field(default_factory=TensorwiseScaling)
    gemm_config_output: Float8GemmConfig = Float8GemmConfig(use_fast_accum=True)
    gemm_config_grad_input: Float8GemmConfig = Float8GemmConfig()
    gemm_config_grad_weight: Float8GemmConfig = Float8GemmConfig()

    def __post_init__(self) -> None:
        object.__setattr__(self, "recipe", parse_recipe(self.recipe))

    @classmethod
    def from_recipe_name(cls, recipe_name: str | Recipe) -> Float8LinearConfig:
        """torchao's constructor: ``"tensorwise"``, ``"rowwise"``, ``"delayed"``, ``"mxfp8"`` (with ``,key=value``)."""
        return cls(recipe=parse_recipe(recipe_name))

    def __str__(self) -> str:
        return str(self.recipe)


def as_config(config: Float8LinearConfig | Recipe | str | None) -> Float8LinearConfig:
    if config is None:
        return Float8LinearConfig()
    if isinstance(config, Float8LinearConfig):
        return config
    return Float8LinearConfig.from_recipe_name(config)


class Float8Linear(Linear):
    """``y = x @ weight.T + bias`` with the GEMMs in float8 under ``config``'s recipe (torchao's Float8Linear).

    ``casters`` hold each role's amax history (delayed scaling) and
    per-step stats, read by :func:`ampcore.float8.float8_stats`.
    """

    def __init__(
        self,
        in_features: int,
        out_features: int,
        bias: bool = True,
        device: Any = None,
        dtype: Any = None,
        config: Float8LinearConfig | Recipe | str | None = None,
    ) -> None:
        super().__init__(in_features, out_features, bias, device, dtype)
        self._setup(as_config(config), "")

    def _setup(self, config: Float8LinearConfig, fqn: str) -> None:
        object.__setattr__(self, "config", config)
        object.__setattr__(self, "fqn", fqn)
        object.__setattr__(self, "recipe_text", str(config.recipe))
        object.__setattr__(
            self, "casters", {role: TensorCaster(config.recipe, role) for role in ("input", "weight", "grad_output")}
        )

    @classmethod
    def from_float(
        cls, mod: Linear, config: Float8LinearConfig | Recipe | str | None = None, fqn: str = ""
    ) -> Float8Linear:
        """A Float8Linear sharing ``mod``'s weight and bias Parameters (optimizers built before keep working)."""
        new = cls.__new__(cls)
        Module.__init__(new)
        new.in_features, new.out_features = mod.in_features, mod.out_features
        new.weight = mod.weight
        if mod.bias is None:
            new.register_parameter("bias", None)
        else:
            new.bias = mod.bias
        new._setup(as_config(config), fqn)
        return new

    def forward(self, input: Tensor) -> Tensor:  # noqa: A002 - torch's argument name
        if input.ndim == 0 or input.shape[-1] != self.in_features:
            raise ValueError(
                f"Float8Linear{' ' + self.fqn if self.fqn else ''}: input of shape {input.shape} does not fit "
                f"in_features={self.in_features}; expected (..., {self.in_features})"
            )
        device_type = input.device.type
        region = thread_state.regions.get(device_type)
        autocast_dtype = region.dtype if region is not None and region.enabled else None
        if is_grad_enabled():  # a training step: GradScaler.scale() reads (and clears) it
            thread_state.float8_recipe[device_type] = (self.recipe_text, autocast_dtype)
        out_dtype = autocast_dtype or input.dtype
        out = _Float8Matmul.apply(input, self.weight, self, out_dtype)
        return out if self.bias is None else out + self.bias.to(dtype=out.dtype)

    def extra_repr(self) -> str:
        return f"{super().extra_repr()}, recipe={self.config.recipe}"


class _Float8Matmul(Function):
    """``x @ w.T`` in float8: forward casts x and w, backward casts grad_output; three ``scaled_mm`` GEMMs."""

    @staticmethod
    def forward(ctx: FunctionCtx, x: Tensor, w: Tensor, layer: Float8Linear, out_dtype: dt.DType) -> Tensor:
        lead = x.shape[:-1]
        casters = layer.casters
        with _no_routing():
            x2 = x.reshape(-1, x.shape[-1])
            qx = casters["input"].cast(x2)
            qw = casters["weight"].cast(w)
            y = gemm(qx, qw, out_dtype, layer.config.gemm_config_output.use_fast_accum).reshape(*lead, w.shape[0])
        _trace(layer, x2, qx, "input", out_dtype)
        _trace(layer, w, qw, "weight", out_dtype)
        _trace_gemm(layer, x2, y, "output")
        per_tensor = layer.config.recipe.granularity == "tensorwise"
        # Per-tensor operands transpose without a new cast: keep their float8 values (1 byte an element).
        # Row-wise and block operands need new scales for the transposed uses: keep x and w.
        if per_tensor:
            ctx.saved = (layer, x.shape, None, None, qx, qw)
            ctx.save_for_backward(qx.q, qx.inv_scale, qw.q, qw.inv_scale)  # what saved_bytes() counts
        else:
            ctx.saved = (layer, x.shape, x2, w, None, None)
            ctx.save_for_backward(x2, w)
        ctx.dtypes = (x.dtype, w.dtype)
        return y

    @staticmethod
    def backward(ctx: FunctionCtx, grad: Tensor) -> tuple[Any, ...]:
        layer, x_shape, x2, w, qx, qw = ctx.saved
        x_dtype, w_dtype = ctx.dtypes
        config = layer.config
        caster = layer.casters["grad_output"]
        g2 = grad.reshape(-1, grad.shape[-1])
        per_tensor = x2 is None
        grad_input = grad_weight = None
        with _no_routing():
            qg = caster.cast(g2)
            if ctx.needs_input_grad[0]:
                b = qw.T if per_tensor else layer.casters["weight"].cast(w.t().contiguous(), record=False)
                grad_input = gemm(qg, b, x_dtype, config.gemm_config_grad_input.use_fast_accum).reshape(*x_shape)
            if ctx.needs_input_grad[1]:
                a = qg.T if per_tensor else caster.cast(g2.t().contiguous(), record=False)
                b = qx.T if per_tensor else layer.casters["input"].cast(x2.t().contiguous(), record=False)
                grad_weight = gemm(a, b, w_dtype, config.gemm_config_grad_weight.use_fast_accum)
        return grad_input, grad_weight, None, None


class _no_routing:  # noqa: N801 - used as a context manager, like no_grad
    """Ops inside run without autocast routing or tracing (as inside an op body); Float8Linear traces itself."""

    def __enter__(self) -> None:
        thread_state.frames.depth += 1

    def __exit__(self, *exc: object) -> None:
        thread_state.frames.depth -= 1


def _trace(layer: Float8Linear, x: Tensor, op: Operand, role: str, out_dtype: dt.DType) -> None:
    region = thread_state.regions.get(x.device.type)
    if region is None or region.trace is None:
        return
    caster = layer.casters[role]
    recipe = layer.config.recipe
    region.trace.append(
        TraceRecord(
            op="quantize_float8",
            device=str(x.device),
            input_dtypes=(x.dtype.name,),
            cast_to=caster.dtype_name,
            output_dtypes=(caster.dtype_name,),
            category="float8",
            reason=f"Float8Linear {layer.fqn or '?'} {role}: recipe {recipe} ({recipe.fp8_format.value}), "
            f"{op.scale_text()}, saturate to ±{caster.fp8_max:g}",
        )
    )


def _trace_gemm(layer: Float8Linear, x: Tensor, y: Tensor, which: str) -> None:
    region = thread_state.regions.get(x.device.type)
    if region is None or region.trace is None:
        return
    fmt = layer.config.recipe.fp8_format
    block = layer.config.recipe.granularity == "block"
    region.trace.append(
        TraceRecord(
            op="scaled_mm",
            device=str(x.device),
            input_dtypes=(layer.casters["input"].dtype_name, layer.casters["weight"].dtype_name),
            cast_to=None,
            output_dtypes=(y.dtype.name,),
            category="float8",
            reason=f"Float8Linear {layer.fqn or '?'} {which} GEMM ({fmt.value}"
            f"{', block-scaled: one power of two per 32 values along K' if block else ''}): float32 accumulation, "
            f"output in {y.dtype.name} ({'autocast dtype' if region.enabled else 'input dtype'})",
        )
    )
