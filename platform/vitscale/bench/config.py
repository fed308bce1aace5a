"""`BenchmarkConfig`: one throughput/memory sweep — the fields of `vitscale bench` and of a
benchmark study's `benchmark:` block, so the command and the study share one definition.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from vitscale.models.config import OdeConfig


class BenchmarkConfig(BaseModel):
    """A sweep over mixers x regimes x resolutions (x attention backends) at one model size."""

    model_config = ConfigDict(extra="forbid")

    mixers: list[str] = Field(["attention", "ssog"], min_length=1, description="token mixers to compare")
    regimes: list[str] = Field(["discrete", "looped", "ode"], min_length=1)
    resolutions: list[int] = Field([224, 384, 512, 768, 1024], min_length=1, description="image sides")
    width: int = Field(192, ge=1)
    depth: int = Field(12, ge=1)
    heads: int = Field(3, ge=1)
    patch_size: int = Field(16, ge=1)
    num_gaussians: int = Field(4, ge=1, description="SSoG: Gaussians per head and axis")
    num_classes: int = Field(100, ge=2)
    ode: OdeConfig = Field(
        default_factory=lambda: OdeConfig(solver="rk4", step_size=1.0),
        description="solver of the ode regime; default rk4 with step 1: a fixed grid, so every mixer "
        "does the same 4·depth function evaluations whatever its weights and dtype (an adaptive "
        "solver's NFE depends on both; it is recorded beside the throughput)",
    )
    batch_size: int = Field(8, ge=1, description="matched across mixers")
    mode: Literal["inference", "train"] = Field(
        "inference", description="inference: eval + inference_mode; train: forward + backward + step"
    )
    dtype: Literal["float32", "bfloat16"] = "float32"
    device: Literal["cpu", "cuda", "auto"] = "auto"
    attention_backends: list[Literal["sdpa", "math"]] = Field(
        ["sdpa", "math"], min_length=1, description="attention is measured once per backend"
    )
    compile: bool = Field(False, description="torch.compile each model before timing")
    compile_mode: Literal["default", "reduce-overhead", "max-autotune"] = Field(
        "default", description="torch.compile mode; reduce-overhead replays CUDA graphs (no launch overhead)"
    )
    warmup: int = Field(3, ge=0, description="untimed iterations before measuring")
    repeats: int = Field(10, ge=1, description="timed iterations; the median is reported")
    seed: int = Field(0, ge=0, description="same weights and inputs for every mixer")
    threads: int | None = Field(
        None, ge=1, description="CPU intra-op threads (torch.set_num_threads); default: torch's choice"
    )

    @model_validator(mode="after")
    def _check(self) -> BenchmarkConfig:
        from vitscale.models.registry import MIXERS, REGIMES

        for field, names, registry in (("mixers", self.mixers, MIXERS), ("regimes", self.regimes, REGIMES)):
            unknown = [n for n in names if n not in registry]
            if unknown:
                raise ValueError(
                    f"{field}: unknown {', '.join(map(repr, unknown))}; choose from {sorted(registry)}"
                )
            if len(set(names)) < len(names):
                raise ValueError(f"{field}: a value is repeated")
        if len(set(self.resolutions)) < len(self.resolutions):
            raise ValueError("resolutions: a value is repeated")
        if self.width % self.heads:
            raise ValueError(f"heads: {self.heads} does not divide width {self.width}")
        bad = [r for r in self.resolutions if r % self.patch_size]
        if bad:
            raise ValueError(f"resolutions: {bad} not divisible by patch_size {self.patch_size}")
        return self

    def configurations(self) -> list[dict[str, Any]]:
        """One dict per measured configuration: mixer, regime, resolution, attention_backend.

        Attention is measured once per backend; other mixers once (attention_backend None).
        Order: regime, resolution, mixer, backend — side-by-side pairs stay adjacent.
        """
        out = []
        for regime in self.regimes:
            for resolution in self.resolutions:
                for mixer in self.mixers:
                    backends = self.attention_backends if mixer == "attention" else [None]
                    for backend in backends:
                        out.append(
                            {
                                "mixer": mixer,
                                "regime": regime,
                                "resolution": resolution,
                                "attention_backend": backend,
                            }
                        )
        return out
