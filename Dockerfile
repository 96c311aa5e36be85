# modelhost as a drop-in SageMaker inference container (real-time and multi-model endpoints).
#   docker build -t modelhost .                      (EXTRAS=xgboost,lightgbm,onnx,torch for torch)
#   docker run -p 8080:8080 -v $PWD/model:/opt/ml/model modelhost serve
# SageMaker runs `docker run IMAGE serve`; port 8080 (or SAGEMAKER_BIND_TO_PORT); the model in
# /opt/ml/model, or many in /opt/ml/models with SAGEMAKER_MULTI_MODEL=true, where the entrypoint
# keeps SageMaker's multi-model contract to the letter (MODELHOST_SAGEMAKER_CONTRACT=false: not).
# What changes from an MMS-based container: docs/migrating-sagemaker.md.
FROM python:3.11-slim

LABEL com.amazonaws.sagemaker.capabilities.multi-models=true
LABEL com.amazonaws.sagemaker.capabilities.accept-bind-to-port=true

ARG EXTRAS=xgboost,lightgbm,onnx
# libgomp: the OpenMP runtime xgboost and lightgbm link; tini: an init for PID 1
RUN apt-get update \
    && apt-get install -y --no-install-recommends libgomp1 tini \
    && rm -rf /var/lib/apt/lists/*
# the server runs tenants' artifacts and handlers, which are code: never as root
RUN useradd --system --uid 10001 --user-group --create-home --home-dir /home/modelhost modelhost

WORKDIR /opt/modelhost
COPY pyproject.toml README.md ./
COPY modelhost ./modelhost
RUN pip install --no-cache-dir ".[${EXTRAS}]"
COPY deploy/sagemaker-entrypoint.sh /usr/local/bin/modelhost-entrypoint

ENV PYTHONUNBUFFERED=1
EXPOSE 8080
USER modelhost
# tini is PID 1: it reaps orphaned processes and passes SIGTERM to the entrypoint, which execs
# the server; the server drains, then stops its workers (they ignore SIGTERM themselves)
ENTRYPOINT ["/usr/bin/tini", "--", "/usr/local/bin/modelhost-entrypoint"]
CMD ["serve"]
