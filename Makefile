# Two commands on a fresh machine: `make demo` and `make test`.
# Each creates the virtual environment in .venv when it is missing or stale.
PYTHON ?= python3.11
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: demo test fuzz bench fidelity lint clean scan-env engine-flags

$(STAMP): pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV) || python3 -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip==25.3
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	@touch $(STAMP)

demo: $(STAMP)
	$(BIN)/tandem plan --cluster examples/cluster.yaml examples/llama-70b.yaml examples/llama-405b.yaml examples/llama-8b.yaml
	$(BIN)/tandem simulate examples/scenarios/demo.yaml --out out/demo

test: $(STAMP)
	$(BIN)/lint-imports
	$(BIN)/mypy
	$(BIN)/python -m pytest -n 2 --dist loadfile

# Property tests with fresh seeds and FUZZ_SCALE times the examples (CI's are fixed).
FUZZ_SCALE ?= 10
fuzz: $(STAMP)
	TANDEM_HYPOTHESIS_PROFILE=explore TANDEM_FUZZ_SCALE=$(FUZZ_SCALE) $(BIN)/python -m pytest -n 2 --dist loadfile \
		tests/placement tests/coordination tests/autoscaling tests/backends tests/serving tests/traces

bench: $(STAMP)
	$(BIN)/python bench/placement.py
	$(BIN)/python bench/simulate.py
	$(BIN)/python bench/serving.py
	$(BIN)/python bench/controller.py
	$(BIN)/python bench/operator_http.py
	$(BIN)/python bench/webhook.py
	$(BIN)/python bench/faults.py

# The serving model against NVIDIA aiconfigurator's measured tables (a large optional extra).
fidelity: $(STAMP)
	$(BIN)/python -m pip install --quiet -e '.[calibrate]'
	$(BIN)/python bench/fidelity.py
	$(BIN)/python -m pytest tests/serving/test_fidelity.py

# checkov (manifest scanning, tests/deploy) pins packages the test tools cannot share: its own venv.
SCAN := .venv-scan
scan-env: $(SCAN)/bin/checkov
$(SCAN)/bin/checkov:
	@test -x $(SCAN)/bin/python || $(PYTHON) -m venv $(SCAN) || python3 -m venv $(SCAN)
	$(SCAN)/bin/python -m pip install --quiet checkov==3.3.30

# The serving examples' flags parsed by the engines' and routers' own argument parsers (SGLang,
# vLLM, vllm-router; sglang-router is a test dependency), each in a venv of its own from a pinned
# --no-deps list (requirements/engine-flags-*.txt: about 2 GB each for SGLang and vLLM, with the
# CPU build of torch); also checks tests/examples/engine_flags/*.json are what the parsers say.
ENGINES := sglang vllm vllm-router
engine-flags: $(STAMP)
	@for engine in $(ENGINES); do \
		test -x .venv-engine-$$engine/bin/python || $(PYTHON) -m venv .venv-engine-$$engine || python3 -m venv .venv-engine-$$engine; \
		.venv-engine-$$engine/bin/python -m pip install --quiet --no-deps -r requirements/engine-flags-$$engine.txt || exit 1; \
	done
	TANDEM_ENGINE_PARSERS=required $(BIN)/python -m pytest -p no:xdist tests/examples/test_engine_flags.py

clean:
	rm -rf $(VENV) $(SCAN) $(addprefix .venv-engine-,$(ENGINES)) .pytest_cache .hypothesis .mypy_cache build src/*.egg-info
