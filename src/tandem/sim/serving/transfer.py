"""KV-cache transfer from a prefill replica to a decode replica.

A transfer moves the prompt's KV at the Gbit/s it gets: the NICs of the smaller replica's
ranks, capped by the link between the two nodes shared fairly with the transfers in
flight over the same uplink when it starts; admitted the moment its prefill ends, it
streams layer by layer behind that prefill. The first token reaches the user when the
transfer completes (docs/serving.md, "KV transfer").
"""

from __future__ import annotations

from typing import Callable

from tandem.errors import InputError, Problem
from tandem.sim.serving import roofline
from tandem.sim.serving.events import Event, EventQueue
from tandem.sim.serving.profiles import GpuProfile, ModelProfile
from tandem.sim.serving.replicas import DecodeReplica, PrefillReplica
from tandem.sim.serving.requests import Requests, RequestState


class KvTransfers:
    """Transfers in flight, and the link bandwidths they read."""

    def __init__(
        self,
        model: ModelProfile,
        gpu: GpuProfile,
        requests: Requests,
        events: EventQueue,
        bandwidth_gbps: Callable[[str, str], float | None],
        unknown_bandwidth_gbps: float | None,
    ) -> None:
        self.model = model
        self.gpu = gpu
        self.requests = requests
        self.events = events
        self._bandwidth_of = bandwidth_gbps
        self._unknown_gbps = unknown_bandwidth_gbps
        self.in_flight: dict[int, tuple[str, str, float]] = {}  # request -> (from node, to node, end)
        self._links: dict[str, dict[str, float]] = {}  # from node -> to node -> Gbit/s, as looked up
        self._raw_bandwidths: dict[tuple[str, str], float | None] = {}

    def links_from(self, a: str) -> dict[str, float]:
        """Gbit/s from node `a` to each node `bandwidth` was asked for so far (read-only)."""
        links = self._links.get(a)
        if links is None:
            links = self._links[a] = {}
        return links

    def bandwidth(self, a: str, b: str) -> float:
        """Gbit/s of the link between nodes `a` and `b` (the fallback where it is unknown)."""
        links = self._links.get(a)
        value = links.get(b) if links is not None else None
        if value is None:
            raw = self._bandwidth_of(a, b)
            if raw is None:
                if self._unknown_gbps is None:
                    raise InputError(
                        Problem(
                            "",
                            f"no link bandwidth between nodes {a!r} and {b!r}: "
                            "state linkBandwidthGbps for their lowest common level",
                        )
                    )
                raw = self._unknown_gbps
            value = float(raw)
            if not value > 0:
                raise InputError(Problem("", f"link bandwidth between nodes {a!r} and {b!r} must be > 0 Gbit/s, got {raw!r}"))
            self.links_from(a)[b] = value
        return value

    def start(self, request: int, source: PrefillReplica, target: DecodeReplica, need: int) -> None:
        """Reserve `need` blocks on the decode replica and send the KV; its arrival is scheduled."""
        requests = self.requests
        now = self.events.now
        target.held += need
        requests.blocks[request] = need
        if target.run is None:
            target.peak_blocks = max(target.peak_blocks, target.held)
        target.transferring.add(request)
        requests.decode_of[request] = target
        requests.decode_replica[request] = target.index
        seconds = self.seconds(request, source, target)
        self.in_flight[request] = (source.info.node, target.info.node, now + seconds)
        requests.transfer_s[request] += seconds
        requests.state[request] = RequestState.TRANSFERRING
        self.events.schedule(now + seconds, Event.TRANSFER_DONE, request, int(requests.generation[request]))

    def seconds(self, request: int, source: PrefillReplica, target: DecodeReplica) -> float:
        """The KV transfer's cost (docs/serving.md, "KV transfer"): its Gbit/s is the NICs of
        the smaller replica (one per GPU) capped by the link between the two nodes, shared
        fairly with the transfers in flight over the same uplink as it starts; admitted the
        moment its prefill ends, it streams layer by layer behind that prefill."""
        now = self.events.now
        a, b = source.info.node, target.info.node
        link = self.bandwidth(a, b)
        gbps = roofline.kv_transfer_gbps(
            self.gpu, min(source.info.gpus, target.info.gpus), link, 1 + self._sharing(a, b, link), same_node=a == b
        )
        overlap = 0.0
        if self.requests.ready_at[request] == now and source.ends and source.ends[-1] == now:
            overlap = source.ends[-1] - source.starts[-1]  # the batch that made this KV just ended
        return roofline.kv_transfer_seconds(
            self.model, self.requests.prompt(request), gbps, latency_s=self.gpu.transfer_latency_us * 1e-6, overlap_s=overlap
        )

    def finish(self, request: int) -> tuple[PrefillReplica, DecodeReplica]:
        """The KV has arrived (step 5 of the path): the prefill replica lets go of it. Returns (from, to)."""
        requests = self.requests
        self.in_flight.pop(request, None)
        decode = requests.decode_of[request]
        source = requests.prefill_of.pop(request)
        source.holding.discard(request)
        decode.transferring.discard(request)
        return source, decode

    def _sharing(self, a: str, b: str, link: float) -> int:
        """Transfers in flight that cross an uplink a transfer from node `a` to node `b`
        crosses. The domain below the nodes' lowest common level is the set of nodes nearer
        to `a` than `b` is (a bandwidth above `link`); a transfer crosses its uplink when one
        end is inside and the other is not. The larger count of `a`'s and `b`'s side."""
        now = self.events.now
        self.in_flight = {r: flight for r, flight in self.in_flight.items() if flight[2] > now}
        if a == b:
            return 0  # within a node: NVLink, no shared uplink
        out = into = 0
        for c, d, _ in self.in_flight.values():
            out += self._near(a, c, link) != self._near(a, d, link)
            into += self._near(b, c, link) != self._near(b, d, link)
        return max(out, into)

    def _near(self, x: str, y: str, link: float) -> bool:
        """y is in x's domain below a link of `link` Gbit/s (a pair of unknown bandwidth is far)."""
        if x == y:
            return True
        key = (x, y)
        if key not in self._raw_bandwidths:
            self._raw_bandwidths[key] = self._bandwidth_of(x, y)
        value = self._raw_bandwidths[key]
        return value is not None and value > link
