package kafkatest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
)

// ErrToolFailed is returned when a Kafka tool exits non-zero.
var ErrToolFailed = errors.New("kafkatest: kafka tool failed")

// RunTool runs one of Kafka's command-line tools by its main class (e.g.
// "org.apache.kafka.tools.consumer.ConsoleConsumer",
// "org.apache.kafka.tools.DumpLogSegments",
// "org.apache.kafka.tools.TransactionsCommand") with the given arguments and
// returns its standard output. The tool logs warnings to standard error,
// which is quoted (its tail) in the error when it exits non-zero.
// Cancelling ctx kills it.
func (d *Dist) RunTool(ctx context.Context, mainClass string, args ...string) ([]byte, error) {
	jargs := []string{
		"-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-XX:-UsePerfData",
		"-Djava.awt.headless=true",
	}
	jargs = append(jargs, d.logFlags(true)...)
	jargs = append(jargs, "-cp", filepath.Join(d.LibsDir, "*"), mainClass)
	cmd := exec.CommandContext(ctx, d.Java, append(jargs, args...)...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	if err := startProcess(cmd); err != nil {
		return nil, fmt.Errorf("kafkatest: start %s: %w", mainClass, err)
	}
	if err := cmd.Wait(); err != nil {
		return stdout.Bytes(), fmt.Errorf("%w: %s %s: %w; stderr:\n%s", ErrToolFailed, shortClass(mainClass),
			redactPasswords(strings.Join(args, " ")), err, redactPasswords(tail(stderr.Bytes(), 30)))
	}
	return stdout.Bytes(), nil
}

// RunTool runs a Kafka tool from the cluster's installation; see Dist.RunTool.
// Point it at the cluster with BootstrapServers and, for secured listeners,
// ClientConfigFile.
func (c *Cluster) RunTool(ctx context.Context, mainClass string, args ...string) ([]byte, error) {
	return c.dist.RunTool(ctx, mainClass, args...)
}

// passwordInArgsRE matches the password of a StorageTool --add-scram argument and
// of a JAAS config.
var passwordInArgsRE = regexp.MustCompile(`(password=)("[^"]*"|[^,\]\s]*)`)

// redactPasswords hides passwords in tool arguments and output quoted in
// errors.
func redactPasswords(s string) string { return passwordInArgsRE.ReplaceAllString(s, "${1}***") }

func shortClass(c string) string { return c[strings.LastIndex(c, ".")+1:] }
