"""A group's metrics source chosen from its `spec.autoscaling.metrics` over the operator's
flags (pure): the group's word wins field by field, Prometheus with no server anywhere is
no source with a message saying what to set, and groups configured alike get equal
configurations (so the operator builds one source for them). Also the TGI mapping of
docs/autoscaling.md, and what a mapping that leaves a figure out reads."""

from __future__ import annotations

import math
import re
from pathlib import Path

import yaml
from hypothesis import given
from hypothesis import strategies as st

from tandem.api.autoscaling import MetricsSpec, _query_template
from tandem.autoscaling.engine_metrics import VLLM, Sample, read_pod, renamed
from tandem.autoscaling.metrics_source import (
    OPERATOR_HAS_NONE,
    NoSource,
    PodsSource,
    PrometheusSource,
    SourceDefaults,
    choose_source,
)
from tandem.autoscaling.prometheus_queries import ENGINE_QUERIES, default_queries, with_queries

DOC = Path(__file__).resolve().parents[2] / "docs" / "autoscaling.md"
PROM = "http://prometheus.monitoring:9090"


def spec(**fields: object) -> MetricsSpec:
    return MetricsSpec.model_validate(fields)


def test_without_a_block_the_operators_flags_choose() -> None:
    assert choose_source(None, SourceDefaults("pods", None, 30.0)) == PodsSource(30.0)
    assert choose_source(None, SourceDefaults("prometheus", PROM, 60.0)) == PrometheusSource(PROM, 60.0)
    assert choose_source(None, SourceDefaults("none")) == NoSource(OPERATOR_HAS_NONE)
    assert choose_source(spec(), SourceDefaults("pods")) == PodsSource(60.0), "an empty block is no block"


def test_the_group_overrides_the_source_and_the_server_field_by_field() -> None:
    to_prometheus = spec(source="prometheus", prometheus={"url": "http://127.0.0.1:9090/prom"})
    assert choose_source(to_prometheus, SourceDefaults("pods", PROM)) == PrometheusSource("http://127.0.0.1:9090/prom", 60.0)
    assert choose_source(spec(source="prometheus"), SourceDefaults("pods", PROM)) == PrometheusSource(PROM, 60.0), "the flag's server"
    assert choose_source(spec(source="pods", pods={"port": "metrics", "path": "/prometheus/metrics"}), SourceDefaults("prometheus", PROM)) == (
        PodsSource(60.0, port="metrics", path="/prometheus/metrics"))
    assert choose_source(spec(source="pods"), SourceDefaults("none")) == PodsSource(60.0), "a group may read what the operator does not by default"


def test_a_group_that_says_where_to_read_on_one_side_reads_there_without_naming_the_source() -> None:
    assert choose_source(spec(prometheus={"url": "http://127.0.0.1:9090"}), SourceDefaults("pods")) == (
        PrometheusSource("http://127.0.0.1:9090", 60.0)), "a server the group names is not ignored"
    assert choose_source(spec(pods={"port": 9400}), SourceDefaults("prometheus", PROM)) == PodsSource(60.0, port=9400)
    assert choose_source(spec(pods={"path": "/metrics"}), SourceDefaults("none")) == PodsSource(60.0)
    both = spec(prometheus={"url": "http://127.0.0.1:9090"}, pods={"port": 9400})
    assert choose_source(both, SourceDefaults("pods")) == PodsSource(60.0, port=9400), "both sides: the flag chooses"
    assert choose_source(spec(source="pods", prometheus={"url": PROM}), SourceDefaults("prometheus", PROM)) == PodsSource(60.0)


def test_prometheus_with_no_server_anywhere_is_no_source_saying_what_to_set() -> None:
    got = choose_source(spec(source="prometheus"), SourceDefaults("pods", None))
    assert isinstance(got, NoSource)
    assert got.message.startswith("the metrics source is prometheus (spec.autoscaling.metrics.source) but no server is named")
    assert "spec.autoscaling.metrics.prometheus.url" in got.message and "--prometheus-url" in got.message
    by_flag = choose_source(None, SourceDefaults("prometheus", None))
    assert isinstance(by_flag, NoSource) and "(the operator's --metrics-source)" in by_flag.message


def test_names_and_queries_are_carried_sorted_so_groups_configured_alike_share_a_configuration() -> None:
    a = spec(names={"waiting": "q", "running": "r"}, prometheus={"queries": {"busy": "b{$selector}", "waiting": "w{$selector}"}})
    b = MetricsSpec.model_validate(yaml.safe_load("{prometheus: {queries: {waiting: 'w{$selector}', busy: 'b{$selector}'}}, names: {running: r, waiting: q}}"))
    for defaults in (SourceDefaults("pods"), SourceDefaults("prometheus", PROM)):
        assert choose_source(a, defaults) == choose_source(b, defaults) and hash(choose_source(a, defaults)) == hash(choose_source(b, defaults))
    assert choose_source(a, SourceDefaults("pods")) == PodsSource(60.0, (("running", "r"), ("waiting", "q")))
    assert choose_source(a, SourceDefaults("prometheus", PROM)) == PrometheusSource(
        PROM, 60.0, (("running", "r"), ("waiting", "q")), (("busy", "b{$selector}"), ("waiting", "w{$selector}")))


SOURCES = st.sampled_from([None, "pods", "prometheus"])
URLS = st.sampled_from([None, "http://a:9090", "https://b"])


@given(group_source=SOURCES, group_url=URLS, flag_source=st.sampled_from(["pods", "prometheus", "none"]), flag_url=URLS)
def test_the_choice_is_the_groups_word_else_the_flags(group_source, group_url, flag_source, flag_url) -> None:
    fields: dict[str, object] = {"source": group_source} if group_source else {}
    if group_url:
        fields["prometheus"] = {"url": group_url}
    got = choose_source(spec(**fields), SourceDefaults(flag_source, flag_url, 60.0))
    effective = group_source or ("prometheus" if group_url else flag_source)  # a server named is read from
    url = group_url or flag_url
    if effective == "pods":
        assert got == PodsSource(60.0)
    elif effective == "prometheus" and url is not None:
        assert got == PrometheusSource(url, 60.0)
    else:
        assert isinstance(got, NoSource)
        assert ("--metrics-source" if effective == "none" else "--prometheus-url") in got.message, "the message says what to set"


def test_the_documented_tgi_mapping_validates_and_reads_tgis_own_series() -> None:
    """docs/autoscaling.md maps Hugging Face TGI's series (its docs' metrics reference); an
    exposition in TGI's names is read through it."""
    blocks = re.findall(r"```yaml\n(.*?)```", DOC.read_text(encoding="utf-8"), re.S)
    block = next(b for b in blocks if "tgi_queue_size" in b)
    metrics = MetricsSpec.model_validate(yaml.safe_load(block)["metrics"])
    config = choose_source(metrics, SourceDefaults("pods"))
    assert isinstance(config, PodsSource)
    names = renamed(None, dict(config.names))
    exposition = [Sample("tgi_queue_size", (), 3.0), Sample("tgi_batch_current_size", (), 5.0), Sample("tgi_request_success_total", (), 40.0),
                  Sample("tgi_request_generated_tokens_sum", (), 9000.0), Sample("tgi_request_input_length_sum", (), 12000.0)]
    reading = read_pod(exposition, names)
    assert reading is not None and (reading.waiting, reading.running, reading.requests) == (3.0, 5.0, 40.0)
    assert (reading.generation_tokens, reading.prompt_tokens) == (9000.0, 12000.0)
    assert math.isnan(reading.kv_usage), "TGI exports no KV-cache gauge: not measured"


def test_a_figure_an_engine_mapping_leaves_out_is_not_measured_never_zero() -> None:
    names = renamed(None, {"waiting": "acme_queue"})
    reading = read_pod([Sample("acme_queue", (), 2.0)], names)
    assert reading is not None and reading.waiting == 2.0
    assert math.isnan(reading.generation_tokens) and math.isnan(reading.requests), "a counter mapped to nothing has not counted 0"
    assert renamed(VLLM, {"waiting": "my_queue"}) == VLLM.__class__(**{**VLLM.__dict__, "waiting": ("my_queue",)}), "vLLM's names for the rest"


def test_queries_are_made_from_the_groups_names_and_its_own_templates_replace_them() -> None:
    queries = with_queries(default_queries(renamed(None, {"waiting": "tgi_queue_size"})), {"busy": "max by (pod) (x{$selector})"})
    assert "tgi_queue_size{$selector}" in queries.waiting and "tgi_queue_size{$selector}" in queries.scrapes
    assert queries.busy == "max by (pod) (x{$selector})"
    assert queries.generation_tokens == "" and queries.ttft_p90 == "", "a figure with no series has no query: not asked"
    assert with_queries(ENGINE_QUERIES["vllm"], {}) == ENGINE_QUERIES["vllm"]


METRIC_NAMES = st.from_regex(r"[a-zA-Z_:][a-zA-Z0-9_:]{0,30}", fullmatch=True)
FIGURES = ("waiting", "running", "kv_usage", "prompt_tokens", "generation_tokens", "requests", "ttft", "itl")


@given(st.dictionaries(st.sampled_from(FIGURES), METRIC_NAMES))
def test_every_query_tandem_makes_from_a_groups_names_is_a_valid_template_for_its_own(names) -> None:
    """The template rule (`spec.autoscaling.metrics.prometheus.queries`) accepts what tandem itself asks."""
    made = default_queries(renamed(None, names))
    for engine in (made, *ENGINE_QUERIES.values()):
        for query in vars(engine).values():
            if query:
                assert _query_template(query) == query


@given(st.text(max_size=200))
def test_any_text_is_a_template_or_one_value_error(text) -> None:
    try:
        _query_template(text)
    except ValueError as exc:
        assert str(exc) and "\n" not in str(exc)
