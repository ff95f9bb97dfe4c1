# The operator's image: a slim Python, tandem with only the operator's extra (no plotting,
# no solver, no test tools), pinned by pyproject.toml, run as a non-root user.
FROM python:3.11.11-slim-bookworm AS build
WORKDIR /src
COPY pyproject.toml README.md ./
COPY src ./src
RUN python -m venv /opt/tandem \
 && /opt/tandem/bin/pip install --no-cache-dir --upgrade pip==25.3 \
 && /opt/tandem/bin/pip install --no-cache-dir '.[operator]'

FROM python:3.11.11-slim-bookworm
COPY --from=build /opt/tandem /opt/tandem
RUN groupadd --gid 65532 tandem && useradd --uid 65532 --gid 65532 --no-create-home --shell /usr/sbin/nologin tandem
USER 65532:65532
ENV PATH=/opt/tandem/bin:$PATH PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1
EXPOSE 8080 8081 9443
ENTRYPOINT ["tandem"]
CMD ["operator", "--leader-elect"]
