"""`/metrics` of a stand-in, in its engine's own metric names (prometheus-client).

SGLang's names are those of sgl-project/sglang `python/sglang/srt/metrics/collector.py`
(SchedulerMetricsCollector, TokenizerMetricsCollector; label `model_name`), vLLM's those of
vllm-project/vllm `vllm/v1/metrics/loggers.py` (PrometheusStatLogger; labels `model_name`,
`engine`). `tandem_engine_standin_info` says what times the stand-in.
"""

from __future__ import annotations

from typing import Callable

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

from tandem.apiserver.engines.recognition import EngineSpec

TTFT_BUCKETS = (0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0, 160.0, 640.0)
ITL_BUCKETS = (0.001, 0.002, 0.005, 0.01, 0.015, 0.02, 0.025, 0.03, 0.04, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0)
E2E_BUCKETS = (0.1, 0.25, 0.5, 1.0, 2.0, 5.0, 10.0, 20.0, 40.0, 60.0, 120.0, 300.0, 600.0)


class EngineMetrics:
    def __init__(self, spec: EngineSpec, profiled: bool):
        self.registry = CollectorRegistry()
        labels = {"model_name": spec.served_model} if spec.engine == "sglang" else {"model_name": spec.served_model, "engine": "0"}
        names = list(labels)
        r = self.registry
        s = spec.engine == "sglang"

        def gauge(name: str, doc: str) -> Gauge:
            return Gauge(name, doc, names, registry=r)

        def counter(name: str, doc: str, more: tuple[str, ...] = ()) -> Counter:
            return Counter(name, doc, [*names, *more], registry=r)

        def histogram(name: str, doc: str, buckets: tuple[float, ...]) -> Histogram:
            return Histogram(name, doc, names, buckets=buckets, registry=r)

        if s:
            self._running = [gauge("sglang:num_running_reqs", "The number of running requests.")]
            self._waiting = [gauge("sglang:num_queue_reqs", "The number of requests in the waiting queue.")]
            self._usage = [gauge("sglang:token_usage", "The token usage.")]
            self._used: Gauge | None = gauge("sglang:num_used_tokens", "The number of used tokens.")
            self._prompt = counter("sglang:prompt_tokens", "Number of prefill tokens processed.")
            self._generation = counter("sglang:generation_tokens", "Number of generation tokens processed.")
            self._requests = counter("sglang:num_requests", "Number of requests processed.")
            self._ttft = histogram("sglang:time_to_first_token_seconds", "Histogram of time to first token in seconds.", TTFT_BUCKETS)
            self._itl = [histogram("sglang:inter_token_latency_seconds", "Histogram of inter-token latency in seconds.", ITL_BUCKETS)]
            self._e2e = histogram("sglang:e2e_request_latency_seconds", "Histogram of End-to-end request latency in seconds", E2E_BUCKETS)
        else:
            self._running = [gauge("vllm:num_requests_running", "Number of requests in model execution batches.")]
            self._waiting = [gauge("vllm:num_requests_waiting", "Number of requests waiting to be processed.")]
            self._usage = [gauge("vllm:kv_cache_usage_perc", "KV-cache usage. 1 means 100 percent usage."),
                           gauge("vllm:gpu_cache_usage_perc", "GPU KV-cache usage. 1 means 100 percent usage (the name before vLLM V1).")]
            self._used = None
            self._prompt = counter("vllm:prompt_tokens", "Number of prefill tokens processed.")
            self._generation = counter("vllm:generation_tokens", "Number of generation tokens processed.")
            self._requests = counter("vllm:request_success", "Count of successfully processed requests.", ("finished_reason",))
            self._ttft = histogram("vllm:time_to_first_token_seconds", "Histogram of time to first token in seconds.", TTFT_BUCKETS)
            self._itl = [histogram("vllm:inter_token_latency_seconds", "Histogram of inter-token latency in seconds.", ITL_BUCKETS),
                         histogram("vllm:time_per_output_token_seconds", "Histogram of time per output token in seconds.", ITL_BUCKETS)]
            self._e2e = histogram("vllm:e2e_request_latency_seconds", "Histogram of e2e request latency in seconds.", E2E_BUCKETS)
        self._values = list(labels.values())
        self._finished = [] if s else ["length"]  # vLLM labels a finished request by why it ended: here always its length
        info = Gauge("tandem_engine_standin_info", "A tandem engine stand-in: its engine, role, model profile and GPU; "
                     "timing=model when tandem's serving model times it, fixed when the model has no profile.",
                     ["engine", "role", "profile", "gpu", "timing"], registry=r)
        info.labels(spec.engine, spec.role or "both", spec.profile or "", spec.gpu, "model" if profiled else "fixed").set(1)

    def observe(self, kind: str, value: float) -> None:
        if kind == "prompt_tokens":
            self._prompt.labels(*self._values).inc(value)
        elif kind == "generation_tokens":
            self._generation.labels(*self._values).inc(value)
        elif kind == "ttft":
            self._ttft.labels(*self._values).observe(value)
        elif kind == "itl":
            for histogram in self._itl:
                histogram.labels(*self._values).observe(value)
        elif kind == "e2e":
            self._e2e.labels(*self._values).observe(value)
            self._requests.labels(*self._values, *self._finished).inc()

    def exposition(self, load: Callable[[], tuple[int, int, int]], capacity: int, usage: Callable[[int, int], float]) -> bytes:
        waiting, running, held = load()
        for g in self._waiting:
            g.labels(*self._values).set(waiting)
        for g in self._running:
            g.labels(*self._values).set(running)
        for g in self._usage:
            g.labels(*self._values).set(usage(held, capacity))
        if self._used is not None:
            self._used.labels(*self._values).set(held)
        return generate_latest(self.registry)
