// Command filterplugin is a filter plugin for core/pluginhost's tests. It
// keeps the topics whose names start with $KMIRROR_TEST_KEEP, logs
// "serving" at start and appends a line to $KMIRROR_TEST_MARKER, so a test
// can count launches.
//
// With KMIRROR_TEST_SCHEMA=1 it is built from its configuration instead
// (a Schema with the keys keep and marker, and a constructor that logs
// "configured"). That form cannot be dispensed yet: the filter adaptor
// reads a constructor-built filter's Info before it is configured (see
// the report of the host branch), so the tests use it only where the
// host refuses the configuration before dispensing.
package main

import (
	"context"
	"os"
	"strings"

	"github.com/hashicorp/go-hclog"

	"github.com/kmirror/kmirror/sdk/filter"
	"github.com/kmirror/kmirror/sdk/plugin"
)

func keep(prefix string) filter.Filter {
	return filter.Funcs{Name: "test", Topics: func(_ context.Context, _ string, in []filter.Topic) ([]filter.Topic, error) {
		var out []filter.Topic
		for _, t := range in {
			if strings.HasPrefix(t.Name, prefix) {
				out = append(out, t)
			}
		}
		return out, nil
	}}
}

func main() {
	log := hclog.New(&hclog.LoggerOptions{Name: "filter", Output: os.Stderr, JSONFormat: true})
	if os.Getenv("KMIRROR_TEST_SCHEMA") == "1" {
		plugin.Serve(plugin.ServeConfig{
			Schema: plugin.Schema{
				{Name: "keep", Type: plugin.FieldString, Description: "prefix of the topics kept"},
				{Name: "marker", Type: plugin.FieldString, Description: "file that gets a line per Configure"},
			},
			NewFilter: func(_ context.Context, name string, c plugin.Config) (filter.Filter, error) {
				var cfg struct {
					Keep   string `json:"keep"`
					Marker string `json:"marker"`
				}
				if err := c.Decode(&cfg); err != nil {
					return nil, err
				}
				if cfg.Marker != "" {
					mark(cfg.Marker)
				}
				log.Info("configured", "name", name)
				return keep(cfg.Keep), nil
			},
			Logger: log,
		})
		return
	}
	if m := os.Getenv("KMIRROR_TEST_MARKER"); m != "" {
		mark(m)
	}
	log.Info("serving", "pid", os.Getpid())
	plugin.Serve(plugin.ServeConfig{Filter: keep(os.Getenv("KMIRROR_TEST_KEEP")), Logger: log})
}

func mark(file string) {
	f, err := os.OpenFile(file, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o600)
	if err != nil {
		os.Exit(3)
	}
	_, _ = f.WriteString("started\n")
	_ = f.Close()
}
