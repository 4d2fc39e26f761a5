# Threadwise container image (docs/deploy.md).
#
#   docker build -t threadwise .                            # lean: hosted models (Mistral), PostgreSQL, metrics
#   docker build -t threadwise:offline --build-arg VARIANT=offline .   # + llama.cpp, SmolLM2, local embeddings
#   docker build -t threadwise --build-arg EXTRAS=postgres,metrics,openai .    # + a provider extra (pyproject.toml)
#   docker build -t threadwise --build-arg EXTRAS=postgres,metrics,documents --build-arg SYSTEM_PACKAGES=git .
#                                                     # PDF/Office documents and git sources (docs/knowledge-base.md)
#   docker run -e SLACK_BOT_TOKEN=... -e SLACK_APP_TOKEN=... -e MISTRAL_API_KEY=... -v threadwise-data:/data threadwise
#
# The lean image installs wheels only (no compiler anywhere) and holds no PyTorch or
# llama.cpp. The offline variant compiles llama.cpp in the build stage (portably: x86-64-v3,
# scripts/build-llama-portable.sh); the final stage of both holds the virtual environment
# and no compiler. Every config.toml key can be set with THREADWISE_<SECTION>__<KEY>
# variables (docs/configuration.md); the ENV lines below are such settings.
# Where python:3.11-slim-bookworm cannot be pulled, scripts/build-base-image.sh builds a
# stand-in from Debian packages under that name.
ARG PYTHON_IMAGE=docker.io/library/python:3.11-slim-bookworm

FROM ${PYTHON_IMAGE} AS build
# hosted: wheels only; offline: also the offline extra (llama.cpp compiled here, CPU PyTorch)
ARG VARIANT=hosted
ARG EXTRAS=postgres,metrics
# where the CPU build of PyTorch comes from (the offline variant): a plain `torch` would be the CUDA build
ARG TORCH_PIP_ARGS="--index-url https://download.pytorch.org/whl/cpu"
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_ROOT_USER_ACTION=ignore
WORKDIR /src
RUN python3 -m venv /opt/threadwise
# The dependencies first, from pyproject.toml alone: this layer is rebuilt only when it
# changes, and then from pip's cache (a cache mount: not part of the image).
COPY pyproject.toml ./
COPY scripts/build-llama-portable.sh scripts/check_isa.py scripts/
RUN --mount=type=cache,target=/root/.cache/pip --mount=type=cache,target=/root/.cache/threadwise set -eu; \
    extras="$EXTRAS"; [ "$VARIANT" = hosted ] || extras="offline,$EXTRAS"; \
    python3 -c 'import sys, tomllib; p = tomllib.load(open("pyproject.toml", "rb"))["project"]; \
print("\n".join(p["dependencies"] + [r for e in sys.argv[1].split(",") if e for r in p["optional-dependencies"][e]]))' \
      "$extras" > requirements.txt; \
    if [ "$VARIANT" = hosted ]; then \
      /opt/threadwise/bin/pip install --only-binary=:all: -r requirements.txt; \
    else \
      apt-get update && apt-get install -y --no-install-recommends build-essential cmake; \
      /opt/threadwise/bin/pip install "$(grep '^torch==' requirements.txt)" $TORCH_PIP_ARGS; \
      /opt/threadwise/bin/pip install "$(scripts/build-llama-portable.sh /opt/threadwise/bin/python)"; \
      /opt/threadwise/bin/pip install -r requirements.txt; \
    fi
COPY README.md ./
COPY bot bot
COPY graphs graphs
COPY threadwise threadwise
# pip and setuptools are not needed to run: the final image goes without them
RUN --mount=type=cache,target=/root/.cache/pip /opt/threadwise/bin/pip install --no-deps . \
    && /opt/threadwise/bin/threadwise --help >/dev/null \
    && /opt/threadwise/bin/pip uninstall --yes --quiet pip setuptools

FROM ${PYTHON_IMAGE}
ARG VARIANT=hosted
# Debian packages the bot may need at run time, e.g. "git" for [[sources]] of type git
ARG SYSTEM_PACKAGES=""
LABEL org.opencontainers.image.title="Threadwise" \
      org.opencontainers.image.description="Team Q&A bot for Slack and Discord (adaptive RAG)" \
      org.opencontainers.image.licenses="Apache-2.0" \
      io.threadwise.variant="${VARIANT}"
# the offline variant's llama.cpp and PyTorch load the OpenMP runtime (libgomp1: not a compiler)
RUN packages="$SYSTEM_PACKAGES"; [ "$VARIANT" = hosted ] || packages="libgomp1 $packages"; \
    if [ -n "$packages" ]; then \
      apt-get update && apt-get install -y --no-install-recommends $packages && rm -rf /var/lib/apt/lists/*; \
    fi
# uid and gid 10001: what deploy/kubernetes/deployment.yaml's securityContext names
RUN groupadd --system --gid 10001 threadwise \
    && useradd --system --uid 10001 --gid 10001 --home-dir /home/threadwise --create-home threadwise \
    && mkdir -p /data && chown threadwise:threadwise /data
COPY --from=build /opt/threadwise /opt/threadwise
# the default knowledge base (this project's user guide) and config.toml at its defaults
COPY config.toml /app/config.toml
COPY docs /app/docs
# One volume holds every file the bot writes: checkpoints, bookkeeping, the index, learned
# entries ([service] data_dir) and the offline variant's model caches.
ENV PATH=/opt/threadwise/bin:$PATH \
    PYTHONUNBUFFERED=1 \
    HF_HUB_OFFLINE=1 \
    XDG_CACHE_HOME=/data/cache \
    THREADWISE_CONFIG=/app/config.toml \
    THREADWISE_SERVICE__DATA_DIR=/data \
    THREADWISE_MONITORING__HOST=0.0.0.0 \
    THREADWISE_MONITORING__HEALTH_PORT=8080 \
    THREADWISE_MONITORING__METRICS_PORT=8080 \
    THREADWISE_SLACK__HTTP_PORT=3000
VOLUME ["/data"]
WORKDIR /app
USER threadwise
# 3000: Slack's Events API in [slack] mode = "http"; 8080: /healthz and /metrics
EXPOSE 3000 8080
# /healthz is 200 when every started platform is connected (bot/monitoring.py)
HEALTHCHECK --interval=30s --timeout=5s --start-period=120s --retries=3 \
    CMD ["python", "-c", "import os, urllib.request; urllib.request.urlopen('http://127.0.0.1:%s/healthz' % os.environ.get('THREADWISE_MONITORING__HEALTH_PORT', '8080'), timeout=4)"]
ENTRYPOINT ["threadwise"]
CMD ["run"]
