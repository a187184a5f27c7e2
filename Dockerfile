# The ExtraRLHF project image (DESIGN 12.2; docs/dagster.md "Kubernetes, Docker"): the stack of
# `make setup` for a deployment (the pipeline, production plane, training, MCP and Kubernetes /
# Docker launcher extras; not the test, dg and docs tooling nor the browser arena), the native
# engine core compiled in a build stage, and only the runtime in the final one. One image serves
# as the Dagster code location (a gRPC code server, the default command), the webserver, the
# daemon and every run worker.
#
#   docker build -t extrarlhf:0.1.0 .
#
# Build arguments: PYTHON_IMAGE (a Debian-based Python 3.11 image, default the official slim
# one), TORCH_INDEX_URL (where the CPU build of torch comes from: the PyPI torch wheel pulls a
# multi-GB CUDA stack). Nothing is downloaded at run time: the image carries every package and
# no model or data set is fetched from a hub (HF_HUB_OFFLINE, HF_DATASETS_OFFLINE).
# tests/extrarlhf_assets/test_deploy_kit.py keeps the extras and pins equal to the Makefile's
# and pyproject.toml's and lints this file with hadolint.

ARG PYTHON_IMAGE=python:3.11-slim-bookworm

FROM ${PYTHON_IMAGE} AS build
# g++, cmake and ninja for the native engine core (native/, scikit-build-core + nanobind from
# PyPI: the project's own wheel build compiles it). The build stage is thrown away, so the toolchain is the base
# release's (not pinned per package: DL3008).
# hadolint ignore=DL3008
RUN apt-get update \
    && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends g++ cmake ninja-build \
    && rm -rf /var/lib/apt/lists/*
ENV VIRTUAL_ENV=/opt/venv \
    PATH=/opt/venv/bin:$PATH \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1
RUN python3 -m venv /opt/venv
# torch is pinned as pyproject.toml pins it (train and sb3 extras), as the CPU build.
ARG TORCH_INDEX_URL=https://download.pytorch.org/whl/cpu
RUN pip install --extra-index-url "${TORCH_INDEX_URL}" "torch==2.13.0+cpu"
WORKDIR /src
COPY . .
# A regular (not editable) install: the final stage copies /opt/venv only, not the sources. The
# versions are pyproject.toml's (DL3013 asks for pins on the command line). The install compiles
# the native core (engine_native, scikit-build-core: pyproject.toml); a build that fell back to the
# Python engine fails the import check.
# hadolint ignore=DL3013
RUN CMAKE_BUILD_PARALLEL_LEVEL=2 pip install ".[pipeline,mcp,production,train,rl,sb3,minari,deploy,k8s,docker]" \
    && python -c "import engine_native, extrarlhf_assets.definitions"

FROM ${PYTHON_IMAGE}
LABEL org.opencontainers.image.title="extrarlhf" \
      org.opencontainers.image.description="ExtraRLHF: the Dagster code location, webserver, daemon and run workers"
ENV VIRTUAL_ENV=/opt/venv \
    PATH=/opt/venv/bin:$PATH \
    PYTHONUNBUFFERED=1 \
    DAGSTER_HOME=/opt/dagster/dagster_home \
    RLHF_SESSIONS_DIR=/mnt/extrarlhf/sessions \
    RLHF_DATASETS_DIR=/mnt/extrarlhf/datasets \
    RLHF_CHECKPOINTS_DIR=/mnt/extrarlhf/checkpoints \
    HF_HUB_OFFLINE=1 \
    HF_DATASETS_OFFLINE=1 \
    PIP_NO_INDEX=1
COPY --from=build /opt/venv /opt/venv
# A non-root user owning DAGSTER_HOME and the data mount point (mount the shared RWX volume at
# /mnt/extrarlhf; the three RLHF_*_DIR variables above point into it).
RUN groupadd --gid 10001 extrarlhf \
    && useradd --uid 10001 --gid extrarlhf --create-home --shell /usr/sbin/nologin extrarlhf \
    && mkdir -p /opt/dagster/dagster_home /opt/dagster/app /mnt/extrarlhf \
    && chown -R extrarlhf:extrarlhf /opt/dagster /mnt/extrarlhf
USER 10001:10001
WORKDIR /opt/dagster/app
EXPOSE 4000
# The code server (dagster code-server start: reloads the definitions without a restart; the
# Helm chart's codeServerArgs run the same command). Webserver, daemon and run workers override it.
HEALTHCHECK --interval=30s --timeout=10s --start-period=120s --retries=3 \
    CMD ["dagster", "api", "grpc-health-check", "-p", "4000"]
CMD ["dagster", "code-server", "start", "-h", "0.0.0.0", "-p", "4000", "-m", "extrarlhf_assets.definitions", "--location-name", "extrarlhf"]
