#!/usr/bin/env bash
# fetch.sh resolves the Apache Kafka broker and its command-line tools from
# Maven Central into a local cache, for kmirror's end-to-end tests.
#
# Usage: scripts/kafka/fetch.sh            # prints the libs directory on stdout
#
# Environment:
#   KMIRROR_KAFKA_VERSION  Kafka version to resolve (default 4.4.0)
#   KMIRROR_KAFKA_CACHE    cache root (default $HOME/.cache/kmirror)
#
# Result: $KMIRROR_KAFKA_CACHE/kafka-<version>/libs/ holds every runtime jar
# (run a broker with `java -cp 'libs/*' kafka.Kafka server.properties`) plus
# log4j2.properties (brokers) and tools-log4j2.properties (CLI tools), both
# logging to stderr. A marker file (.complete) is written last, inside a
# temporary directory that is then renamed into place, so an interrupted run
# never leaves a libs directory that looks complete. Running it again when the
# marker exists does nothing. Concurrent runs serialise on a lock file.
#
# Needs Java 17+ and Maven. When either is missing and apt-get is available as
# root, they are installed from Debian packages; otherwise the script stops and
# says what to install.
set -euo pipefail

version="${KMIRROR_KAFKA_VERSION:-4.4.0}"
cache="${KMIRROR_KAFKA_CACHE:-${HOME:?HOME is not set; set KMIRROR_KAFKA_CACHE}/.cache/kmirror}"
dir="${cache}/kafka-${version}"
libs="${dir}/libs"
marker="${libs}/.complete"
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"

log() { echo "fetch.sh: $*" >&2; }
die() { log "$*"; exit 1; }

if [[ -f "${marker}" ]]; then
	echo "${libs}"
	exit 0
fi

java_major() {
	# `java -version` prints e.g.: openjdk version "17.0.15" 2025-04-15
	java -version 2>&1 | awk -F'"' '/version/ {split($2, v, "."); print (v[1] == "1" ? v[2] : v[1]); exit}'
}

install_with_apt() {
	if ! command -v apt-get >/dev/null 2>&1 || [[ "$(id -u)" != 0 ]]; then
		die "$1 is missing and cannot be installed here (needs apt-get as root); install Java 17+ and Maven, then re-run"
	fi
	log "installing $* with apt-get"
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -qq >&2
	apt-get install -y -qq --no-install-recommends "$@" >&2
}

if ! command -v java >/dev/null 2>&1; then
	install_with_apt openjdk-17-jre-headless
fi
jm="$(java_major)"
if [[ -z "${jm}" || "${jm}" -lt 17 ]]; then
	die "Kafka ${version} needs Java 17 or newer, found '$(java -version 2>&1 | head -n1)'; put a Java 17+ first on PATH"
fi
if ! command -v mvn >/dev/null 2>&1; then
	install_with_apt maven
fi

mkdir -p "${dir}"
exec 9>"${dir}/.lock"
flock 9
if [[ -f "${marker}" ]]; then # another run finished while we waited
	echo "${libs}"
	exit 0
fi

tmp="$(mktemp -d "${dir}/libs.tmp.XXXXXX")"
trap 'rm -rf "${tmp}"' EXIT

log "resolving Apache Kafka ${version} from Maven Central into ${libs}"
if ! mvn -q -B -Dstyle.color=never -f "${here}/pom.xml" \
	-Dkafka.version="${version}" \
	-DincludeScope=runtime \
	-DoutputDirectory="${tmp}" \
	dependency:copy-dependencies >&2; then
	die "mvn dependency:copy-dependencies failed for Kafka ${version}; check that Maven Central is reachable and the version exists"
fi
[[ -f "${tmp}/kafka_2.13-${version}.jar" ]] ||
	die "kafka_2.13-${version}.jar was not resolved; the Maven project ${here}/pom.xml is broken"
[[ -f "${tmp}/kafka-tools-${version}.jar" ]] ||
	die "kafka-tools-${version}.jar was not resolved; the Maven project ${here}/pom.xml is broken"

# Broker logging: INFO to stderr (the harness captures it per broker), with the
# chattiest request/state-change loggers turned down.
cat >"${tmp}/log4j2.properties" <<'EOF'
status = warn
name = kmirror-e2e-broker
appender.err.type = Console
appender.err.name = STDERR
appender.err.target = SYSTEM_ERR
appender.err.layout.type = PatternLayout
appender.err.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = INFO
rootLogger.appenderRef.err.ref = STDERR
logger.request.name = kafka.request.logger
logger.request.level = WARN
logger.statechange.name = state.change.logger
logger.statechange.level = WARN
logger.authorizer.name = kafka.authorizer.logger
logger.authorizer.level = INFO
logger.zstd.name = org.apache.kafka.common.compress
logger.zstd.level = WARN
EOF

# CLI tools logging: warnings only, to stderr, so stdout carries only the
# tool's output (records, descriptions).
cat >"${tmp}/tools-log4j2.properties" <<'EOF'
status = warn
name = kmirror-e2e-tools
appender.err.type = Console
appender.err.name = STDERR
appender.err.target = SYSTEM_ERR
appender.err.layout.type = PatternLayout
appender.err.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = WARN
rootLogger.appenderRef.err.ref = STDERR
EOF

echo "kafka.version=${version}" >"${tmp}/.complete"
rm -rf "${libs}"
mv "${tmp}" "${libs}"
trap - EXIT
log "Apache Kafka ${version}: $(find "${libs}" -name '*.jar' | wc -l) jars in ${libs}"
echo "${libs}"
