"""`ModelConfig`: the architecture of one model (mixer x regime x size).

Reused verbatim by the study spec (`trial.model`), benchmarks (`benchmark.model`), the CLI and
MLflow (`model.*` params), so every field here is searchable. The core fields are the ViT's;
each registered mixer or regime that declares a settings model owns the section of its name
(`model.ssog.num_gaussians`, `model.attention.backend`, `model.ode.rtol`; see
`vitscale.models.registry`). A config always holds every section, filled with defaults; only
the active mixer's and regime's are read when building.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator
from pydantic.fields import FieldInfo
from pydantic_core import InitErrorDetails

from vitscale.models import registry

# Upper bounds far beyond any ViT (ViT-G: width 1664, depth 48), so a typo such as `--mlp-ratio 1e30`
# or `--depth 100000` is one validation line instead of an overflow traceback or a build that runs
# for minutes.
MAX_WIDTH = 1 << 16
MAX_DEPTH = 1024
MAX_MLP_RATIO = 64.0
MAX_IMAGE_SIZE = 1 << 14
MAX_CHANNELS = 64
MAX_CLASSES = 1 << 20


def _error(err: dict[str, Any], prefix: tuple = ()) -> InitErrorDetails:
    return InitErrorDetails(
        type=err["type"], loc=(*prefix, *err["loc"]), input=err.get("input"), ctx=err.get("ctx") or {}
    )


def _schema_sections(schema: dict[str, Any], cls: type) -> None:
    """JSON Schema (editors, `vitscale study schema`): one object per registered settings section."""
    schema["additionalProperties"] = False
    for name, (kind, model) in registry.sections().items():
        sub = model.model_json_schema()
        sub["description"] = f"settings of the {name} {kind}"
        schema.setdefault("properties", {})[name] = sub


class ModelConfig(BaseModel):
    """One ViT: patch embedding, `depth` blocks of (mixer, MLP) stacked by `regime`, a head."""

    model_config = ConfigDict(extra="allow", json_schema_extra=_schema_sections)

    mixer: str = Field("attention", description="token mixer, a registered name (vitscale.models.MIXERS)")
    regime: str = Field("discrete", description="block stacking, a registered name (vitscale.models.REGIMES)")
    width: int = Field(64, ge=1, le=MAX_WIDTH, description="embedding dimension")
    depth: int = Field(
        4, ge=1, le=MAX_DEPTH, description="blocks (discrete), applications (looped), default t_end (ode)"
    )
    heads: int = Field(4, ge=1, le=MAX_WIDTH, description="heads (must divide width)")
    head_dim: int | None = Field(
        None,
        ge=1,
        le=MAX_WIDTH,
        description="width per head: when set, heads = width / head_dim (replacing any heads given), so "
        "heads follow width across a size sweep (as ViT-Ti/S/B keep 64-dim heads); null = heads as given",
    )
    mlp_ratio: float = Field(4.0, gt=0, le=MAX_MLP_RATIO, description="MLP hidden width / width")
    patch_size: int = Field(4, ge=1, le=MAX_IMAGE_SIZE, description="patch side in pixels")
    in_chans: int = Field(
        3, ge=1, le=MAX_CHANNELS, description="image channels; set from the data set in a trial"
    )
    num_classes: int = Field(
        10, ge=2, le=MAX_CLASSES, description="classes of the head; set from the data set in a trial"
    )
    image_size: int = Field(
        32, ge=1, le=MAX_IMAGE_SIZE, description="build resolution; set from data.resolution in a trial"
    )
    pos_embed: bool | None = Field(
        None,
        description="learned absolute position embedding; default: the mixer's choice "
        "(attention: yes, as in ViT; ssog: no, its kernels already see relative position)",
    )
    init: Literal["scaled", "timm"] = Field(
        "scaled",
        description="how weights start: scaled = linears with std 1/sqrt(3 fan_in) (timm's 0.02 at width "
        "768) and a 2-D sine-cosine position embedding; timm = timm's ViT (0.02 everywhere)",
    )
    layer_scale: float | None = Field(
        None,
        ge=0,
        description="LayerScale (CaiT): initial value of a learned per-channel gain on each residual "
        "branch; 0 = off; default: the regime's choice (discrete: off, the standard ViT; looped, ode: on), "
        "or the mixer's where the regime builds none and the mixer needs one (linear: 0.1)",
    )

    @model_validator(mode="wrap")
    @classmethod
    def _sections(cls, data: Any, handler: Any) -> ModelConfig:
        """Validate the core fields, then each registered section with its own settings model."""
        if not isinstance(data, dict):
            return handler(data)
        sections, moved = registry.sections(), registry.moved_keys()
        errors: list[InitErrorDetails] = []
        for key in data:
            if key in moved:
                message = f"moved to model.{moved[key]} (settings live in their mixer's or regime's section)"
                errors.append(_error({"type": "value_error", "loc": (key,), "input": data[key],
                                      "ctx": {"error": ValueError(message)}}))  # fmt: skip
            elif key not in cls.model_fields and key not in sections:
                errors.append(_error({"type": "extra_forbidden", "loc": (key,), "input": data[key]}))
        values = {}
        for name, (_, model) in sections.items():
            raw = data.get(name)
            try:
                values[name] = raw if isinstance(raw, model) else model.model_validate(raw or {})
            except ValidationError as exc:
                errors += [_error(e, (name,)) for e in exc.errors()]
        core = {k: v for k, v in data.items() if k in cls.model_fields}
        try:
            config = handler(core)
        except ValidationError as exc:
            if not errors:
                raise
            errors = [_error(e) for e in exc.errors()] + errors
        if errors:
            raise ValidationError.from_exception_data(cls.__name__, errors)
        config.__pydantic_extra__.update(values)
        return config

    @model_validator(mode="before")
    @classmethod
    def _heads_from_head_dim(cls, values: Any) -> Any:
        """head_dim decides heads. A given heads is replaced, not checked: a config dumped at one width
        carries its derived heads, and a sweep then sets another width on that dump."""
        if not isinstance(values, dict) or values.get("head_dim") is None:
            return values
        width, head_dim = values.get("width", cls.model_fields["width"].default), values["head_dim"]
        if not isinstance(width, int) or not isinstance(head_dim, int) or head_dim < 1:
            return values  # the field checks report it
        if width % head_dim:
            raise ValueError(f"head_dim: {head_dim} does not divide width {width}")
        return {**values, "heads": width // head_dim}

    @model_validator(mode="after")
    def _check_shapes(self) -> ModelConfig:
        if self.mixer not in registry.MIXERS:
            raise ValueError(f"mixer: unknown mixer {self.mixer!r}; choose one of {sorted(registry.MIXERS)}")
        if self.regime not in registry.REGIMES:
            raise ValueError(
                f"regime: unknown regime {self.regime!r}; choose one of {sorted(registry.REGIMES)}"
            )
        if self.width * self.mlp_ratio < 1:
            raise ValueError(
                f"mlp_ratio: {self.mlp_ratio} gives an MLP of no hidden unit at width {self.width}"
            )
        if self.width % self.heads:
            raise ValueError(f"heads: {self.heads} does not divide width {self.width}")
        if self.image_size % self.patch_size:
            raise ValueError(
                f"image_size: {self.image_size} is not divisible by patch_size {self.patch_size}"
            )
        for parts, name in ((registry.MIXERS, self.mixer), (registry.REGIMES, self.regime)):
            check = parts.fact(name, "check_config")  # rules spanning its settings and the core fields
            if check is not None:
                check(self)
        return self

    @classmethod
    def all_fields(cls) -> dict[str, FieldInfo]:
        """Core fields and one section field per registered settings model (what paths and flags walk)."""
        fields = dict(cls.model_fields)
        for name, (kind, model) in registry.sections().items():
            fields[name] = FieldInfo(annotation=model, default_factory=model, description=f"{name} {kind}")
        return fields

    @classmethod
    def leaves(cls) -> list[tuple[str, FieldInfo]]:
        """(dotted path, field) of every leaf, sections included: what flags, records and params list."""
        out: list[tuple[str, FieldInfo]] = []
        for name, info in cls.all_fields().items():
            if isinstance(info.annotation, type) and issubclass(info.annotation, BaseModel):
                out += [(f"{name}.{sub}", field) for sub, field in info.annotation.model_fields.items()]
            else:
                out.append((name, info))
        return out

    def settings(self, name: str) -> BaseModel | None:
        """The settings of mixer or regime `name` (defaults where the section was never set)."""
        extra = self.__pydantic_extra__ or {}
        if name in extra:
            return extra[name]
        section = registry.sections().get(name)
        return section[1]() if section else None

    def __getattr__(self, name: str) -> Any:
        section = registry.sections().get(name) if not name.startswith("_") else None
        if section is not None:
            return self.settings(name)
        return super().__getattr__(name)

    @property
    def resolved_layer_scale(self) -> float:
        """LayerScale's initial value as built (0.0 = off)."""
        if self.layer_scale is not None:
            return float(self.layer_scale)
        regime = registry.REGIMES.fact(self.regime, "default_layer_scale")
        mixer = registry.MIXERS.fact(self.mixer, "default_layer_scale")  # see mixers/__init__
        return float(regime or mixer or 0.0)

    @property
    def resolved_pos_embed(self) -> bool:
        """Whether the ViT adds a learned absolute position embedding, as built."""
        if self.pos_embed is not None:
            return self.pos_embed
        return bool(registry.MIXERS.fact(self.mixer, "wants_pos_embed"))

    def resolved(self) -> ModelConfig:
        """This config with the choices left to the mixer or regime made explicit (pos_embed,
        layer_scale): what `model info` and MLflow show, so arms whose defaults differ are
        compared on the values they were built with. Builds the same model."""
        return self.model_copy(
            update={"pos_embed": self.resolved_pos_embed, "layer_scale": self.resolved_layer_scale}
        )

    def unused_sections(self) -> list[str]:
        """The settings sections this model never reads (every mixer's and regime's but its own):
        left out of what a run logs, so an SSoG run shows no `attention.backend`."""
        return [name for name in registry.sections() if name not in (self.mixer, self.regime)]

    @property
    def grid(self) -> tuple[int, int]:
        side = self.image_size // self.patch_size
        return side, side
