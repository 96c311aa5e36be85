#!/usr/bin/env bash
# The cores sweep (benchmarks/cores.py) and gRPC's p50 (benchmarks/grpc_path.py) on a machine
# without network, as the 16-core device.
#
#   scripts/device_cores.sh fetch   here, with network: wheels into .whl/, wrk, h2load into .wrk/
#   scripts/device_cores.sh run     there: install both, sweep 1-16 cores, results into $OUT
#   scripts/device_cores.sh grpc    there: install both, each gRPC front's p50 against REST's on
#                                   server cores 0 and 0,1, results into $OUT
#   scripts/device_cores.sh stages  there: install both, where a direct hit's time goes on 15
#                                   server cores at --fronts 1, 4 and 15, into $OUT/stages.md
#   scripts/device_cores.sh tenants there: install both, benchmarks/tenants.py with the load on
#                                   cores of its own, into $OUT/tenants.md
#
# Each of run and grpc takes under 8 minutes, so each is a device call of its own; stages under 2.
# fetch adds both folders to .git/info/exclude; they travel as the device call's `carry`.
# The wheels are the dependencies of pyproject.toml that the device's image lacks or has too
# old (grpcio-health-checking needs grpcio and protobuf as new as these), and the extras of both
# opt-in gRPC fronts; each pinned to the version the development venv runs.
set -euo pipefail
cd "$(dirname "$0")/.."

PYTHON=${PYTHON:-python3}
WHEELS=(
    uvicorn==0.54.0 httptools==0.9.0 starlette==1.10.0 msgspec==0.22.0
    python-multipart==0.0.34 hpack==4.2.0 grpcio-health-checking==1.85.1
    landlockpy==0.2.0 pyseccomp==0.1.2
    boto3==1.44.8 botocore==1.44.8 s3transfer==0.19.3 jmespath==1.1.0
    grpcio==1.85.3 protobuf==7.36.2 h2corn==2.0.0 pygrpc-native==0.5.0
)
PLATFORMS=(manylinux_2_28_x86_64 manylinux_2_27_x86_64 manylinux_2_17_x86_64
    manylinux2014_x86_64 manylinux1_x86_64)
SITE=${SITE:-/tmp/site}
# shellcheck source=scripts/device_wheels.sh
source scripts/device_wheels.sh

fetch() {
    local pip=${PIP:-"$PYTHON -m pip"}
    # shellcheck disable=SC2046
    $pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
        $(printf -- '--platform %s ' "${PLATFORMS[@]}") -d .whl "${WHEELS[@]}"
    fetch_wrk
    fetch_h2load
    ignore_fetched
    # what a device call sends: tracked and untracked files that git does not ignore, and carry
    local tree carried
    tree=$(git ls-files -co --exclude-standard -z | du -cb --files0-from=- | tail -1 | cut -f1)
    carried=$(du -cb .whl .wrk | tail -1 | cut -f1)
    echo "travels $(((tree + carried) / 1048576)) MiB (.whl and .wrk $((carried / 1048576)));" \
        "the limit is 64 MiB"
}

fetch_wrk() {
    local debs
    debs=$(mktemp -d)
    (cd "$debs" && apt-get download -q wrk libluajit-5.1-2 libssl3 2>/dev/null)
    for deb in "$debs"/*.deb; do dpkg -x "$deb" "$debs/root"; done
    mkdir -p .wrk/libexec .wrk/lib .wrk/ssl
    cp "$debs/root/usr/bin/wrk" .wrk/libexec/
    # -L: a link would travel as a link, without what it points to
    cp -L "$debs"/root/usr/lib/x86_64-linux-gnu/libluajit-5.1.so.2 .wrk/lib/
    cp -L "$debs"/root/usr/lib/x86_64-linux-gnu/lib{ssl,crypto}.so.3 .wrk/ssl/
    rm -rf "$debs"
}

# h2load beside wrk: OpenSSL 3 is wrk's copy in .wrk/ssl
fetch_h2load() {
    local debs
    debs=$(mktemp -d)
    (cd "$debs" && apt-get download -q nghttp2-client libnghttp2-14 libev4 libjemalloc2 2>/dev/null)
    for deb in "$debs"/*.deb; do dpkg -x "$deb" "$debs/root"; done
    cp "$debs/root/usr/bin/h2load" .wrk/libexec/
    cp -L "$debs"/root/usr/lib/x86_64-linux-gnu/{libnghttp2.so.14,libev.so.4,libjemalloc.so.2} \
        .wrk/lib/
    rm -rf "$debs"
}

# both folders stay out of git (worktrees share the main checkout's exclude file)
ignore_fetched() {
    local exclude
    exclude=$(git rev-parse --git-common-dir)/info/exclude
    mkdir -p "$(dirname "$exclude")"
    for folder in /.whl/ /.wrk/; do
        grep -qxF "$folder" "$exclude" 2>/dev/null || echo "$folder" >>"$exclude"
    done
}

# wrk and h2load on PATH through wrappers: their libraries reach them alone, never Python
install_wrk() {
    local tool libs
    mkdir -p /tmp/wrk-bin
    for tool in .wrk/libexec/*; do
        libs=$PWD/.wrk/lib
        if LD_LIBRARY_PATH=$libs ldd "$tool" | grep -q "not found"; then
            libs=$libs:$PWD/.wrk/ssl  # the machine has no OpenSSL 3 of its own
        fi
        printf '#!/bin/sh\nLD_LIBRARY_PATH=%s exec %s "$@"\n' "$libs" "$PWD/$tool" \
            >"/tmp/wrk-bin/${tool##*/}"
        chmod +x "/tmp/wrk-bin/${tool##*/}"
        if LD_LIBRARY_PATH=$libs ldd "$tool" | grep "not found"; then exit 1; fi
    done
    export PATH=/tmp/wrk-bin:$PATH
}

# the wheels, wrk and h2load installed, and what the results ran on into $1/env.txt
prepare() {
    mkdir -p "$1"
    command -v taskset >/dev/null || { echo "taskset (util-linux) is missing" >&2 && exit 1; }
    install_wheels "import modelhost.app, uvicorn, httptools, starlette, msgspec, aiohttp, psutil
import grpc, h2corn, pygrpc_native, modelhost.rpc.services, modelhost.rpc.h2front
from importlib.metadata import version; version('modelhost')"
    install_wrk
    {
        date -u
        git rev-parse HEAD 2>/dev/null || echo "no git here"
        nproc
        $PYTHON -VV
        wrk -v 2>&1 | head -1 || true
        h2load --version 2>&1 | head -1 || true
        local listed="numpy|scikit-learn|uvloop|psutil|anyio|grpcio|protobuf|h2corn|pygrpc-native"
        $PYTHON -m pip list 2>/dev/null | grep -iE "^($listed) " || true
    } >"$1/env.txt"
    export PYTHONUNBUFFERED=1
}

run() {
    local out=${OUT:-/tmp/cores-out}
    prepare "$out"
    # the 16-core machine's whole sweep within 8 minutes; --budget-s skips what would end later
    local status=0
    timeout 470 $PYTHON benchmarks/cores.py --cores 1 2 4 8 16 --duration 5 --warmup 2 \
        --churn-cores 1 4 16 --churn-duration 8 --budget-s 440 "$@" 2>&1 |
        tee "$out/cores.log" || status=$?
    for kind in json md; do
        cp "$(ls -t benchmarks/results/cores-*.$kind | head -1)" "$out/cores.$kind" || true
    done
    return "$status"
}

# Each front's gRPC p50 at 1 against REST's with the server on core 0, then on cores 0 and 1
# (h2corn's I/O thread then has a core beside the loop's): docs/performance.md, "The full path,
# each front's own run". Three rounds, not five, to end within 8 minutes: a round is 16 s (gRPC
# and REST at 1 and 16, 1 s of warm-up and 3 measured each), a run three rounds and about 14 s
# of start and the floor's runs, about 62 s; six runs, 6.2 minutes.
GRPC_FRONTS=${GRPC_FRONTS:-"h2corn pygrpc-native grpc.aio"}
SERVER_CORES=${SERVER_CORES:-"0,1 0"}  # both cores first: if the budget runs out, one core goes
LOAD_CORES=${LOAD_CORES:-8-15}
GRPC_RUN_S=${GRPC_RUN_S:-70}  # a run's length at --rounds 3, for the budget
GRPC_RESULTS=()  # each run's JSON in benchmarks/results/

grpc() {
    local out=${OUT:-/tmp/grpc-out} budget_s=${GRPC_BUDGET_S:-440} cores front status=0
    prepare "$out"
    for cores in $SERVER_CORES; do
        for front in $GRPC_FRONTS; do
            if ((SECONDS + GRPC_RUN_S > budget_s)); then
                echo "## $front, server on $cores: skipped, past the ${budget_s} s budget" |
                    tee -a "$out/grpc_path.md"
                continue
            fi
            grpc_path "$out" "$front" "$cores" "$@" || status=$?
        done
    done
    if ((${#GRPC_RESULTS[@]})); then
        tar -czf "$out/grpc_path-json.tar.gz" -C benchmarks/results "${GRPC_RESULTS[@]}"
    fi
    return "$status"
}

# one front on one set of server cores; its log and table appended to $1's
grpc_path() {
    local out=$1 front=$2 cores=$3 status=0 newest
    shift 3
    echo "## $front, server on $cores, load on $LOAD_CORES" | tee -a "$out/grpc_path.md"
    timeout $((GRPC_RUN_S * 2)) $PYTHON benchmarks/grpc_path.py --rounds 3 --concurrency 1 16 \
        --duration 3 --warmup 1 --server-core "$cores" --wrk-core "$LOAD_CORES" \
        --serve-arg=--grpc-front --serve-arg="$front" "$@" 2>&1 |
        tee -a "$out/grpc_path.log" || status=$?
    if ((status)); then
        echo "failed with $status: see grpc_path.log" >>"$out/grpc_path.md"
        return "$status"
    fi
    newest=$(cd benchmarks/results && ls -t grpc_path-*.json | head -1)
    GRPC_RESULTS+=("$newest")
    { cat "benchmarks/results/${newest%.json}.md" && echo; } >>"$out/grpc_path.md"
}

# benchmarks/front_stages.py: each role's CPU and each stage of a direct hit, wrk on core 0
stages() {
    local out=${OUT:-/tmp/stages-out} fronts status=0
    prepare "$out"
    for fronts in 1 4 15; do
        echo "## --fronts $fronts, 15 workers, 240 connections" | tee -a "$out/stages.md"
        timeout 60 $PYTHON benchmarks/front_stages.py --server-core 1-15 --wrk-core 0 \
            --workers 15 --fronts "$fronts" --connections 240 --duration 8 --warmup 3 "$@" 2>&1 |
            tee -a "$out/stages.md" || status=$?
    done
    return "$status"
}

# benchmarks/tenants.py with the load on cores of its own, so that the main process, the fronts
# and the worker do not share theirs with it: each of TENANT_FRONTS in turn, within the budget
TENANT_FRONTS=${TENANT_FRONTS:-"1 4"}
TENANT_CORES=${TENANT_CORES:-1-7}  # the server's
# the quiet client's core apart from the load's, since the machine refuses it real-time; the
# fairness tenants' clients twice the VM's, so that the weight-4 tenant stays backlogged
QUIET_CORE=${QUIET_CORE:-8}
TENANT_LOAD_CORES=${TENANT_LOAD_CORES:-9-15}
TENANT_CLIENTS=${TENANT_CLIENTS:-"6 12 24"}
TENANTS_RUN_S=90  # a run's length at --duration 4, for the budget

tenants() {
    local out=${OUT:-/tmp/tenants-out} budget_s=${TENANTS_BUDGET_S:-440} fronts status=0
    prepare "$out"
    for fronts in $TENANT_FRONTS; do
        if ((SECONDS + TENANTS_RUN_S > budget_s)); then
            echo "## --fronts $fronts: skipped, past the ${budget_s} s budget" |
                tee -a "$out/tenants.md"
            continue
        fi
        echo "## --fronts $fronts, server on $TENANT_CORES, quiet client on $QUIET_CORE," \
            "load on $TENANT_LOAD_CORES" | tee -a "$out/tenants.md"
        # shellcheck disable=SC2086  # the clients are three numbers
        timeout $((TENANTS_RUN_S * 2)) $PYTHON benchmarks/tenants.py --duration 4 \
            --server-core "$TENANT_CORES" --client-core "$TENANT_LOAD_CORES" \
            --quiet-core "$QUIET_CORE" --fair-clients $TENANT_CLIENTS \
            --serve-arg=--fronts="$fronts" "$@" 2>&1 | tee -a "$out/tenants.log" || status=$?
        { cat "$(ls -t benchmarks/results/tenants-*.md | head -1)" && echo; } >>"$out/tenants.md"
    done
    return "$status"
}

case "${1:-}" in
fetch) fetch ;;
run) shift && run "$@" ;;
grpc) shift && grpc "$@" ;;
stages) shift && stages "$@" ;;
tenants) shift && tenants "$@" ;;
*)
    echo "usage: $0 fetch|run [cores.py arguments]|grpc [grpc_path.py arguments]|stages" \
        "|tenants [tenants.py arguments]" >&2
    exit 2
    ;;
esac
