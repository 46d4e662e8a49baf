#!/usr/bin/env bash
# Generates the Go code of the SDK's plugin protocols from
# sdk/proto/kmirror/plugin/<kind>/v1/*.proto into sdk/internal/pb/<kind>v1.
#
#   scripts/gen-proto.sh          regenerate in place
#   scripts/gen-proto.sh --check  regenerate into a temporary directory and
#                                 fail when the committed code is stale
#
# Pinned tools: protoc from Debian (protobuf-compiler, installed by
# scripts/install-deps.sh), protoc-gen-go and protoc-gen-go-grpc at the
# versions below, installed into bin/tools. The protoc version line of the
# generated headers is left out of the comparison, so a Debian point release
# does not make the check fail.
set -euo pipefail
cd "$(dirname "$0")/.."

PROTOC_GEN_GO=google.golang.org/protobuf/cmd/protoc-gen-go@v1.36.12
PROTOC_GEN_GO_GRPC=google.golang.org/grpc/cmd/protoc-gen-go-grpc@v1.5.1

if ! command -v protoc >/dev/null 2>&1; then
  echo "gen-proto: protoc not found; run scripts/install-deps.sh (installs Debian's protobuf-compiler)" >&2
  exit 1
fi
tools="$PWD/bin/tools"
mkdir -p "$tools"
[ -x "$tools/protoc-gen-go" ] || GOBIN="$tools" GOWORK=off GOFLAGS=-mod=mod go install "$PROTOC_GEN_GO"
[ -x "$tools/protoc-gen-go-grpc" ] || GOBIN="$tools" GOWORK=off GOFLAGS=-mod=mod go install "$PROTOC_GEN_GO_GRPC"
export PATH="$tools:$PATH"

check=false
[ "${1:-}" = "--check" ] && check=true
out=sdk/internal/pb
if $check; then
  out=$(mktemp -d)
  trap 'rm -rf "$out"' EXIT
fi

mapfile -t protos < <(cd sdk/proto && find . -name '*.proto' | sed 's|^\./||' | sort)
if [ "${#protos[@]}" -eq 0 ]; then
  echo "gen-proto: no .proto files under sdk/proto" >&2
  exit 0
fi
# Each proto declares go_package "github.com/kmirror/kmirror/sdk/internal/pb/<kind>v1";
# module= strips the module's import path so files land under $out/<kind>v1.
gen=$(mktemp -d)
(cd sdk/proto && protoc -I . \
  --go_out="$gen" --go_opt=module=github.com/kmirror/kmirror/sdk/internal/pb \
  --go-grpc_out="$gen" --go-grpc_opt=module=github.com/kmirror/kmirror/sdk/internal/pb \
  "${protos[@]}")
if $check; then
  strip() { sed -E '/^\/\/ +(- )?protoc +v?[0-9]/d;/^\/\/ +protoc +\(unknown\)/d' "$1"; }
  stale=0
  while IFS= read -r f; do
    rel=${f#"$gen"/}
    if [ ! -f "sdk/internal/pb/$rel" ] || ! diff -q <(strip "$f") <(strip "sdk/internal/pb/$rel") >/dev/null; then
      echo "gen-proto: sdk/internal/pb/$rel is stale or missing" >&2
      stale=1
    fi
  done < <(find "$gen" -name '*.go')
  while IFS= read -r f; do
    rel=${f#sdk/internal/pb/}
    [ -f "$gen/$rel" ] || { echo "gen-proto: sdk/internal/pb/$rel has no .proto any more" >&2; stale=1; }
  done < <(find sdk/internal/pb -name '*.pb.go' 2>/dev/null)
  rm -rf "$gen"
  if [ "$stale" -ne 0 ]; then
    echo "gen-proto: generated code is stale: run make generate and commit the result" >&2
    exit 1
  fi
  echo "gen-proto: generated code is up to date"
else
  find sdk/internal/pb -name '*.pb.go' -delete 2>/dev/null || true
  mkdir -p sdk/internal/pb
  cp -r "$gen"/. sdk/internal/pb/
  rm -rf "$gen"
  echo "gen-proto: generated $(find sdk/internal/pb -name '*.pb.go' | wc -l) files into sdk/internal/pb"
fi
