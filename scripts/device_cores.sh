#!/usr/bin/env bash
# The cores sweep (benchmarks/cores.py) on a machine without network, as the 16-core device.
#
#   scripts/device_cores.sh fetch   here, with network: wheels into .whl/, wrk into .wrk/
#   scripts/device_cores.sh run     there: install both, sweep 1-16 cores, results into $OUT
#
# fetch adds both folders to .git/info/exclude; they travel as the device call's `carry`.
# The wheels are the base dependencies of pyproject.toml that the device's image lacks; each
# pinned to the version the development venv runs.
set -euo pipefail
cd "$(dirname "$0")/.."

PYTHON=${PYTHON:-python3}
WHEELS=(
    uvicorn==0.54.0 httptools==0.9.0 starlette==1.10.0 msgspec==0.22.0
    python-multipart==0.0.34 hpack==4.2.0 grpcio-health-checking==1.85.1
    landlockpy==0.2.0 pyseccomp==0.1.2
    boto3==1.44.8 botocore==1.44.8 s3transfer==0.19.3 jmespath==1.1.0
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

# both folders stay out of git (worktrees share the main checkout's exclude file)
ignore_fetched() {
    local exclude
    exclude=$(git rev-parse --git-common-dir)/info/exclude
    mkdir -p "$(dirname "$exclude")"
    for folder in /.whl/ /.wrk/; do
        grep -qxF "$folder" "$exclude" 2>/dev/null || echo "$folder" >>"$exclude"
    done
}

# wrk on PATH through a wrapper: its libraries reach wrk alone, never Python
install_wrk() {
    local libs=$PWD/.wrk/lib
    if LD_LIBRARY_PATH=$libs ldd .wrk/libexec/wrk | grep -q "not found"; then
        libs=$libs:$PWD/.wrk/ssl  # the machine has no OpenSSL 3 of its own
    fi
    mkdir -p /tmp/wrk-bin
    printf '#!/bin/sh\nLD_LIBRARY_PATH=%s exec %s "$@"\n' "$libs" "$PWD/.wrk/libexec/wrk" \
        >/tmp/wrk-bin/wrk
    chmod +x /tmp/wrk-bin/wrk
    export PATH=/tmp/wrk-bin:$PATH
    if LD_LIBRARY_PATH=$libs ldd .wrk/libexec/wrk | grep "not found"; then exit 1; fi
}

run() {
    local out=${OUT:-/tmp/cores-out}
    mkdir -p "$out"
    command -v taskset >/dev/null || { echo "taskset (util-linux) is missing" >&2 && exit 1; }
    install_wheels "import modelhost.app, uvicorn, httptools, starlette, msgspec, aiohttp, psutil
from importlib.metadata import version; version('modelhost')"
    install_wrk
    {
        date -u
        git rev-parse HEAD 2>/dev/null || echo "no git here"
        nproc
        $PYTHON -VV
        wrk -v 2>&1 | head -1 || true
        $PYTHON -m pip list 2>/dev/null | grep -iE "^(numpy|scikit-learn|uvloop|psutil|anyio) " || true
    } >"$out/env.txt"
    export PYTHONUNBUFFERED=1
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

case "${1:-}" in
fetch) fetch ;;
run) shift && run "$@" ;;
*) echo "usage: $0 fetch|run [cores.py arguments]" >&2 && exit 2 ;;
esac
