# The operator's image: a slim Python pinned by digest, tandem's dependencies installed from a
# lock with hashes (requirements/operator.txt: the operator extra only — no plotting, no
# solver, no test tools — and the build backend), then tandem itself without dependencies;
# run as a non-root user. Rebuild the lock when pyproject.toml's pins change (its header
# says how); tests/deploy/test_image.py checks the two agree.
FROM python:3.11.11-slim-bookworm@sha256:081075da77b2b55c23c088251026fb69a7b2bf92471e491ff5fd75c192fd38e5 AS build
WORKDIR /src
COPY requirements/operator.txt ./requirements/operator.txt
RUN python -m venv /opt/tandem \
 && /opt/tandem/bin/pip install --no-cache-dir --require-hashes --only-binary=:all: -r requirements/operator.txt
COPY pyproject.toml README.md ./
COPY src ./src
RUN /opt/tandem/bin/pip install --no-cache-dir --no-deps --no-build-isolation .

FROM python:3.11.11-slim-bookworm@sha256:081075da77b2b55c23c088251026fb69a7b2bf92471e491ff5fd75c192fd38e5
COPY --from=build /opt/tandem /opt/tandem
RUN groupadd --gid 65532 tandem && useradd --uid 65532 --gid 65532 --no-create-home --shell /usr/sbin/nologin tandem
USER 65532:65532
ENV PATH=/opt/tandem/bin:$PATH PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1
EXPOSE 8080 8081 9443
ENTRYPOINT ["tandem"]
CMD ["operator", "--leader-elect"]
