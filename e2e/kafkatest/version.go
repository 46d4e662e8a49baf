package kafkatest

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
)

// Older Apache Kafka releases run too, for kmirror's source compatibility
// matrix (docs/compatibility.md): a cluster of another version than the
// default one is started with Options.Dist set to ResolveVersion's result.
//
//   - 3.x and later run in KRaft mode, as 4.x does (combined nodes, static
//     controller.quorum.voters, storage formatted by StorageTool).
//   - 2.x runs in ZooKeeper mode: the cluster starts a ZooKeeper server from
//     the same jars first (zookeeper.go), brokers get broker.id and
//     zookeeper.connect instead of the KRaft keys, and nothing is formatted.
//     SCRAM users (written at format time in KRaft) are not supported there.
//     Only Start and Close are exercised in this mode (e2e/compat); a broker
//     killed and restarted at once may meet its old registration until the
//     ZooKeeper session (zookeeper.session.timeout.ms, 6 s here) expires.
//   - Releases before 4.0 log through log4j 1 (log4j or reload4j); the
//     harness writes a log4j 1 configuration next to the log4j2 one and
//     passes both, so whichever binding SLF4J picks logs to stderr.

var (
	versionsMu sync.Mutex
	versions   = map[string]*Dist{} // by version, set by ResolveVersion
)

// ResolveVersion resolves Apache Kafka version (e.g. "3.9.1") once per
// process: it runs scripts/kafka/fetch.sh with KMIRROR_KAFKA_VERSION set,
// which downloads the jars on first use. KMIRROR_KAFKA_LIBS is not read.
func ResolveVersion(ctx context.Context, version string) (*Dist, error) {
	if _, _, ok := parseVersion(version); !ok {
		return nil, fmt.Errorf("%w: Kafka version %q is not MAJOR.MINOR[.PATCH]", ErrInvalidOptions, version)
	}
	versionsMu.Lock()
	defer versionsMu.Unlock()
	if d := versions[version]; d != nil {
		return d, nil
	}
	d, err := resolve(ctx, version)
	if err != nil {
		return nil, err
	}
	versions[version] = d
	return d, nil
}

// parseVersion returns the major and minor numbers of a Kafka version.
func parseVersion(v string) (major, minor int, ok bool) {
	parts := strings.Split(v, ".")
	if len(parts) < 2 {
		return 0, 0, false
	}
	major, err1 := strconv.Atoi(parts[0])
	minor, err2 := strconv.Atoi(parts[1])
	return major, minor, err1 == nil && err2 == nil
}

// AtLeast reports whether the installation is Apache Kafka major.minor or
// later.
func (d *Dist) AtLeast(major, minor int) bool {
	ma, mi, ok := parseVersion(d.Version)
	if !ok {
		return true // an unparsable version is taken as the newest
	}
	return ma > major || ma == major && mi >= minor
}

// ZooKeeper reports whether the harness runs this version in ZooKeeper mode
// (releases before 3.0, whose KRaft mode was an early access preview).
func (d *Dist) ZooKeeper() bool { return !d.AtLeast(3, 0) }

// Log4j 1 configurations, written next to fetch.sh's log4j2 ones: the same
// levels and format, to stderr.
const (
	log4j1Broker = `# Written by kmirror's e2e harness (e2e/kafkatest) for Kafka releases before 4.0.
log4j.rootLogger=INFO, stderr
log4j.appender.stderr=org.apache.log4j.ConsoleAppender
log4j.appender.stderr.Target=System.err
log4j.appender.stderr.layout=org.apache.log4j.PatternLayout
log4j.appender.stderr.layout.ConversionPattern=[%d] %p %m (%c)%n
log4j.logger.kafka.request.logger=WARN
log4j.logger.state.change.logger=WARN
log4j.logger.kafka.authorizer.logger=INFO
log4j.logger.org.apache.zookeeper=WARN
`
	log4j1Tools = `# Written by kmirror's e2e harness (e2e/kafkatest) for Kafka releases before 4.0.
log4j.rootLogger=WARN, stderr
log4j.appender.stderr=org.apache.log4j.ConsoleAppender
log4j.appender.stderr.Target=System.err
log4j.appender.stderr.layout=org.apache.log4j.PatternLayout
log4j.appender.stderr.layout.ConversionPattern=[%d] %p %m (%c)%n
`
)

// writeLog4j1Configs writes log4j.properties and tools-log4j.properties into
// libs unless they are there (each through a temporary file and a rename, so
// concurrent test processes never read half a file).
func writeLog4j1Configs(libs string) error {
	for name, content := range map[string]string{"log4j.properties": log4j1Broker, "tools-log4j.properties": log4j1Tools} {
		path := filepath.Join(libs, name)
		if _, err := os.Stat(path); err == nil {
			continue
		}
		f, err := os.CreateTemp(libs, name+".tmp*")
		if err != nil {
			return fmt.Errorf("kafkatest: write %s: %w", path, err)
		}
		_, err = f.WriteString(content)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err == nil {
			err = os.Rename(f.Name(), path)
		}
		if err != nil {
			os.Remove(f.Name())
			return fmt.Errorf("kafkatest: write %s: %w", path, err)
		}
	}
	return nil
}

// logFlags are the JVM flags that point both logging back ends at the
// installation's configuration for brokers (tools false) or tools. (From
// Kafka 4.0 there is no log4j 1 on the classpath and no log4j 1 file is
// written: the property is then read by nothing.)
func (d *Dist) logFlags(tools bool) []string {
	prefix := ""
	if tools {
		prefix = "tools-"
	}
	return []string{
		"-Dlog4j2.configurationFile=" + filepath.Join(d.LibsDir, prefix+"log4j2.properties"),
		"-Dlog4j.configuration=file:" + filepath.Join(d.LibsDir, prefix+"log4j.properties"),
	}
}
