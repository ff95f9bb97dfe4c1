"""Recognising an engine container (issue 28's contract): what the operator and the local
API server both read of a pod."""

from __future__ import annotations

from tandem.api.engines import engine_of, listening_ports, serving_role


def pod(*containers, annotations=None, role=None):
    labels = {"tandem.dev/role": role} if role else {}
    return {"metadata": {"labels": labels, "annotations": annotations or {}}, "spec": {"containers": list(containers)}}


def test_an_sglang_image_is_an_engine_with_its_flags_and_defaults():
    sglang = {"name": "engine", "image": "lmsysorg/sglang:v0.4.9", "command": ["python3", "-m", "sglang.launch_server"],
              "args": ["--model-path", "meta-llama/Llama-3.1-8B-Instruct", "--tp=2", "--disaggregation-mode", "prefill"]}
    engine = engine_of(pod({"name": "sidecar", "image": "busybox"}, sglang))
    assert engine is not None and (engine.kind, engine.container, engine.model, engine.tensor_parallel) == ("sglang", 1, "meta-llama/Llama-3.1-8B-Instruct", 2)
    assert (engine.port, engine.role, engine.bootstrap_port) == (30000, "prefill", 8998)
    assert listening_ports(engine, engine.role) == {"http": 30000, "bootstrap": 8998}


def test_vllm_serve_in_a_shell_line_with_its_role_from_the_kv_transfer_config():
    vllm = {"name": "e", "image": "example.com/mine:1", "command": ["/bin/sh", "-c", "vllm serve Qwen/Qwen3-8B --port 8100 -tp 4"],
            "args": ["--kv-transfer-config", '{"kv_connector": "NixlConnector", "kv_role": "kv_consumer"}']}
    engine = engine_of(pod(vllm))
    assert engine is not None and (engine.kind, engine.model, engine.port, engine.tensor_parallel, engine.role) == ("vllm", "Qwen/Qwen3-8B", 8100, 4, "decode")
    assert listening_ports(engine, "decode") == {"http": 8100}


def test_a_router_run_from_an_engine_image_is_no_engine():
    for command in (["python3", "-m", "sglang_router.launch_router", "--pd-disaggregation"], ["/usr/local/bin/smg", "launch"],
                    ["vllm-router", "--vllm-pd-disaggregation"]):
        assert engine_of(pod({"name": "router", "image": "lmsysorg/sglang:v0.5.23", "command": command})) is None, command
    server = engine_of(pod({"name": "e", "image": "lmsysorg/sglang:v0.5.23", "command": ["python3", "-m", "sglang.launch_server"]}))
    assert server is not None and server.kind == "sglang"


def test_pipeline_stages_and_a_named_bootstrap_port_are_read():
    sglang = {"name": "e", "image": "lmsysorg/sglang", "args": ["--tp-size=8", "--pp-size", "2", "--disaggregation-bootstrap-port=9001"],
              "ports": [{"name": "bootstrap", "containerPort": 9100}]}
    engine = engine_of(pod(sglang))
    assert engine is not None and (engine.tensor_parallel, engine.pipeline_parallel, engine.bootstrap_port) == (8, 2, 9100), \
        "the port the container declares as `bootstrap` is where it listens, and what the router is told"
    vllm = engine_of(pod({"name": "e", "image": "vllm/vllm-openai", "args": ["--pipeline-parallel-size", "4", "--kv-transfer-config", "{}"]}))
    assert vllm is not None and (vllm.pipeline_parallel, vllm.kv_connector) == (4, True)


def test_the_annotation_wins_and_names_the_container():
    marked = pod({"name": "a", "image": "vllm/vllm-openai"}, {"name": "b", "image": "mine", "args": ["--port=9000"]},
                 annotations={"tandem.dev/engine": "sglang", "tandem.dev/engine-container": "b"}, role="decode")
    engine = engine_of(marked)
    assert engine is not None and (engine.kind, engine.container, engine.port) == ("sglang", 1, 9000)
    assert serving_role(engine, marked) == "decode", "no --disaggregation-mode: the pod's role label"


def test_other_containers_are_no_engine_and_a_registry_port_is_no_tag():
    assert engine_of(pod({"name": "web", "image": "nginx:1.27", "args": ["--port", "80"]})) is None
    assert engine_of(pod()) is None
    engine = engine_of(pod({"name": "e", "image": "registry.example:5000/vllm/vllm-openai:v0.10@sha256:00"}))
    assert engine is not None and (engine.kind, engine.port, engine.model) == ("vllm", 8000, None)


def test_the_operator_and_the_local_api_server_read_an_engine_alike():
    from tandem.apiserver.engines.recognition import recognise

    pods = [
        pod({"name": "e", "image": "lmsysorg/sglang:v0.4.9", "args": ["--port=31000", "--disaggregation-mode", "prefill", "--disaggregation-bootstrap-port", "9001"]}),
        pod({"name": "e", "image": "mine", "command": ["sh", "-c", "vllm serve m --port 8100"], "args": ["--kv-transfer-config", '{"kv_role": "kv_producer"}']}),
        pod({"name": "a", "image": "busybox"}, {"name": "b", "image": "x", "args": ["--tp", "2"]}, annotations={"tandem.dev/engine": "sglang", "tandem.dev/engine-container": "gone"}, role="decode"),
        pod({"name": "e", "image": "nginx", "command": ["/bin/sh", "-c", "exec vllm serve m"]}),
        pod({"name": "e", "image": "vllm/vllm-openai:v0.10", "args": ["--model", "m", "-tp", "4"]}, role="decode"),
    ]
    for each in pods:
        mine, theirs = engine_of(each), recognise(each, None, [], ["h100-sxm"])
        assert (mine is None) == (theirs is None), each
        if mine is not None and theirs is not None:
            role = serving_role(mine, each)
            bootstrap = listening_ports(mine, role).get("bootstrap")
            assert (mine.kind, mine.port, role, mine.tensor_parallel, bootstrap) == (theirs.engine, theirs.port, theirs.role, theirs.tp, theirs.bootstrap_port), each
