"""Model and GPU profiles: the few numbers the roofline needs, kept as data files.

A profile is a small YAML mapping (camelCase fields, unknown fields rejected) that names
the public source of its figures. The shipped ones live in `data/models/` and
`data/gpus/` and are looked up by name; any other file can be given by path. A bad file
is an `InputError` naming the file and the field (`mbu: must be less than or equal to 1`).
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path
from typing import Annotated, TypeVar

from pydantic import Field, ValidationError, ValidationInfo, field_validator

from tandem.api.base import StrictModel
from tandem.api.loading import load_documents, validation_problems
from tandem.errors import InputError, Problem

_DATA = resources.files("tandem.sim.serving") / "data"

Count = Annotated[int, Field(ge=1, strict=True)]
Positive = Annotated[float, Field(gt=0, allow_inf_nan=False)]
Fraction = Annotated[float, Field(gt=0, le=1, allow_inf_nan=False)]


class ModelProfile(StrictModel):
    """A dense decoder-only transformer, as its config.json describes it."""

    name: str
    source: str = Field(min_length=1)  # the public config the figures come from
    params: Count
    layers: Count
    hidden_size: Count
    attention_heads: Count
    kv_heads: Count
    head_dim: Count
    intermediate_size: Count | None = None  # documentation (and the params check in tests)
    vocab_size: Count | None = None
    weight_bytes_per_param: Positive  # 2 for bf16, 1 for fp8
    kv_bytes_per_value: Positive  # bytes of one K or V element in the cache

    @field_validator("kv_heads")
    @classmethod
    def _grouped_query(cls, kv_heads: int, info: ValidationInfo) -> int:
        """Grouped-query attention shares each KV head among a whole number of query heads."""
        heads = info.data.get("attention_heads")
        if heads is not None and heads % kv_heads:
            raise ValueError(f"must divide attentionHeads ({heads})")
        return kv_heads

    @property
    def weight_bytes(self) -> float:
        """Bytes of all weights: what every decode step and every prefill batch reads once."""
        return self.params * self.weight_bytes_per_param

    @property
    def attention_width(self) -> int:
        """attention heads x head size: the width of Q (and of the attention output)."""
        return self.attention_heads * self.head_dim


class GpuProfile(StrictModel):
    """One GPU: datasheet peaks, and the assumed fractions of them a serving engine reaches."""

    name: str
    source: str = Field(min_length=1)  # the datasheet the peaks come from
    peak_tflops: Positive  # dense BF16 Tensor Core peak, 10^12 FLOP/s
    hbm_bandwidth_tbps: Positive = Field(alias="hbmBandwidthTBps")  # TB/s: 10^12 bytes/s
    hbm_capacity_gb: Positive = Field(alias="hbmCapacityGB")  # 10^9 bytes
    mfu: Fraction  # assumed model FLOPs utilisation (prefill, and decode when compute-bound)
    mbu: Fraction  # assumed memory-bandwidth utilisation (decode, and prefill's weight read)
    usable_hbm_fraction: Fraction  # assumed share of HBM for weights + KV cache

    @property
    def flops(self) -> float:
        """Achievable FLOP/s: peak x MFU."""
        return self.peak_tflops * 1e12 * self.mfu

    @property
    def bytes_per_s(self) -> float:
        """Achievable HBM bytes/s: peak x MBU."""
        return self.hbm_bandwidth_tbps * 1e12 * self.mbu

    @property
    def usable_bytes(self) -> float:
        """HBM bytes for weights + KV cache."""
        return self.hbm_capacity_gb * 1e9 * self.usable_hbm_fraction


def _names(kind: str) -> tuple[str, ...]:
    folder = _DATA / kind
    return tuple(sorted(entry.name.removesuffix(".yaml") for entry in folder.iterdir() if entry.name.endswith(".yaml")))


MODEL_NAMES: tuple[str, ...] = _names("models")
GPU_NAMES: tuple[str, ...] = _names("gpus")

_Profile = TypeVar("_Profile", ModelProfile, GpuProfile)


def model_profile(name_or_path: str | Path) -> ModelProfile:
    """A shipped model by name (`llama-3.1-70b`), or a profile file by path."""
    return _profile(ModelProfile, "models", MODEL_NAMES, name_or_path)


def gpu_profile(name_or_path: str | Path) -> GpuProfile:
    """A shipped GPU by name (`h100-sxm`), or a profile file by path."""
    return _profile(GpuProfile, "gpus", GPU_NAMES, name_or_path)


def parse_profile(kind: type[_Profile], source: str, text: str) -> _Profile:
    """Validate one profile document; problems carry `source` and the field path."""
    documents = [doc for doc in load_documents(source, text) if doc is not None]
    if len(documents) != 1:
        raise InputError(Problem("", f"must hold exactly one profile document, got {len(documents)}", source))
    raw = documents[0]
    if not isinstance(raw, dict):
        raise InputError(Problem("", "must be a mapping (an object)", source))
    try:
        return kind.model_validate(raw)
    except ValidationError as exc:
        raise InputError(validation_problems(raw, exc, source)) from None


def _profile(kind: type[_Profile], folder: str, names: tuple[str, ...], name_or_path: str | Path) -> _Profile:
    key = str(name_or_path)
    if key in names:
        return parse_profile(kind, f"{folder}/{key}.yaml", (_DATA / folder / f"{key}.yaml").read_text(encoding="utf-8"))
    path = Path(name_or_path)
    if not path.is_file():
        what = "model" if kind is ModelProfile else "GPU"
        raise InputError(Problem("", f"unknown {what} {key!r}: not one of {', '.join(names)} and no such file"))
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(Problem("", f"cannot read: {exc}", str(path))) from None
    return parse_profile(kind, str(path), text)
