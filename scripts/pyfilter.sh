#!/usr/bin/env bash
# The Python filter plugin of plugins/filters/python-groups: its virtualenv,
# its generated gRPC stubs and its unit tests (docs/plugins.md, "Plugins in
# other languages").
#
#   scripts/pyfilter.sh venv      create or refresh the virtualenv with the
#                                 pins of requirements.txt, then print the
#                                 plugin's launcher path (its executable)
#   scripts/pyfilter.sh generate  regenerate gen/ from sdk/proto
#   scripts/pyfilter.sh check     fail when the committed gen/ is stale
#   scripts/pyfilter.sh test      the plugin's Python unit tests
#
# The virtualenv lives in .cache/pyfilter-venv (git-ignored), or where
# KMIRROR_PYFILTER_VENV says; the launcher reads the same variable. It is
# rebuilt when requirements.txt or the Python interpreter changes. Needs
# python3 (3.11 or newer) with the venv module (Debian: python3-venv;
# scripts/install-deps.sh installs it).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
plugin="$root/plugins/filters/python-groups"
venv=${KMIRROR_PYFILTER_VENV:-$root/.cache/pyfilter-venv}
# The protocols the plugin speaks: every plugin's config service and the
# filter kind's service.
protos=(kmirror/plugin/config/v1/config.proto kmirror/plugin/filter/v1/filter.proto)

die() { echo "pyfilter: $*" >&2; exit 1; }

ensure_venv() {
  command -v python3 >/dev/null 2>&1 || die "python3 not found; run scripts/install-deps.sh (Debian: apt-get install python3 python3-venv)"
  # 3.11: asyncio's StreamWriter.start_tls (the plugin's TLS frontend).
  python3 -c 'import sys; sys.exit(sys.version_info < (3, 11))' || die "python3 is $(python3 -V 2>&1); the plugin needs Python 3.11 or newer"
  local stamp want
  # Test processes may ask at once (go test runs packages in parallel):
  # one builds, the others wait for it.
  mkdir -p "$(dirname "$venv")"
  exec 9>"$venv.lock"
  flock 9
  want="$(sha256sum "$plugin/requirements.txt" | cut -d' ' -f1) $(python3 -c 'import sys; print(sys.version.split()[0])')"
  stamp="$venv/.kmirror-requirements"
  if [ -x "$venv/bin/python" ] && [ "$(cat "$stamp" 2>/dev/null)" = "$want" ]; then
    return
  fi
  echo "pyfilter: creating the virtualenv $venv" >&2
  rm -rf "$venv"
  python3 -m venv "$venv" || die "python3 -m venv failed; install the venv module (Debian: apt-get install python3-venv)"
  "$venv/bin/python" -m pip install --quiet --disable-pip-version-check --no-deps -r "$plugin/requirements.txt" >&2
  "$venv/bin/python" -m pip check >&2 || die "requirements.txt is not a consistent set of pins"
  echo "$want" >"$stamp"
}

generate_into() {
  local out=$1
  mkdir -p "$out"
  (cd sdk/proto && "$venv/bin/python" -m grpc_tools.protoc -I . --python_out="$out" --grpc_python_out="$out" "${protos[@]}")
}

case "${1:-}" in
venv)
  ensure_venv
  echo "$plugin/kmirror-filter-python-groups"
  ;;
generate)
  ensure_venv
  rm -rf "$plugin/gen"
  generate_into "$plugin/gen"
  echo "pyfilter: generated $(find "$plugin/gen" -name '*.py' | wc -l) files into plugins/filters/python-groups/gen" >&2
  ;;
check)
  ensure_venv
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' EXIT
  generate_into "$tmp"
  if ! diff -r -x __pycache__ "$tmp" "$plugin/gen" >&2; then
    die "plugins/filters/python-groups/gen is stale: run scripts/pyfilter.sh generate and commit the result"
  fi
  echo "pyfilter: generated Python code is up to date" >&2
  ;;
test)
  ensure_venv
  cd "$plugin"
  GRPC_VERBOSITY=ERROR PYTHONPATH="$plugin:$plugin/gen" PYTHONDONTWRITEBYTECODE=1 "$venv/bin/python" -m unittest discover -s tests -t . -v
  ;;
*)
  sed -n '2,17p' "$0" | sed 's/^# \{0,1\}//' >&2
  exit 2
  ;;
esac
