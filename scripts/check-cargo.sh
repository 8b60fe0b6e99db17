#!/usr/bin/env bash
# Stops `make setup` with a clear message when cargo is missing or older than $1: the scrub
# engine (engine/) is Rust and the install compiles it.
set -euo pipefail
need=$1
if ! command -v cargo >/dev/null 2>&1; then
    echo "errscope needs cargo >= $need to build its scrub engine (engine/): install Rust with rustup (https://rustup.rs)" >&2
    exit 1
fi
have=$(cargo --version | awk '{print $2}')
if [[ "$(printf '%s\n%s\n' "$need" "$have" | sort -V | head -n1)" != "$need" ]]; then
    echo "errscope needs cargo >= $need to build its scrub engine (engine/); found $have: run 'rustup update'" >&2
    exit 1
fi
