#!/usr/bin/env bash
# fetch.sh resolves Apache Kafka's MirrorMaker 2 (connect-mirror and its
# runtime dependencies) from Maven Central into a local cache, for kmirror's
# benchmark (`make bench`, `make bench-quick`). `make deps` does not run it:
# only the benchmark needs MirrorMaker 2.
#
# Usage: scripts/mm2/fetch.sh            # prints the libs directory on stdout
#
# Environment:
#   KMIRROR_MM2_VERSION   connect-mirror version (default 4.3.1, the newest on
#                         Maven Central; it runs against 4.4.0 brokers)
#   KMIRROR_KAFKA_CACHE   cache root (default $HOME/.cache/kmirror)
#
# Result: $KMIRROR_KAFKA_CACHE/mm2-<version>/libs/ holds every runtime jar
# plus log4j2.properties (INFO to stderr). As scripts/kafka/fetch.sh: a
# marker file written last inside a temporary directory renamed into place,
# a lock against concurrent runs, nothing done when the marker exists. Java
# and Maven come from scripts/kafka/fetch.sh's checks (run it first, or have
# them on PATH).
set -euo pipefail

version="${KMIRROR_MM2_VERSION:-4.3.1}"
cache="${KMIRROR_KAFKA_CACHE:-${HOME:?HOME is not set; set KMIRROR_KAFKA_CACHE}/.cache/kmirror}"
dir="${cache}/mm2-${version}"
libs="${dir}/libs"
marker="${libs}/.complete"
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"

log() { echo "mm2/fetch.sh: $*" >&2; }
die() { log "$*"; exit 1; }

if [[ -f "${marker}" ]]; then
	echo "${libs}"
	exit 0
fi
command -v java >/dev/null 2>&1 || die "java is missing; run scripts/kafka/fetch.sh (it installs Java 17) or install Java 17+"
if ! command -v mvn >/dev/null 2>&1; then
	"${here}/../kafka/fetch.sh" >/dev/null # installs Maven with apt-get where it can
	command -v mvn >/dev/null 2>&1 || die "mvn is missing; install Maven"
fi

mkdir -p "${dir}"
exec 9>"${dir}/.lock"
flock 9
if [[ -f "${marker}" ]]; then
	echo "${libs}"
	exit 0
fi
tmp="$(mktemp -d "${dir}/libs.tmp.XXXXXX")"
trap 'rm -rf "${tmp}"' EXIT

log "resolving connect-mirror ${version} from Maven Central into ${libs}"
if ! mvn -q -B -Dstyle.color=never -f "${here}/pom.xml" \
	-Dmm2.version="${version}" \
	-DincludeScope=runtime \
	-DoutputDirectory="${tmp}" \
	dependency:copy-dependencies >&2; then
	die "mvn dependency:copy-dependencies failed for connect-mirror ${version}; check that Maven Central is reachable and the version exists"
fi
[[ -f "${tmp}/connect-mirror-${version}.jar" ]] ||
	die "connect-mirror-${version}.jar was not resolved; the Maven project ${here}/pom.xml is broken"

cat >"${tmp}/log4j2.properties" <<'PROPS'
status = warn
name = kmirror-bench-mm2
appender.err.type = Console
appender.err.name = STDERR
appender.err.target = SYSTEM_ERR
appender.err.layout.type = PatternLayout
appender.err.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = INFO
rootLogger.appenderRef.err.ref = STDERR
PROPS

echo "connect-mirror.version=${version}" >"${tmp}/.complete"
rm -rf "${libs}"
mv "${tmp}" "${libs}"
trap - EXIT
log "connect-mirror ${version}: $(find "${libs}" -name '*.jar' | wc -l) jars in ${libs}"
echo "${libs}"
