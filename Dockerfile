# errscope: one image for the sidecar, the dashboard and the demo agent (docker-compose.yml).
# Slim Python base, a wheel built in a throw-away stage, a non-root user, a health check.
FROM python:3.11-slim AS build
# The scrub engine (engine/) is Rust: a minimal toolchain from rustup builds it into the
# wheel (about 2 minutes on 2 cores), and stays in this throw-away stage.
RUN apt-get update \
    && apt-get install -y --no-install-recommends curl ca-certificates gcc libc6-dev \
    && rm -rf /var/lib/apt/lists/* \
    && curl -sSf https://sh.rustup.rs | sh -s -- -y --profile minimal
ENV PATH=/root/.cargo/bin:$PATH
WORKDIR /src
COPY pyproject.toml README.md ./
COPY errscope ./errscope
COPY engine ./engine
COPY collector ./collector
COPY queries ./queries
COPY dashboards ./dashboards
RUN pip wheel --no-cache-dir --wheel-dir /wheels .

FROM python:3.11-slim
ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1
COPY --from=build /wheels /wheels
RUN pip install --no-cache-dir /wheels/*.whl \
    && rm -rf /wheels \
    && useradd --create-home --uid 10001 --shell /usr/sbin/nologin errscope \
    && mkdir -p /data \
    && chown errscope:errscope /data
USER errscope
WORKDIR /home/errscope
VOLUME ["/data"]
# 4317 OTLP/gRPC, 4318 OTLP/HTTP, 4320 query API, 8501 dashboard
EXPOSE 4317 4318 4320 8501
# The sidecar's /healthz by default; compose points other services at their own URL.
ENV ERRSCOPE_HEALTH_URL=http://127.0.0.1:4320/healthz
HEALTHCHECK --interval=10s --timeout=5s --start-period=20s --retries=6 \
    CMD ["python", "-c", "import os, urllib.request; urllib.request.urlopen(os.environ['ERRSCOPE_HEALTH_URL'], timeout=3)"]
# Listening beyond loopback needs a token: run with -e ERRSCOPE_TOKEN=... (16+ characters).
CMD ["errscope", "serve", "--otlp-grpc", "0.0.0.0:4317", "--otlp-http", "0.0.0.0:4318", "--api", "0.0.0.0:4320", "--store", "/data/errscope.duckdb"]
