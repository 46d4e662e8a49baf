#!/usr/bin/env bash
# Checks the deployment files in deploy/ (docs/operations.md, "Deploying";
# `make deploy-check`, part of `make test`):
#   - deploy/check (its own Go module, outside go.work, so that Prometheus,
#     Helm and the Kubernetes libraries stay out of the daemon's module):
#     the Grafana dashboard's and the alert rules' PromQL parsed by
#     Prometheus's parser, the rules as `promtool check rules` checks them,
#     every metric one of deploy/metrics.txt; the Kubernetes manifests and
#     the rendered Helm chart decoded strictly with the API types, their
#     kmirror.yaml passed through `kmirror config validate`; the Dockerfile
#     parsed and linted as BuildKit does.
#     (deploy/metrics.txt itself is proved by `go test ./deploy`, a unit test
#     of the daemon's module.)
#   - the systemd unit with `systemd-analyze verify` (Debian's systemd
#     package, installed when missing), warnings included, and its exposure
#     with `systemd-analyze security --offline`.
set -euo pipefail
cd "$(dirname "$0")/.."

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

echo "deploy-check: building kmirror"
go build -o "$tmp/kmirror" ./cmd/kmirror

echo "deploy-check: deploy/check (dashboard, rules, Kubernetes, Helm, Dockerfile)"
staticcheck=$(go tool -n staticcheck) # pinned in the daemon's go.mod
(cd deploy/check && GOWORK=off go vet ./... && GOWORK=off "$staticcheck" ./... &&
  GOWORK=off KMIRROR_BIN="$tmp/kmirror" go test -count=1 ./...)

if ! command -v systemd-analyze >/dev/null 2>&1; then
  echo "deploy-check: installing Debian's systemd package for systemd-analyze"
  if [ "$(id -u)" -ne 0 ]; then SUDO=sudo; else SUDO=; fi
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq systemd
fi
echo "deploy-check: systemd-analyze verify deploy/systemd/kmirror.service"
# verify checks that ExecStart's binary exists: point the unit at the one
# just built, under the same file name.
mkdir -p "$tmp/unit"
sed "s|/usr/local/bin/kmirror|$tmp/kmirror|g" deploy/systemd/kmirror.service > "$tmp/unit/kmirror.service"
# systemd-analyze verify exits 0 on unknown keys and bad values; it only
# warns. Any output is a failure.
out=$(systemd-analyze verify "$tmp/unit/kmirror.service" 2>&1) || { echo "$out"; exit 1; }
if [ -n "$out" ]; then
  echo "$out"
  echo "deploy-check: systemd-analyze verify warned about deploy/systemd/kmirror.service" >&2
  exit 1
fi
# Exposure 0 (locked down) … 10 (unprotected), printed with one decimal;
# --threshold counts in tenths: fail above 3.0. Keep the unit hardened.
systemd-analyze security --offline=yes --threshold=30 "$tmp/unit/kmirror.service" >"$tmp/security.txt" 2>&1 || {
  tail -n 3 "$tmp/security.txt"
  echo "deploy-check: the systemd unit's exposure is above 3 (systemd-analyze security)" >&2
  exit 1
}
tail -n 1 "$tmp/security.txt"
echo "deploy-check: ok"
