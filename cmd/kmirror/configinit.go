package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/kmirror/kmirror/cmd/kmirror/internal/cli"
	"github.com/kmirror/kmirror/core/config"
)

// initAnswers are what `config init` writes: one source, one destination.
type initAnswers struct {
	Name         string
	Source       string
	Destination  string
	Topics       string
	Groups       string
	StateDir     string
	HTTPAddress  string
	AdminAddress string
}

// defaultInit are config init's defaults (and what config sample
// --minimal prints).
func defaultInit() initAnswers {
	return initAnswers{
		Name:         "source-to-destination",
		Source:       "localhost:9092",
		Destination:  "localhost:9093",
		Topics:       ".*",
		Groups:       ".*",
		StateDir:     "kmirror-state",
		HTTPAddress:  "127.0.0.1:9644",
		AdminAddress: "127.0.0.1:9645",
	}
}

// yamlString is s as a YAML double-quoted scalar (a JSON string is one).
func yamlString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// minimalConfig is the commented configuration of a.
func minimalConfig(a initAnswers) string {
	return fmt.Sprintf(`# kmirror configuration: one source cluster mirrored into one destination,
# offsets preserved. Written by `+"`kmirror config init`"+`.
#
#   kmirror config validate --config kmirror.yaml   # check it
#   kmirror run --config kmirror.yaml               # run it
#   kmirror describe --config kmirror.yaml          # watch it (another shell)
#
# Every key, with its default: kmirror config reference (docs/config.md).
# A commented example of every section: kmirror config sample.
# Any key can be overridden with KMIRROR_* variables or --set KEY=VALUE.

# /healthz, /readyz and /metrics, unauthenticated: for probes and Prometheus.
http.address: %s
# The admin API of kmirror describe, mirrors, failover and failback. Its
# bearer token is created at the first start in <state.dir>/admin.token.
admin.address: %s

# The cluster kmirror writes to: mirrored topics keep their names and offsets.
# TLS and SASL take the keys Kafka clients use (security.protocol,
# ssl.truststore.location, sasl.mechanism, sasl.username, sasl.password.file).
destination:
  bootstrap.servers: %s

# Where kmirror keeps partition states, offset maps and the admin token.
state:
  dir: %s

# One entry per source cluster.
mirrors:
  - name: %s
    bootstrap.servers: %s
    # Regexes, comma-separated, each matched against whole topic names;
    # internal topics (__*) are never mirrored.
    mirror.topics.include: %s
    # Consumer groups whose committed offsets are copied.
    mirror.groups.include: %s
`, yamlString(a.HTTPAddress), yamlString(a.AdminAddress), yamlString(a.Destination), yamlString(a.StateDir),
		yamlString(a.Name), yamlString(a.Source), yamlString(a.Topics), yamlString(a.Groups))
}

func newConfigInit() *cobra.Command {
	a := defaultInit()
	var force bool
	cmd := &cobra.Command{
		Use:   "init [FILE]",
		Short: "Write a minimal, commented configuration that validates as written",
		Long: `Write a minimal, commented configuration for one source and one destination
cluster to FILE (default kmirror.yaml; - for standard output). On a terminal it
asks for what the flags do not give; otherwise --source-bootstrap and
--destination-bootstrap are required. The result is validated before it is
written; an existing file is kept unless --force.`,
		Example: cli.Examples(
			"kmirror config init",
			"kmirror config init --source-bootstrap dc1-kafka:9092 --destination-bootstrap dc2-kafka:9092 --topics 'orders.*,payments' kmirror.yaml",
			"kmirror config init --source-bootstrap dc1:9092 --destination-bootstrap dc2:9092 - | kmirror config validate --config -"),
		Args: cli.MaxArgs(1, "FILE"),
		RunE: func(cmd *cobra.Command, args []string) error {
			file := "kmirror.yaml"
			if len(args) == 1 {
				file = args[0]
			}
			given := func(name string) bool { return cmd.Flags().Changed(name) }
			if isTerminal(cmd.InOrStdin()) {
				if err := askInit(cmd.InOrStdin(), cmd.ErrOrStderr(), &a, given); err != nil {
					return err
				}
			} else {
				for _, f := range []string{"source-bootstrap", "destination-bootstrap"} {
					if !given(f) {
						return cli.Usagef("--%s is required when standard input is not a terminal", f)
					}
				}
			}
			text := minimalConfig(a)
			if _, err := config.Parse([]byte(text), "yaml", nil, nil); err != nil {
				return cli.Usagef("the configuration would not be valid; fix the values given:\n%v", err)
			}
			if file == "-" {
				_, _ = io.WriteString(cmd.OutOrStdout(), text)
				return nil
			}
			return writeInit(cmd.OutOrStdout(), file, text, force)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&a.Source, "source-bootstrap", a.Source, "the source cluster's bootstrap servers, `HOST:PORT`[,HOST:PORT...]")
	fl.StringVar(&a.Destination, "destination-bootstrap", a.Destination, "the destination cluster's bootstrap servers, `HOST:PORT`[,HOST:PORT...]")
	fl.StringVar(&a.Topics, "topics", a.Topics, "topics to mirror: comma-separated `REGEX`es matching whole names")
	fl.StringVar(&a.Groups, "groups", a.Groups, "consumer groups whose offsets are copied: comma-separated `REGEX`es")
	fl.StringVar(&a.Name, "name", a.Name, "the mirror's `NAME` ([A-Za-z0-9_-]+)")
	fl.StringVar(&a.StateDir, "state-dir", a.StateDir, "the state directory: partition states, offset maps, the admin token (`DIR`)")
	fl.StringVar(&a.HTTPAddress, "http-address", a.HTTPAddress, "health and metrics listener `HOST:PORT`")
	fl.StringVar(&a.AdminAddress, "admin-address", a.AdminAddress, "admin API listener `HOST:PORT`")
	fl.BoolVar(&force, "force", false, "replace FILE if it exists")
	return cmd
}

// writeInit writes text to file (mode 0600: it may come to hold secrets),
// refusing to replace a file unless force.
func writeInit(stdout io.Writer, file, text string, force bool) error {
	flags := os.O_WRONLY | os.O_CREATE | os.O_EXCL
	if force {
		flags = os.O_WRONLY | os.O_CREATE | os.O_TRUNC
	}
	f, err := os.OpenFile(file, flags, 0o600)
	if errors.Is(err, fs.ErrExist) {
		return cli.Failf("%s exists; pass --force to replace it, or give another FILE", file)
	}
	if err != nil {
		return cli.Fail(err)
	}
	if _, err := io.WriteString(f, text); err != nil {
		_ = f.Close()
		return cli.Fail(err)
	}
	if err := f.Close(); err != nil {
		return cli.Fail(err)
	}
	fmt.Fprintf(stdout, "wrote %s\nnext: kmirror config validate --config %s && kmirror run --config %s\n", file, file, file)
	return nil
}

// askInit asks on the terminal for each answer its flag did not give.
func askInit(in io.Reader, out io.Writer, a *initAnswers, given func(string) bool) error {
	rd := bufio.NewReader(in)
	ask := func(flag, question string, v *string) error {
		if given(flag) {
			return nil
		}
		fmt.Fprintf(out, "%s [%s]: ", question, *v)
		line, err := rd.ReadString('\n')
		if err != nil && !(errors.Is(err, io.EOF) && line != "") {
			return cli.Usagef("no answer for %q (give --%s)", question, flag)
		}
		if line = strings.TrimSpace(line); line != "" {
			*v = line
		}
		return nil
	}
	fmt.Fprintln(out, "A first kmirror configuration: one source cluster mirrored into one destination. Enter keeps the default.")
	for _, q := range []struct {
		flag, question string
		v              *string
	}{
		{"source-bootstrap", "Source cluster bootstrap servers", &a.Source},
		{"destination-bootstrap", "Destination cluster bootstrap servers", &a.Destination},
		{"topics", "Topics to mirror (regexes, comma-separated)", &a.Topics},
		{"name", "Mirror name", &a.Name},
		{"state-dir", "State directory", &a.StateDir},
	} {
		if err := ask(q.flag, q.question, q.v); err != nil {
			return err
		}
	}
	return nil
}
