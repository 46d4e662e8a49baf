package config

import (
	"errors"
	"strings"
	"testing"
)

// FuzzParse feeds arbitrary YAML, environment and --set input to Parse: it
// must never panic, and a failure must always be *Errors.
func FuzzParse(f *testing.F) {
	f.Add(minimal, "KMIRROR_MIRROR_NUM_REPLICA_FETCHERS=2", "mirrors.m.sasl.password=x")
	f.Add(equivYAML, "KMIRROR_MIRRORS__DC1__CLIENT_ID=y", "state.dir=/x")
	f.Add(overrideBase, "KMIRROR_MIRRORS__A__B__C=1", "mirrors..x=1")
	f.Add("mirrors: [{name: a, mirror.acl.include: [1, {x: y}]}]", "KMIRROR_=", "=")
	f.Add("destination: {bootstrap.servers: [[]], security.protocol: SASL_SSL, sasl.jaas.config: 'x required a=\"'}", "KMIRROR_DESTINATION__=1", "destination.=")
	f.Fuzz(func(t *testing.T, yaml, env, set string) {
		_, err := Parse([]byte(yaml), "yaml", strings.Split(env, "\n"), strings.Split(set, "\n"))
		if err != nil {
			var errs *Errors
			if !errors.As(err, &errs) || len(errs.List) == 0 {
				t.Fatalf("Parse returned %T %v, want *Errors", err, err)
			}
		}
	})
}
