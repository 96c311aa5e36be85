#!/bin/sh
# The container's entrypoint. SageMaker starts it as `docker run IMAGE serve`; this turns
# SageMaker's layout into modelhost settings and execs the server, so SIGTERM reaches the server
# itself (not a shell) and it drains and exits 0. Other commands run as given.
#
#   single model (default)        /opt/ml/model is the model; /invocations needs no header
#   SAGEMAKER_MULTI_MODEL=true    /opt/ml/models is the store; SageMaker's multi-model contract
#                                 to the letter: only POST /models loads, invoking a model not
#                                 loaded is 404, and a load that does not fit is 507, never an
#                                 eviction (SageMaker unloads the model it chooses)
#
# SageMaker's own variables (SAGEMAKER_BIND_TO_PORT, SAGEMAKER_MODEL_SERVER_WORKERS: workers per
# model, SAGEMAKER_MODEL_SERVER_TIMEOUT) are read by the server; any MODELHOST_* variable set on the
# container wins over what is set here. OPT_ML_DIR moves /opt/ml (the tests use it).
set -eu

if [ "${1:-serve}" != "serve" ]; then
    exec "$@"
fi
[ $# -gt 0 ] && shift

opt_ml="${OPT_ML_DIR:-/opt/ml}"
export MODELHOST_HOST="${MODELHOST_HOST:-0.0.0.0}"
export MODELHOST_CACHE_DIR="${MODELHOST_CACHE_DIR:-/tmp/modelhost-cache}"

case "$(printf '%s' "${SAGEMAKER_MULTI_MODEL:-false}" | tr '[:upper:]' '[:lower:]')" in
    true | 1 | yes | on)
        export MODELHOST_MODEL_STORE="${MODELHOST_MODEL_STORE:-$opt_ml/models}"
        export MODELHOST_SAGEMAKER_CONTRACT="${MODELHOST_SAGEMAKER_CONTRACT:-true}"
        ;;
    *)
        # the store is /opt/ml and the model its folder `model`: loaded at start, never evicted
        export MODELHOST_MODEL_STORE="${MODELHOST_MODEL_STORE:-$opt_ml}"
        export MODELHOST_SINGLE_MODEL="${MODELHOST_SINGLE_MODEL:-model}"
        export MODELHOST_MULTI_MODEL="${MODELHOST_MULTI_MODEL:-false}"  # /ping waits for it
        export MODELHOST_PINNED_MODELS="${MODELHOST_PINNED_MODELS:-model}"
        ;;
esac

exec modelhost serve "$@"
