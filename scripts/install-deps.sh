#!/usr/bin/env bash
# Installs what kmirror's build and tests need on a fresh Debian machine:
# Go modules, etcd (for the etcd state store's tests), a Java 17+ runtime and
# Maven (for the real Apache Kafka brokers of the e2e tests), the Kafka jars
# themselves (through Maven Central), headless Chromium (the status page's
# e2e test), MIT Kerberos's KDC and tools (the GSSAPI e2e tests), and the
# Python filter plugin's
# virtualenv with its pinned packages (from PyPI).
# Idempotent: it only installs what is missing.
set -euo pipefail
cd "$(dirname "$0")/.."

need_apt=()
command -v java >/dev/null 2>&1 || need_apt+=(openjdk-17-jre-headless)
command -v mvn >/dev/null 2>&1 || need_apt+=(maven)
command -v git >/dev/null 2>&1 || need_apt+=(git)
# protoc, for the check that the SDK's generated gRPC code is fresh (make lint).
command -v protoc >/dev/null 2>&1 || need_apt+=(protobuf-compiler)
# etcd, which the tests of the etcd state store start (internal/etcdtest).
command -v etcd >/dev/null 2>&1 || need_apt+=(etcd-server)
# python3 with venv, for the Python filter plugin (plugins/filters/python-groups).
command -v python3 >/dev/null 2>&1 || need_apt+=(python3)
if ! python3 -c 'import venv, ensurepip' >/dev/null 2>&1; then need_apt+=(python3-venv); fi
# MIT Kerberos (a KDC, its admin tools and the client tools), which the
# GSSAPI e2e tests run (e2e/kerberos: krb5kdc, kdb5_util, kadmin.local).
if ! command -v krb5kdc >/dev/null 2>&1 && [ ! -x /usr/sbin/krb5kdc ]; then need_apt+=(krb5-kdc); fi
if ! command -v kadmin.local >/dev/null 2>&1 && [ ! -x /usr/sbin/kadmin.local ]; then need_apt+=(krb5-admin-server); fi
command -v klist >/dev/null 2>&1 || need_apt+=(krb5-user)
# headless Chromium, which the status page's e2e test loads the page in.
command -v chromium >/dev/null 2>&1 || need_apt+=(chromium)
if [ "${#need_apt[@]}" -gt 0 ]; then
  echo "install-deps: installing Debian packages: ${need_apt[*]}"
  if [ "$(id -u)" -ne 0 ]; then SUDO=sudo; else SUDO=; fi
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${need_apt[@]}"
fi

if ! command -v go >/dev/null 2>&1; then
  echo "install-deps: Go is required (go 1.26 or newer) and was not found on PATH" >&2
  exit 1
fi

echo "install-deps: downloading Go modules"
go mod download
(cd sdk && go mod download)

if [ -x scripts/kafka/fetch.sh ]; then
  echo "install-deps: resolving Apache Kafka jars from Maven Central"
  scripts/kafka/fetch.sh >/dev/null
fi

echo "install-deps: the Python filter plugin's virtualenv (scripts/pyfilter.sh)"
scripts/pyfilter.sh venv >/dev/null
