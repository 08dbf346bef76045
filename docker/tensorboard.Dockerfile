# TensorBoard only: browse runs/ on any machine, with no GPU, no CUDA and no Isaac Gym.
# Built by `make tensorboard` / `docker compose up tensorboard` (compose.yaml); the Python
# packages come hashed from env/tensorboard.lock (locked for Python 3.11, like the base).
# The base is a build argument so that a machine without a registry can use a local one
# (docker/scripts/debian-base.sh makes one from Debian's archive).
ARG TENSORBOARD_BASE_IMAGE=python:3.11-slim-bookworm
# The tag is the argument's default above.
# hadolint ignore=DL3006
FROM ${TENSORBOARD_BASE_IMAGE}

LABEL org.opencontainers.image.title="mapush-tensorboard" \
      org.opencontainers.image.description="TensorBoard over the MAPush runs/ folder (read-only)" \
      org.opencontainers.image.licenses="BSD-3-Clause"

ENV PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1

COPY env/tensorboard.lock /tmp/tensorboard.lock
COPY --chmod=0755 docker/tensorboard-entry.sh /usr/local/bin/tensorboard-entry
RUN python3 -m venv /opt/tensorboard \
    && /opt/tensorboard/bin/pip install --no-deps --require-hashes -r /tmp/tensorboard.lock \
    && rm /tmp/tensorboard.lock \
    && useradd --system --no-create-home --shell /usr/sbin/nologin tensorboard

USER tensorboard
EXPOSE 6006
HEALTHCHECK --interval=30s --timeout=5s --start-period=30s --retries=3 \
    CMD ["/opt/tensorboard/bin/python", "-c", "import urllib.request; urllib.request.urlopen('http://127.0.0.1:6006/data/runs', timeout=4)"]
ENTRYPOINT ["/usr/local/bin/tensorboard-entry"]
CMD ["--logdir", "/runs", "--bind_all", "--port", "6006"]

# Last, so a new value costs no rebuild of the layers above: the hash of this file, the
# lock and the base, which `make tensorboard` compares to decide whether to build.
# The base is labelled too: a later plain `make tensorboard` builds on the same one.
ARG TENSORBOARD_BASE_IMAGE
ARG TENSORBOARD_INPUTS=
LABEL org.mapush.inputs="${TENSORBOARD_INPUTS}" \
      org.mapush.base="${TENSORBOARD_BASE_IMAGE}"
