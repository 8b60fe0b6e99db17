#!/usr/bin/env bash
# Build errscope's minimal OpenTelemetry Collector (deploy/otelcol/builder-config.yaml) with
# the OpenTelemetry Collector Builder, once: the binary is reused until the manifest, the
# builder's version or the Go toolchain changes (a hash stamp beside it).
#
#   scripts/build-otelcol.sh          # prints the binary's path on stdout; progress on stderr
#
# The cache folder is .cache/otelcol/ (gitignored), or $ERRSCOPE_OTELCOL_CACHE.  Parallel
# callers (pytest workers) wait on a lock and then reuse what the first one built.  The Go
# modules come from the Go module proxy through the go command, pinned by the manifest;
# docs/collector.md says how long a build takes on a fresh machine.
set -euo pipefail

OCB_VERSION=v0.165.0  # keep at the manifest's core release
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
manifest="$root/deploy/otelcol/builder-config.yaml"
cache=${ERRSCOPE_OTELCOL_CACHE:-$root/.cache/otelcol}
binary="$cache/bin/otelcol-errscope"
stamp="$binary.stamp"

command -v go >/dev/null 2>&1 || { echo "build-otelcol: needs the go command (Go >= 1.26, as the modules' go.mod files say)" >&2; exit 1; }
mkdir -p "$cache/bin"
want=$( { cat "$manifest"; echo "ocb $OCB_VERSION"; go version; } | sha256sum | cut -d' ' -f1)

up_to_date() { [[ -x "$binary" && -f "$stamp" && $(cat "$stamp") == "$want" ]]; }

if up_to_date; then
    echo "build-otelcol: up to date ($binary)" >&2
    echo "$binary"
    exit 0
fi

exec 9>"$cache/.lock"
flock 9
if up_to_date; then  # another caller built it while this one waited for the lock
    echo "build-otelcol: built by another caller ($binary)" >&2
    echo "$binary"
    exit 0
fi

start=$(date +%s)
export GOFLAGS="${GOFLAGS:+$GOFLAGS }-buildvcs=false"  # the sources sit inside this repo's tree
if [[ ! -x "$cache/tools/builder" || $("$cache/tools/builder" version 2>/dev/null) != *"${OCB_VERSION#v}"* ]]; then
    echo "build-otelcol: installing the builder (ocb) $OCB_VERSION" >&2
    GOBIN="$cache/tools" go install "go.opentelemetry.io/collector/cmd/builder@$OCB_VERSION"
fi
rm -rf "$cache/src"
sed "s#^\(  output_path:\).*#\1 $cache/src#" "$manifest" >"$cache/manifest.yaml"
echo "build-otelcol: building (go modules and compile; several minutes on a fresh machine)" >&2
"$cache/tools/builder" --config "$cache/manifest.yaml" >"$cache/build.log" 2>&1 || {
    tail -n 40 "$cache/build.log" >&2
    echo "build-otelcol: the build failed; the whole log is $cache/build.log" >&2
    exit 1
}
mv "$cache/src/otelcol-errscope" "$binary.new"
mv "$binary.new" "$binary"
echo "$want" >"$stamp"
echo "build-otelcol: built $binary in $(($(date +%s) - start)) s" >&2
echo "$binary"
