package kafkatest

import (
	"archive/zip"
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
)

// Dist is a resolved Apache Kafka installation: the jars and the java binary
// that runs them.
type Dist struct {
	// LibsDir holds every runtime jar plus log4j2.properties and
	// tools-log4j2.properties (written by scripts/kafka/fetch.sh).
	LibsDir string
	// Java is the java binary.
	Java string
	// Version is the Apache Kafka version, e.g. "4.4.0", and Commit its
	// commit id, both read from the kafka-clients jar as AppInfoParser does.
	Version, Commit string
}

var (
	distMu sync.Mutex
	dist   *Dist // set by the first successful Resolve
)

// Resolve finds the Kafka jars once per process: KMIRROR_KAFKA_LIBS when set,
// else the output of scripts/kafka/fetch.sh (found by walking up from the
// working directory to the directory holding go.work), which downloads them
// on first use.
func Resolve(ctx context.Context) (*Dist, error) {
	distMu.Lock()
	defer distMu.Unlock()
	if dist != nil {
		return dist, nil
	}
	d, err := resolve(ctx, "")
	if err != nil {
		return nil, err
	}
	dist = d
	return d, nil
}

// resolve finds the jars of version ("": KMIRROR_KAFKA_LIBS when set, else
// fetch.sh's default version).
func resolve(ctx context.Context, version string) (*Dist, error) {
	java := "java"
	if jh := os.Getenv("JAVA_HOME"); jh != "" {
		java = filepath.Join(jh, "bin", "java")
	}
	var libs string
	if version == "" {
		libs = os.Getenv("KMIRROR_KAFKA_LIBS")
	}
	if libs == "" {
		root, err := repoRoot()
		if err != nil {
			return nil, err
		}
		script := filepath.Join(root, "scripts", "kafka", "fetch.sh")
		cmd := exec.CommandContext(ctx, "bash", script)
		if version != "" {
			cmd.Env = append(os.Environ(), "KMIRROR_KAFKA_VERSION="+version)
		}
		// fetch.sh reports progress (a first download takes a while) on
		// stderr; pass it through and keep it for the error.
		var stderr bytes.Buffer
		cmd.Stderr = io.MultiWriter(os.Stderr, &stderr)
		out, err := cmd.Output()
		if err != nil {
			return nil, fmt.Errorf("kafkatest: %s failed (%w); its output:\n%s", script, err, tail(stderr.Bytes(), 30))
		}
		libs = strings.TrimSpace(string(out))
	}
	if _, err := exec.LookPath(java); err != nil {
		return nil, fmt.Errorf("kafkatest: no java binary (%w); install Java 17+ or set JAVA_HOME", err)
	}
	got, commit, err := kafkaVersion(libs)
	if err != nil {
		return nil, err
	}
	if version != "" && got != version {
		return nil, fmt.Errorf("kafkatest: %s holds Apache Kafka %s, not %s", libs, got, version)
	}
	d := &Dist{LibsDir: libs, Java: java, Version: got, Commit: commit}
	if !d.AtLeast(4, 0) { // log4j 1 is on the classpath (version.go)
		if err := writeLog4j1Configs(libs); err != nil {
			return nil, err
		}
	}
	return d, nil
}

// repoRoot walks up from the working directory to the one holding go.work.
func repoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("kafkatest: working directory: %w", err)
	}
	for d := dir; ; d = filepath.Dir(d) {
		if _, err := os.Stat(filepath.Join(d, "go.work")); err == nil {
			return d, nil
		}
		if filepath.Dir(d) == d {
			return "", fmt.Errorf("kafkatest: no go.work above %s; run the tests inside the kmirror repository or set KMIRROR_KAFKA_LIBS", dir)
		}
	}
}

// kafkaVersion reads kafka/kafka-version.properties from the kafka-clients
// jar in libs, the file AppInfoParser logs "Kafka version" from.
func kafkaVersion(libs string) (version, commit string, err error) {
	jars, _ := filepath.Glob(filepath.Join(libs, "kafka-clients-*.jar"))
	if len(jars) != 1 {
		return "", "", fmt.Errorf("kafkatest: want one kafka-clients jar in %s, found %d; re-run scripts/kafka/fetch.sh", libs, len(jars))
	}
	zr, err := zip.OpenReader(jars[0])
	if err != nil {
		return "", "", fmt.Errorf("kafkatest: open %s: %w", jars[0], err)
	}
	defer zr.Close()
	f, err := zr.Open("kafka/kafka-version.properties")
	if err != nil {
		return "", "", fmt.Errorf("kafkatest: read version from %s: %w", jars[0], err)
	}
	defer f.Close()
	props, err := readProperties(f)
	if err != nil {
		return "", "", fmt.Errorf("kafkatest: read version from %s: %w", jars[0], err)
	}
	if props["version"] == "" {
		return "", "", fmt.Errorf("kafkatest: %s has no version in kafka-version.properties", jars[0])
	}
	return props["version"], props["commitId"], nil
}

// readProperties parses the simple key=value lines of a Java properties file
// (no continuations or escapes, which the files read here do not use).
func readProperties(r io.Reader) (map[string]string, error) {
	props := map[string]string{}
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || line[0] == '#' || line[0] == '!' {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok {
			continue
		}
		props[strings.TrimSpace(k)] = strings.TrimSpace(v)
	}
	return props, sc.Err()
}

// tail returns the last n lines of b.
func tail(b []byte, n int) string {
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
