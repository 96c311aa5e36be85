#!/usr/bin/env bash
# Every open issue's device check in one call of at most 575 s, for a session lent the device
# once (its 15 minutes hold one such call beside the machine's start), in the order of what is
# least known: the GPU check (issue 49), tenants with the quiet client on a core of its own (46),
# the 16-core sweep's churn row (52) and gRPC's p50 on one server core (50), each cut at its
# share of the time.
#
#   scripts/device_cores.sh fetch   here, with network: the wheels, wrk and h2load
#   scripts/device_all.sh           there (carry .whl and .wrk): results into $OUT/<check>/
set -uo pipefail
cd "$(dirname "$0")/.."

OUT=${OUT:-/tmp/all-out}

# check NAME SECONDS COMMAND...: COMMAND with $OUT/NAME as its OUT, stopped after SECONDS
check() {
    local name=$1 limit=$2 status=0
    shift 2
    echo "== $name, at most $limit s, from ${SECONDS} s" | tee -a "$OUT/checks.log"
    mkdir -p "$OUT/$name"
    # INT: the benchmarks stop their servers on the way out, as on ^C
    OUT=$OUT/$name timeout -s INT -k 20 "$limit" "$@" || status=$?
    echo "== $name ended with $status at ${SECONDS} s" | tee -a "$OUT/checks.log"
}

mkdir -p "$OUT"
check gpu 170 scripts/device_gpu.sh run --churn-s 30 --hits-s 8
TENANTS_BUDGET_S=105 TENANT_FRONTS=1 check tenants 115 scripts/device_cores.sh tenants
check cores 175 scripts/device_cores.sh run --cores 16 --duration 4 --warmup 2 \
    --churn-cores 16 --churn-duration 10 --budget-s 160
GRPC_BUDGET_S=100 GRPC_RUN_S=50 SERVER_CORES=0 GRPC_FRONTS=h2corn \
    check grpc 110 scripts/device_cores.sh grpc --rounds 2
