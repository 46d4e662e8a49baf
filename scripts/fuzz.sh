#!/usr/bin/env bash
# Runs every Go fuzz target of both modules (the daemon's and sdk/) for a
# bounded time each: `make fuzz`, and `make test` with FUZZTIME=5s.
#
#   scripts/fuzz.sh            every target, FUZZTIME each (default 10s)
#   scripts/fuzz.sh -list      print the targets, one "module package target" a line
#   scripts/fuzz.sh REGEX      only the targets whose "package target" matches REGEX
#
# The targets are found by scanning the test files for
# `func FuzzX(f *testing.F)`, so a new target runs without a change here.
# Go fuzzes one target per `go test -fuzz` call, so each runs on its own.
# A failing input is written by Go to <package>/testdata/fuzz/<Target>/:
# commit it with the fix, and it stays a regression test that plain
# `go test` runs. The corpus Go grows while fuzzing stays in
# $(go env GOCACHE)/fuzz. docs/testing.md ("Fuzzing") says more.
set -euo pipefail
cd "$(dirname "$0")/.."

FUZZTIME=${FUZZTIME:-10s}
GO=${GO:-go}
# The modules joined by go.work; examples/ holds third-party style modules
# with tests of their own (scripts/tutorial.sh).
MODULES=(. sdk)

# targets prints "module package target" for every fuzz target of module
# $1, skipping directories that belong to another module and the packages
# whose tests need real brokers (e2e, bench).
targets() {
  local mod=$1 file dir rel sub nested
  while IFS= read -r file; do
    dir=$(dirname "$file")
    rel=${dir#"$mod"/}
    [[ $dir == "$mod" ]] && rel=.
    case /$rel/ in
      */testdata/* | /e2e/* | /bench/* | */vendor/*) continue ;;
    esac
    # A go.mod between the file and the module root: another module.
    nested=
    sub=$dir
    while [[ $sub != "$mod" && $sub != . ]]; do
      if [[ -f $sub/go.mod ]]; then nested=1; break; fi
      sub=$(dirname "$sub")
    done
    [[ -n $nested ]] && continue
    sed -n 's/^func \(Fuzz[A-Za-z0-9_]*\)(\([a-z]*\) \*testing\.F).*/\1/p' "$file" |
      while IFS= read -r name; do echo "$mod ./$rel $name"; done
  done < <(find "$mod" -name '*_test.go' -not -path '*/.git/*' | LC_ALL=C sort)
}

list=()
for mod in "${MODULES[@]}"; do
  while IFS= read -r line; do list+=("$line"); done < <(targets "$mod")
done

if [[ ${1:-} == -list ]]; then
  printf '%s\n' "${list[@]}"
  exit 0
fi
filter=${1:-}

# fuzz_one runs one target. Go's fuzzer can end a run whose -fuzztime ran
# out while it was still minimizing a new interesting input with "context
# deadline exceeded" and exit 1, although no input failed (no "Failing input
# written" line). Such a run is tried once more; a run that fails that way
# twice is reported as a warning, not a failure. Any failing input fails.
fuzz_one() {
  local mod=$1 pkg=$2 name=$3 out attempt
  out=$(mktemp)
  for attempt in 1 2; do
    if (cd "$mod" && $GO test -run '^$' -fuzz "^${name}\$" -fuzztime "$FUZZTIME" "$pkg") 2>&1 | tee "$out"; [ "${PIPESTATUS[0]}" -eq 0 ]; then
      rm -f "$out"
      return 0
    fi
    if grep -q "Failing input written to" "$out" || ! grep -q "context deadline exceeded" "$out"; then
      rm -f "$out"
      return 1
    fi
    echo "fuzz: $name: Go's fuzzer stopped on its own deadline with no failing input (attempt $attempt)" >&2
  done
  rm -f "$out"
  echo "fuzz: warning: $name ended on Go's deadline twice with no failing input; not counted as a failure" >&2
  return 0
}

failed=()
ran=0
start=$SECONDS
for entry in "${list[@]}"; do
  read -r mod pkg name <<<"$entry"
  if [[ -n $filter && ! "$pkg $name" =~ $filter ]]; then
    continue
  fi
  ran=$((ran + 1))
  echo "fuzz: $name in $pkg (module $mod) for $FUZZTIME"
  if ! fuzz_one "$mod" "$pkg" "$name"; then
    failed+=("$name in $pkg (module $mod)")
  fi
done

echo "fuzz: $ran targets in $((SECONDS - start))s"
if ((${#failed[@]} > 0)); then
  echo "fuzz: FAILED:" >&2
  printf '  %s\n' "${failed[@]}" >&2
  echo "fuzz: Go wrote each failing input under <package>/testdata/fuzz/<Target>/; fix the bug and commit that file with the fix (docs/testing.md, \"Fuzzing\")" >&2
  exit 1
fi
if ((ran == 0)); then
  echo "fuzz: no target matched ${filter:-anything}" >&2
  exit 1
fi
