"""Request-level model of disaggregated serving: profiles, roofline costs, the event model.

One request's path through `ServingModel` (model.py), each step a named function; the
event that starts a step is named in `events.Event`, and the request's state in
`requests.RequestState` (docs/serving.md has the rules and their limits):

1. Arrival. `ServingModel.advance` reads the next arrival from the request table;
   `Router.arrive` (routing.py) keeps it until a prefill replica exists and
   `Router.send_to_prefill` queues it on the one with the fewest outstanding prompt
   tokens, scheduling `Event.PREFILL_START` if that replica is idle.
2. Prefill. `_on_prefill_start` -> `PrefillStage.start_batch` (prefill.py) takes it into
   an FCFS batch up to the token budget, minus what `PrefillStage.cached_prefix` finds in
   the replica's prefix cache, and schedules `Event.PREFILL_DONE`.
3. Prefilled. `_on_prefill_done` -> `PrefillStage.finish_batch`; its KV stays on the
   prefill replica and `Admission.enqueue` (admission.py) puts it in its unit's pool.
4. Admission. `Admission.admit` takes pool heads in prefill-end order;
   `Admission.choose_decode` picks the decode replica (load, then distance, then room)
   and `KvTransfers.start` (transfer.py) reserves its blocks and schedules
   `Event.TRANSFER_DONE` after `KvTransfers.seconds`.
5. First token. `_on_transfer_done` -> `KvTransfers.finish` frees the prefill replica's
   copy; `DecodeStage.receive` (decode.py) delivers the token that came with the KV (the
   TTFT) and completes a one-token answer.
6. Decode. Any other `DecodeStage.join`s the batch at the next iteration boundary:
   `DecodeStage.start_run` fixes the batch and schedules `Event.RUN_END` (a run is timed
   in closed form, batching.py; one event per run, not per token).
7. Completion. `_on_run_end` -> `DecodeStage.end_run` -> `DecodeStage.iterate` delivers
   the run's tokens and `Requests.complete` records e2e and ITL for those finished.

Off the straight path: `DecodeStage.preempt` (out of KV blocks; the request waits in the
replica's resume queue), and membership.py: a replica leaving (`Membership.leave_prefill`,
`Membership.leave_decode`) sends its requests back through `Membership.restart` and
`Router.give_back`; a draining one (`Membership.begin_drain`) leaves when idle
(`Membership.check_drained`) or at `Event.DRAIN_END` (`Membership.end_drain`).
`Measurements` (measure.py) reads signals, samples and results; `EngineCosts` (costs.py)
remembers the roofline's figures.
"""

from tandem.sim.serving.model import ServingModel
from tandem.sim.serving.replicas import ReplicaInfo
from tandem.sim.serving.profiles import (
    GPU_NAMES,
    MODEL_NAMES,
    GpuProfile,
    ModelProfile,
    gpu_profile,
    model_profile,
    parse_profile,
)
from tandem.sim.serving.results import ReplicaSamples, ServingResults
from tandem.sim.serving.roofline import (
    Parallel,
    decode_batch_limit,
    decode_step_parts,
    decode_step_seconds,
    decode_tokens_per_s_max,
    kv_bytes_per_token,
    kv_capacity_tokens,
    kv_transfer_gbps,
    kv_transfer_seconds,
    layout,
    prefill_seconds,
    prefill_tokens_per_s_max,
)

__all__ = [
    "GPU_NAMES",
    "MODEL_NAMES",
    "GpuProfile",
    "ModelProfile",
    "Parallel",
    "ReplicaInfo",
    "ReplicaSamples",
    "ServingModel",
    "ServingResults",
    "decode_batch_limit",
    "decode_step_parts",
    "decode_step_seconds",
    "decode_tokens_per_s_max",
    "gpu_profile",
    "kv_bytes_per_token",
    "kv_capacity_tokens",
    "kv_transfer_gbps",
    "kv_transfer_seconds",
    "layout",
    "model_profile",
    "parse_profile",
    "prefill_seconds",
    "prefill_tokens_per_s_max",
]
