"""`BenchmarkConfig`: one throughput/memory sweep — the fields of `vitscale bench` and of a
benchmark study's `benchmark:` block, so the command and the study share one definition.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal, NamedTuple

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from vitscale.models.config import ModelConfig
from vitscale.models.registry import MIXERS, REGIMES, mixer_order, moved_keys

# The model a sweep measures unless `benchmark.model` says otherwise: ViT-Ti/16, CIFAR-100 head, and
# each regime's section as it declares for benchmarks (`bench_settings`, see bench_model).
BENCH_SIZE = {
    "width": 192,
    "depth": 12,
    "heads": 3,
    "patch_size": 16,
    "num_classes": 100,
    "image_size": 224,
}


def bench_model() -> dict[str, Any]:
    """BENCH_SIZE with every regime's declared `bench_settings` as its section (the ODE's fixed
    grid: every mixer then does the same field evaluations whatever its weights and dtype)."""
    sections = {name: dict(f.bench_settings) for name, f in REGIMES.facts().items() if f.bench_settings}
    return {**BENCH_SIZE, **sections}


def benched_mixers() -> list[str]:
    """The mixers a sweep measures unless told: those declared `benched` (baseline, candidate, ...)."""
    return mixer_order([name for name, facts in MIXERS.facts().items() if facts.benched])


def benched_regimes() -> list[str]:
    """The regimes a sweep measures unless told: those declared `benched`, in registration order."""
    return [name for name, facts in REGIMES.facts().items() if facts.benched]


DTYPES = ("float32", "bfloat16")
VARIANT_KEYS = ("dtype", "batch_size", "compile")  # per configuration; the order configurations nest them


class Variant(NamedTuple):
    """How one configuration runs: its autocast dtype, batch size and torch.compile flag."""

    dtype: str
    batch_size: int
    compile: bool

    def label(self) -> str:
        """`float32 b128 eager` / `bfloat16 b512 compiled`: the variant as the report names it."""
        return f"{self.dtype} b{self.batch_size} {'compiled' if self.compile else 'eager'}"


def _one_or_list(key: str, value: Any, check) -> Any:
    """A value or a list of values, each passing `check` (its message or None), none repeated;
    returned as given (a scalar stays one: a study written before lists existed keeps its hash)."""
    items = value if isinstance(value, list) else [value]
    if not items:
        raise ValueError(f"{key}: give at least one value")
    for item in items:
        problem = check(item)
        if problem:
            raise ValueError(f"{key}: {item!r} {problem}")
    if len(set(items)) < len(items):
        raise ValueError(f"{key}: a value is repeated")
    return value


def _as_list(value: Any) -> list:
    return list(value) if isinstance(value, list) else [value]


def _merge(base: dict[str, Any], given: dict[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for key, value in given.items():
        out[key] = (
            {**out[key], **value} if isinstance(value, dict) and isinstance(out.get(key), dict) else value
        )
    return out


class BenchmarkConfig(BaseModel):
    """A sweep over mixers x regimes x resolutions (x attention backends) of one `model`."""

    model_config = ConfigDict(extra="forbid")

    model: ModelConfig = Field(
        default_factory=lambda: ModelConfig.model_validate(bench_model()),
        description="the model measured (any ModelConfig field and mixer/regime section); mixer, "
        "regime and image_size are set per configuration. Unset fields: ViT-Ti/16, 100 classes, "
        "each regime's benchmark settings (ode: solver rk4 with step 1)",
    )
    mixers: list[str] = Field(
        default_factory=benched_mixers,
        min_length=1,
        description="token mixers to compare (default: those declared benched: attention, ssog, "
        "pooling); pooling (mixing almost free) gives the table's measured ceiling: what any mixer "
        "could gain over attention on this machine",
    )
    regimes: list[str] = Field(
        default_factory=benched_regimes, min_length=1, description="default: those declared benched"
    )
    resolutions: list[int] = Field([224, 384, 512, 768, 1024], min_length=1, description="image sides")
    batch_size: int | list[int] = Field(
        8,
        description="images per timed iteration, matched across mixers; a list times every batch size "
        "side by side (round-robin in each regime x resolution), ratios per image",
    )
    mode: Literal["inference", "train"] = Field(
        "inference", description="inference: eval + inference_mode; train: forward + backward + step"
    )
    dtype: Literal["float32", "bfloat16"] | list[Literal["float32", "bfloat16"]] = Field(
        "float32",
        description="float32 | bfloat16 (autocast); a list times each dtype side by side, the first "
        "being the baseline of the variant ratios",
    )
    device: Literal["cpu", "cuda", "auto"] = "auto"
    attention_backends: list[Literal["sdpa", "math"]] = Field(
        ["sdpa", "math"], min_length=1, description="attention is measured once per backend"
    )
    train_memory: bool = Field(
        True,
        description="also measure each configuration's peak memory in one eager training step "
        "(forward + backward + AdamW) beside inference's, whatever `mode` times; off where a "
        "training step would not fit in memory (on CPU the OOM killer would end the configuration)",
    )
    compile: bool | list[bool] = Field(
        False,
        description="torch.compile each model before timing; [false, true] times eager and compiled "
        "side by side (eager is the baseline of the variant ratios)",
    )
    compile_mode: Literal["default", "reduce-overhead", "max-autotune"] = Field(
        "default", description="torch.compile mode; reduce-overhead replays CUDA graphs (no launch overhead)"
    )
    warmup: int = Field(3, ge=0, description="untimed iterations before measuring")
    repeats: int = Field(10, ge=1, description="timed iterations; the median is reported")
    seed: int = Field(0, ge=0, description="same weights and inputs for every mixer")
    threads: int | None = Field(
        None, ge=1, description="CPU intra-op threads (torch.set_num_threads); default: torch's choice"
    )
    reserve_node: bool | None = Field(
        None,
        description="benchmark studies: each trial reserves every CPU of a node, so timings run one "
        "at a time per node and never share cores (threads stay resources.cpu); default: on when "
        "timing on the CPU (device cpu, or resources.gpu 0), off on GPUs, where each trial holds its "
        "own GPU; false: trials as resources asks (faster, contended on CPU)",
    )
    paired: bool | None = Field(
        None,
        description="benchmark studies: each candidate's trial also times its cell's attention "
        "configurations round-robin with its own, and the reports take its ratios from there "
        "(paired_ratio_<backend>), not from two trials timed minutes apart; default: on when timing "
        "on the CPU, where speed drifts by tens of percent from minute to minute (bench.paired)",
    )

    @model_validator(mode="before")
    @classmethod
    def _moved(cls, data: Any) -> Any:
        """Model fields given at the top level (the old layout) name their new key."""
        if isinstance(data, dict):
            moved = moved_keys()
            for key in data:
                if key not in cls.model_fields and (key in ModelConfig.all_fields() or key in moved):
                    raise ValueError(f"{key}: moved to benchmark.model.{moved.get(key, key)}")
        return data

    @field_validator("dtype", mode="before")
    @classmethod
    def _dtypes(cls, value: Any) -> Any:
        return _one_or_list("dtype", value, lambda d: None if d in DTYPES else f"is not {' | '.join(DTYPES)}")

    @field_validator("batch_size", mode="before")
    @classmethod
    def _batch_sizes(cls, value: Any) -> Any:
        def check(b: Any) -> str | None:
            whole = isinstance(b, int) and not isinstance(b, bool)
            return None if whole and b >= 1 else "is not a whole number >= 1"

        return _one_or_list("batch_size", value, check)

    @field_validator("compile", mode="before")
    @classmethod
    def _compiles(cls, value: Any) -> Any:
        return _one_or_list(
            "compile", value, lambda c: None if isinstance(c, bool) else "is not true | false"
        )

    @property
    def dtypes(self) -> list[str]:
        return _as_list(self.dtype)

    @property
    def batch_sizes(self) -> list[int]:
        return _as_list(self.batch_size)

    @property
    def compiles(self) -> list[bool]:
        return _as_list(self.compile)

    def variants(self) -> list[Variant]:
        """Every dtype x batch size x compile flag, in that nesting (compile innermost: a compiled
        configuration sits beside its eager twin)."""
        return [
            Variant(dtype, batch, compiled)
            for dtype in self.dtypes
            for batch in self.batch_sizes
            for compiled in self.compiles
        ]

    def baseline_variant(self) -> Variant:
        """What the variant ratios divide by: the first dtype, the first batch size, eager if listed."""
        return Variant(
            self.dtypes[0], self.batch_sizes[0], False if False in self.compiles else self.compiles[0]
        )

    def varying(self) -> tuple[str, ...]:
        """The VARIANT_KEYS given more than one value."""
        lists = {"dtype": self.dtypes, "batch_size": self.batch_sizes, "compile": self.compiles}
        return tuple(key for key in VARIANT_KEYS if len(lists[key]) > 1)

    def variant(self, point: Mapping[str, Any]) -> Variant:
        """The point's dtype, batch size and compile flag. The config decides which exist: a value
        it does not list (a point planned before variants existed, or one taken from another
        config, as `config.model_copy(update={"batch_size": 32})` with an old point) runs its first."""

        def pick(key: str, listed: list) -> Any:
            value = point.get(key)
            return (
                value
                if value is not None and any(value == v and type(value) is type(v) for v in listed)
                else listed[0]
            )

        return Variant(
            pick("dtype", self.dtypes), pick("batch_size", self.batch_sizes), pick("compile", self.compiles)
        )

    @field_validator("model", mode="before")
    @classmethod
    def _bench_defaults(cls, value: Any) -> Any:
        """A partial `model:` keeps the benchmark's defaults for the fields it leaves out."""
        return _merge(bench_model(), value) if isinstance(value, dict) else value

    @model_validator(mode="after")
    def _check(self) -> BenchmarkConfig:
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
        bad = [r for r in self.resolutions if r % self.model.patch_size]
        if bad:
            raise ValueError(f"resolutions: {bad} not divisible by patch_size {self.model.patch_size}")
        return self

    def model_for(self, point: dict[str, Any]) -> ModelConfig:
        """The ModelConfig of one configuration: `model` with its mixer, regime, resolution (and backend)."""
        data = self.model.model_dump()
        data.update(mixer=point["mixer"], regime=point["regime"], image_size=int(point["resolution"]))
        switch = MIXERS.fact(point["mixer"], "backend")  # the mixer's declared backend setting, if any
        if point.get("attention_backend") and switch is not None:
            section = data.get(point["mixer"], {})
            data[point["mixer"]] = {**section, switch.setting: point["attention_backend"]}
        return ModelConfig.model_validate(data)

    def configurations(self) -> list[dict[str, Any]]:
        """One dict per measured configuration: mixer, regime, resolution, attention_backend, dtype,
        batch_size, compile.

        A mixer that declares a backend (attention) is measured once per listed backend; other
        mixers once (attention_backend None); each
        of them once per variant (`variants`). Order: regime, resolution, mixer, backend, dtype,
        batch size, compile — a cell (regime x resolution) is contiguous, and in it a series'
        variants sit side by side, a compiled one beside its eager twin.
        """
        out = []
        for regime in self.regimes:
            for resolution in self.resolutions:
                for mixer in self.mixers:
                    backends = self.attention_backends if MIXERS.fact(mixer, "backend") else [None]
                    for backend in backends:
                        for variant in self.variants():
                            out.append(
                                {
                                    "mixer": mixer,
                                    "regime": regime,
                                    "resolution": resolution,
                                    "attention_backend": backend,
                                    **variant._asdict(),
                                }
                            )
        return out
