"""What a benchmark configuration is, what its run records, and the training settings every run shares."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Config", "History", "LR", "INIT_SCALE"]

LR = 1e-3
INIT_SCALE = 2.0**16  # both GradScalers' default initial scale


@dataclass(frozen=True)
class Config:
    """What one configuration trains with: ``framework`` ampcore or torch, a device, and a precision.

    ``precision`` float32 is the baseline; float16 and bfloat16 train under
    autocast, float16 with a GradScaler (bfloat16 has float32's range).
    ``float8`` names a float8 recipe (ampcore only): the model's Linear layers
    train in float8 and the rest under autocast to ``precision``.  ``compiled``
    (ampcore only): the whole step captured with :func:`ampcore.compile`.
    """

    framework: str
    device: str
    precision: str
    float8: str | None = None
    compiled: bool = False  # the step captured with ampcore.compile (ampcore bench --compile)

    @property
    def amp(self) -> bool:
        return self.precision != "float32"

    @property
    def loss_scaling(self) -> bool:
        return self.precision == "float16"

    @property
    def label(self) -> str:
        float8 = f" + float8 {self.float8}" if self.float8 else ""
        captured = " captured" if self.compiled else ""
        return f"{self.framework} {self.device} {self.precision}{' AMP' if self.amp else ''}{float8}{captured}"

    @property
    def phase(self) -> tuple[str, str]:
        """(framework, device): the configurations timed together, and refused together when one fails."""
        return (self.framework, self.device)

    @property
    def baseline(self) -> Config:
        """The float32 configuration of the same framework and device (captured too, for a captured one)."""
        return Config(self.framework, self.device, "float32", compiled=self.compiled)

    @property
    def eager(self) -> Config:
        """This configuration without capture (a captured row's reference)."""
        return Config(self.framework, self.device, self.precision, self.float8)

    @property
    def without_float8(self) -> Config:
        """The same configuration with its Linear layers in ``precision`` (a float8 row's reference)."""
        return Config(self.framework, self.device, self.precision, compiled=self.compiled)


@dataclass
class History:
    """What a run recorded: every step's loss, and the loss scale after each step (None without scaling)."""

    losses: list[float]
    scales: list[float] | None
    skipped_steps: int
    host_syncs: int
