"""Model and GPU profiles: the few numbers the roofline needs, kept as data files.

A profile is a small YAML mapping (camelCase fields, unknown fields rejected) that names
the public source of its figures. The shipped ones live in `data/models/` and
`data/gpus/` and are looked up by name; any other file can be given by path. A bad file
is an `InputError` naming the file and the field (`mbu: must be less than or equal to 1`).

A model profile describes a decoder-only transformer of the Llama/Mixtral shape: grouped-
query attention, a gated (SwiGLU) MLP, optionally a mixture of experts in place of the
MLP. Its `params` must be what those shapes add up to (within 1%): a model with parts the
profile has no field for (shared experts, latent attention, biases of real size) does not
add up, and is refused with an error on `params` rather than costed wrongly.
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
GIB = 1 << 30

Count = Annotated[int, Field(ge=1, strict=True)]
Positive = Annotated[float, Field(gt=0, allow_inf_nan=False)]
NonNegative = Annotated[float, Field(ge=0, allow_inf_nan=False)]
Fraction = Annotated[float, Field(gt=0, le=1, allow_inf_nan=False)]

# How far the stated `params` may be from what the shapes add up to (norm and router
# details, rounding in a model card).
PARAMS_TOLERANCE = 0.01


class ModelProfile(StrictModel):
    """A decoder-only transformer, as its config.json describes it (dense, or a mixture of experts)."""

    name: str
    source: str = Field(min_length=1)  # the public config the figures come from
    layers: Count  # num_hidden_layers
    hidden_size: Count
    attention_heads: Count
    kv_heads: Count
    head_dim: Count
    intermediate_size: Count  # the gated MLP's width; of one expert in a mixture of experts
    vocab_size: Count
    tied_embeddings: bool = False  # tie_word_embeddings: the LM head shares the embedding matrix
    experts: Count = 1  # num_local_experts; 1 = dense
    experts_per_token: Count = 1  # num_experts_per_tok (top-k routing)
    weight_bytes_per_param: Positive  # 2 for bf16, 1 for fp8
    kv_bytes_per_value: Positive  # bytes of one K or V element in the cache
    # Last, so that its check sees every shape above.
    params: Count  # all parameters, embeddings included

    @field_validator("kv_heads")
    @classmethod
    def _grouped_query(cls, kv_heads: int, info: ValidationInfo) -> int:
        """Grouped-query attention shares each KV head among a whole number of query heads."""
        heads = info.data.get("attention_heads")
        if heads is not None and heads % kv_heads:
            raise ValueError(f"must divide attentionHeads ({heads})")
        return kv_heads

    @field_validator("experts_per_token")
    @classmethod
    def _routing(cls, top_k: int, info: ValidationInfo) -> int:
        experts = info.data.get("experts")
        if experts is not None and top_k > experts:
            raise ValueError(f"must be at most experts ({experts})")
        return top_k

    @field_validator("params")
    @classmethod
    def _shapes_add_up(cls, params: int, info: ValidationInfo) -> int:
        """The stated count must be what the shapes describe, or the roofline would cost another model."""
        shapes = ("layers", "hidden_size", "attention_heads", "kv_heads", "head_dim", "intermediate_size", "vocab_size", "experts")
        if any(name not in info.data for name in shapes):
            return params  # a shape is itself in error; that one is reported
        d = info.data
        implied = _implied_params(
            d["layers"], d["hidden_size"], d["attention_heads"], d["kv_heads"], d["head_dim"],
            d["intermediate_size"], d["vocab_size"], d["experts"], d.get("tied_embeddings", False),
        )
        if abs(params - implied) > PARAMS_TOLERANCE * implied:
            raise ValueError(
                f"the shapes describe {implied:,} parameters (attention, {d['experts']} gated MLP(s) of "
                f"intermediateSize, router, norms, embeddings), not {params:,}: the profile cannot describe "
                "this model (shared experts, latent attention or other parts it has no field for)"
            )
        return params

    # ------------------------------------------------------------------ derived shapes

    @property
    def attention_width(self) -> int:
        """attention heads x head size: the width of Q (and of the attention output)."""
        return self.attention_heads * self.head_dim

    @property
    def is_moe(self) -> bool:
        return self.experts > 1

    @property
    def attention_params(self) -> int:
        """Per layer: the q, k, v and o projections."""
        h, kv_width = self.hidden_size, self.kv_heads * self.head_dim
        return 2 * h * self.attention_width + 2 * h * kv_width

    @property
    def expert_params(self) -> int:
        """Per layer, one gated MLP (gate, up, down): one expert, or the whole MLP of a dense model."""
        return 3 * self.hidden_size * self.intermediate_size

    @property
    def router_params(self) -> int:
        """Per layer, the router's hidden x experts matrix (none in a dense model)."""
        return self.hidden_size * self.experts if self.is_moe else 0

    @property
    def lm_head_params(self) -> int:
        return self.vocab_size * self.hidden_size

    @property
    def active_params(self) -> int:
        """Parameters one token uses: all but the experts it is not routed to."""
        return self.params - self.layers * (self.experts - self.experts_per_token) * self.expert_params

    @property
    def weight_bytes(self) -> float:
        """Bytes of all weights, embeddings included: what HBM must hold."""
        return self.params * self.weight_bytes_per_param


def _implied_params(
    layers: int, hidden: int, heads: int, kv_heads: int, head_dim: int, intermediate: int, vocab: int, experts: int, tied: bool
) -> int:
    attention = 2 * hidden * heads * head_dim + 2 * hidden * kv_heads * head_dim
    mlp = experts * 3 * hidden * intermediate + (hidden * experts if experts > 1 else 0)
    per_layer = attention + mlp + 2 * hidden  # two RMSNorm vectors
    return layers * per_layer + (1 if tied else 2) * vocab * hidden + hidden  # embeddings, LM head, final norm


class GpuProfile(StrictModel):
    """One GPU in its node as a serving engine uses it: datasheet figures, and fitted or
    assumed fractions and overheads (each says where it came from in the data file)."""

    name: str
    source: str = Field(min_length=1)  # the datasheets and tables the figures come from
    # datasheet
    peak_tflops: Positive  # dense BF16 Tensor Core peak, 10^12 FLOP/s
    hbm_bandwidth_tbps: Positive = Field(alias="hbmBandwidthTBps")  # TB/s: 10^12 bytes/s
    hbm_gib: Positive = Field(alias="hbmGiB")  # HBM in GiB (2^30 bytes)
    gpus_per_node: Count  # GPUs one NVLink domain (node) holds
    nvlink_gbps: Positive = Field(alias="nvlinkGBps")  # NVLink GB/s per GPU per direction
    nic: str = Field(min_length=1)  # the node's scale-out NICs, e.g. "8 x ConnectX-7 400 Gb/s"
    nic_gbps: Positive  # Gbit/s of the NIC each GPU (tensor-parallel rank) sends through
    # engine: compute and memory
    mfu: Fraction  # share of peak a large GEMM reaches
    mbu: Fraction  # share of HBM bandwidth a weight or KV read reaches
    attention_efficiency: Fraction  # share of peak prefill (flash) attention reaches
    ridge_exponent: Annotated[float, Field(ge=1, le=64, allow_inf_nan=False)]  # p of the smooth max (a^p + b^p)^(1/p)
    layer_overhead_us: NonNegative  # per layer and forward pass: launches, norms' and small kernels' floor
    prefill_layer_overhead_us: NonNegative  # added per layer in prefill (the prefill intercept)
    iteration_overhead_us: NonNegative  # per forward pass: scheduling, sampling, host work
    # engine: tensor-parallel all-reduce over NVLink
    all_reduce_latency_us: NonNegative
    # per step of the log2(tp) steps of a tree (recursive-doubling) all-reduce: the part of
    # its latency that grows with the TP degree. 0 in the bundled profiles, whose vLLM
    # custom all-reduce is flat in TP; `tandem profile fit` fits it to stacks that are not.
    all_reduce_step_latency_us: NonNegative = 0.0
    all_reduce_efficiency: dict[Count, Fraction]  # by TP degree: ring bus bandwidth / NVLink bandwidth
    # KV transfer between replicas
    nic_efficiency: Fraction
    transfer_latency_us: NonNegative  # per transfer: connection and descriptor setup
    # memory
    memory_utilization: Fraction  # share of HBM the engine may use (vLLM gpu_memory_utilization)
    reserved_gib: NonNegative = Field(alias="reservedGiB")  # per GPU: CUDA context, cuBLAS workspace, CUDA graphs
    comm_buffer_gib: NonNegative = Field(alias="commBufferGiB")  # per GPU when tensor-parallel: NCCL buffers

    @field_validator("all_reduce_efficiency")
    @classmethod
    def _has_degrees(cls, table: dict[int, float]) -> dict[int, float]:
        if not table:
            raise ValueError("must give the efficiency of at least one tensor-parallel degree")
        return dict(sorted(table.items()))

    @property
    def flops(self) -> float:
        """GEMM FLOP/s: peak x MFU."""
        return self.peak_tflops * 1e12 * self.mfu

    @property
    def bytes_per_s(self) -> float:
        """HBM bytes/s of a weight or KV read: peak x MBU."""
        return self.hbm_bandwidth_tbps * 1e12 * self.mbu

    @property
    def hbm_bytes(self) -> float:
        return self.hbm_gib * GIB

    def all_reduce_efficiency_at(self, degree: int) -> float:
        """The stated efficiency of `degree`, else of the nearest stated degree below it (else the smallest)."""
        table = self.all_reduce_efficiency
        below = [d for d in table if d <= degree]
        return table[below[-1]] if below else table[min(table)]


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
    try:
        is_file = path.is_file()
    except OSError:  # a name too long for the file system, say: no such file either
        is_file = False
    if not is_file:
        what = "model" if kind is ModelProfile else "GPU"
        raise InputError(Problem("", f"unknown {what} {key!r}: not one of {', '.join(names)} and no such file"))
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(Problem("", f"cannot read: {exc}", str(path))) from None
    return parse_profile(kind, str(path), text)
