#!/usr/bin/env bash
# The plugin tutorial's code (docs/writing-plugins.md) is its own Go module,
# examples/plugins/group-filter, outside go.work: it gets the sdk the way a
# third party does, at the version the daemon's go.mod requires. The sdk has
# no public tag, so a local module proxy made from this repository's commits
# (internal/tools/modproxy) serves it, in front of the usual proxy for every
# other module.
#
#   scripts/tutorial.sh build DIR  build the plugin into DIR/kmirror-group-filter
#                                  and print its path
#   scripts/tutorial.sh check      (make tutorial-check) the example requires
#                                  the sdk the daemon requires and its go.mod
#                                  and go.sum are tidy; go vet, go test and go
#                                  build it; follow the tutorial's steps in an
#                                  empty directory; then run the built plugin through
#                                  kmirror's plugin host (internal/plugintutorial,
#                                  with KMIRROR_TUTORIAL_PLUGIN set to it)
#
# scripts/modules.sh pin moves the example's requirement with the daemon's.
set -euo pipefail
caller=$PWD
cd "$(dirname "$0")/.."

SDK=github.com/kmirror/kmirror/sdk
EXAMPLE=examples/plugins/group-filter
BINARY=kmirror-group-filter
upstream=$(go env GOPROXY)
tmp=$(mktemp -d)
trap 'chmod -R u+w "$tmp" 2>/dev/null; rm -rf "$tmp"' EXIT

# required GOMOD: the sdk version a go.mod requires
required() { awk -v m="$SDK" '$1 == m { print $2 } $1 == "require" && $2 == m { print $3 }' "$1"; }

v=$(required go.mod)
ev=$(required "$EXAMPLE/go.mod")
if [ "$v" != "$ev" ]; then
  echo "tutorial: $EXAMPLE requires $SDK ${ev:-(nothing)}, the daemon $v; run scripts/modules.sh pin" >&2
  exit 1
fi
go build -o "$tmp/modproxy" ./internal/tools/modproxy
"$tmp/modproxy" -out "$tmp/proxy" "$SDK=sdk@${v##*-}" >/dev/null

# in_module DIR CMD...: runs CMD in the module in DIR as a third party would:
# no workspace, the sdk from the local proxy.
in_module() {
  local dir=$1; shift
  (cd "$dir" && GOWORK=off GOPROXY="file://$tmp/proxy,$upstream" GONOSUMDB=github.com/kmirror/kmirror \
    GOFLAGS="-mod=mod -buildvcs=false" "$@")
}

build() {
  mkdir -p "$1"
  local out; out=$(cd "$1" && pwd)/$BINARY
  in_module "$EXAMPLE" go build -o "$out" .
  echo "$out"
}

case "${1:-}" in
build)
  [ -n "${2:-}" ] || { echo "usage: scripts/tutorial.sh build DIR" >&2; exit 2; }
  dir=$2
  case "$dir" in /*) ;; *) dir="$caller/$dir" ;; esac
  build "$dir"
  ;;
check)
  before=$(cat "$EXAMPLE/go.mod" "$EXAMPLE/go.sum" | sha256sum)
  in_module "$EXAMPLE" go vet ./...
  in_module "$EXAMPLE" go test -count=1 ./...
  bin=$(build "$tmp/bin")
  if [ "$(cat "$EXAMPLE/go.mod" "$EXAMPLE/go.sum" | sha256sum)" != "$before" ]; then
    echo "tutorial: building $EXAMPLE changed its go.mod or go.sum; commit them (or run scripts/modules.sh pin)" >&2
    exit 1
  fi
  # The tutorial's steps from an empty directory, with the Go files it shows
  # (internal/plugintutorial proves they are the example's) and the sdk
  # version pinned instead of @latest.
  fresh=$tmp/fresh/group-filter
  mkdir -p "$fresh"
  in_module "$fresh" go mod init example.com/group-filter
  in_module "$fresh" go get "$SDK@$v"
  (cd "$EXAMPLE" && find . -name '*.go' -exec cp --parents {} "$fresh" \;)
  in_module "$fresh" go mod tidy
  if ! diff <(grep -Ev '^(go|toolchain) ' "$EXAMPLE/go.mod") <(grep -Ev '^(go|toolchain) ' "$fresh/go.mod") >&2; then
    echo "tutorial: the tutorial's steps make another go.mod than $EXAMPLE's (above)" >&2
    exit 1
  fi
  in_module "$fresh" go test -count=1 ./...
  in_module "$fresh" go build -o kmirror-group-filter .
  if out=$("$fresh/kmirror-group-filter" 2>&1) || ! grep -q "This binary is a plugin" <<<"$out"; then
    echo "tutorial: the plugin run by hand did not say it is a plugin and exit 1: $out" >&2
    exit 1
  fi
  KMIRROR_TUTORIAL_PLUGIN=$bin go test -count=1 ./internal/plugintutorial/
  echo "tutorial: $EXAMPLE builds against $SDK $v and runs through the plugin host"
  ;;
*)
  echo "usage: scripts/tutorial.sh build DIR|check" >&2
  exit 2
  ;;
esac
