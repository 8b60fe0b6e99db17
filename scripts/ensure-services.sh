#!/usr/bin/env bash
# Make sure the local services the integration tests talk to are present and running.
# Idempotent; safe to run on a developer machine and on a fresh CI machine (as root).
set -euo pipefail

need_apt=()
command -v pg_ctlcluster >/dev/null 2>&1 || need_apt+=(postgresql)
command -v chromium >/dev/null 2>&1 || need_apt+=(chromium)
if ((${#need_apt[@]})); then
    echo "ensure-services: installing ${need_apt[*]}"
    if [[ $(id -u) -ne 0 ]]; then
        echo "ensure-services: need root to apt-get install ${need_apt[*]}" >&2
        exit 1
    fi
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need_apt[@]}" >/dev/null
fi

# PostgreSQL: start the machine's cluster (Debian's pg_ctlcluster), wait until it answers.
if command -v pg_ctlcluster >/dev/null 2>&1; then
    cluster=$(pg_lsclusters --no-header 2>/dev/null | awk 'NR==1 {print $1" "$2}')
    if [[ -z "$cluster" ]]; then
        pg_createcluster 15 main >/dev/null
        cluster="15 main"
    fi
    # shellcheck disable=SC2086
    pg_ctlcluster $cluster start 2>/dev/null || true
    for _ in $(seq 1 30); do
        pg_isready -q -h 127.0.0.1 && break
        sleep 1
    done
    pg_isready -q -h 127.0.0.1 || { echo "ensure-services: PostgreSQL did not start" >&2; exit 1; }
fi

# The OpenTelemetry Collector that tests/otelcol and `bench/ingest.py --collector` run: built
# once from Go modules by ocb, reused while its manifest is unchanged (a hash stamp).
bash "$(dirname "${BASH_SOURCE[0]}")/build-otelcol.sh" >/dev/null
