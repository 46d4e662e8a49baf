#!/usr/bin/env bash
# kmirror is two Go modules: github.com/kmirror/kmirror (the daemon) and
# github.com/kmirror/kmirror/sdk (what plugins build against). The daemon's
# go.mod requires the sdk at a pseudo-version made from the last commit that
# changed sdk/ (no replace directive, so `go install …/cmd/kmirror@version`
# works); go.work serves that version from ./sdk for local work.
#
#   scripts/modules.sh pin    require the sdk at the last commit that changed
#                             sdk/ (go.mod, go.work's replace, go.sum, and
#                             the tutorial's examples/plugins/group-filter);
#                             run it after committing an sdk change, then commit
#   scripts/modules.sh tidy   go mod tidy of the daemon's module
#   scripts/modules.sh check  fail when sdk/ differs from the required
#                             version; then `go install
#                             github.com/kmirror/kmirror/cmd/kmirror@<HEAD>`
#                             from a clean module cache, through a local
#                             module proxy serving this repository's commits
#                             (internal/tools/modproxy), and run the binary
set -euo pipefail
cd "$(dirname "$0")/.."

SDK=github.com/kmirror/kmirror/sdk
MAIN=github.com/kmirror/kmirror
upstream=$(go env GOPROXY)
tmp=$(mktemp -d)
trap 'chmod -R u+w "$tmp" 2>/dev/null; rm -rf "$tmp"' EXIT
go build -o "$tmp/modproxy" ./internal/tools/modproxy

# required [DIR]: the sdk version the go.mod of DIR (default: the daemon's) requires
required() { GOWORK=off go mod edit -C "${1:-.}" -json | python3 -c 'import json,sys; m=json.load(sys.stdin); print(next(r["Version"] for r in m["Require"] if r["Path"]=="'"$SDK"'"))'; }
# commit of a pseudo-version: its last 12 hex digits
commit_of() { git rev-parse "${1##*-}^{commit}"; }

# with_proxy CMD...: runs CMD outside the workspace, with the sdk served at
# its required version by a local proxy in front of the usual one.
with_proxy() {
  local v; v=$(required)
  "$tmp/modproxy" -out "$tmp/proxy" "$SDK=sdk@$(commit_of "$v")" >/dev/null
  GOWORK=off GOPROXY="file://$tmp/proxy,$upstream" GONOSUMDB="$MAIN" GOFLAGS=-mod=mod "$@"
}

case "${1:-}" in
pin)
  rev=$(git log -1 --format=%H -- sdk)
  [ -n "$rev" ] || { echo "modules: no commit changes sdk/" >&2; exit 1; }
  if ! git diff --quiet HEAD -- sdk; then
    echo "modules: sdk/ has uncommitted changes; commit them first" >&2
    exit 1
  fi
  line=$("$tmp/modproxy" -out "$tmp/proxy" "$SDK=sdk@$rev")
  v=$(echo "$line" | awk '{print $2}')
  old=$(required)
  GOWORK=off go mod edit -require="$SDK@$v"
  sed -i "s|^replace $SDK .* => ./sdk\$|replace $SDK $v => ./sdk|" go.work
  grep -q "^replace $SDK $v => ./sdk\$" go.work || { echo "modules: go.work has no 'replace $SDK <version> => ./sdk' line to update" >&2; exit 1; }
  sed -i "\|^$SDK $old[ /]|d" go.sum
  with_proxy go mod tidy
  # The plugin tutorial's module requires the sdk as a third party does
  # (scripts/tutorial.sh checks that it requires the daemon's version).
  ex=examples/plugins/group-filter
  eold=$(required "$ex")
  GOWORK=off go mod edit -C "$ex" -require="$SDK@$v"
  sed -i "\|^$SDK $eold[ /]|d" "$ex/go.sum"
  with_proxy go mod tidy -C "$ex"
  echo "modules: sdk pinned at $v (was $old); commit go.mod, go.sum, go.work and $ex/go.{mod,sum}"
  ;;
tidy)
  with_proxy go mod tidy
  ;;
check)
  v=$(required)
  pinned=$(commit_of "$v")
  if [ "$(git rev-parse "$pinned:sdk")" != "$(git rev-parse HEAD:sdk)" ]; then
    echo "modules: sdk/ at HEAD differs from the version go.mod requires ($v); run scripts/modules.sh pin and commit" >&2
    exit 1
  fi
  grep -q "^replace $SDK $v => ./sdk\$" go.work || { echo "modules: go.work does not serve $SDK $v from ./sdk; run scripts/modules.sh pin" >&2; exit 1; }
  if ! git diff --quiet HEAD; then
    echo "modules: note: uncommitted changes are not part of the install check (it installs HEAD)" >&2
  fi
  mv=$("$tmp/modproxy" -out "$tmp/proxy" "$MAIN=.@HEAD" "$SDK=sdk@$pinned" | awk 'NR==1{print $2}')
  echo "modules: go install $MAIN/cmd/kmirror@$mv from a clean module cache"
  GOWORK=off GOPROXY="file://$tmp/proxy,$upstream" GONOSUMDB="$MAIN" GOFLAGS= \
    GOMODCACHE="$tmp/modcache" GOBIN="$tmp/bin" go install "$MAIN/cmd/kmirror@$mv"
  out=$("$tmp/bin/kmirror" version)
  echo "$out"
  if ! grep -q "^kmirror $mv\$" <<<"$out"; then
    echo "modules: the installed binary does not report version $mv" >&2
    exit 1
  fi
  echo "modules: go install of $mv works"
  ;;
*)
  echo "usage: scripts/modules.sh pin|tidy|check" >&2
  exit 2
  ;;
esac
