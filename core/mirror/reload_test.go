package mirror

import (
	"fmt"
	"testing"

	"github.com/kmirror/kmirror/core/config"
)

// TestReloadDetectsExactlyTheChangedSettings: a reload restarts a mirror
// (or refuses a destination or state change) when one of its keys' effective
// values changed, down to a key of a mirror's source cluster, and not when
// the configuration only says the same thing again (a key set to its
// default, a daemon-wide key, another mirror's key). A set secret compares
// as redacted, as it always has.
func TestReloadDetectsExactlyTheChangedSettings(t *testing.T) {
	t.Parallel()
	parse := func(daemon, dst, dc1, dc2 string) *config.Config {
		t.Helper()
		yaml := fmt.Sprintf(`%s
destination:
  bootstrap.servers: dst:9092
%s
state:
  dir: /unused
mirrors:
  - name: dc1
    bootstrap.servers: dc1:9092
    mirror.topics.include: "orders.*"
    security.protocol: SASL_PLAINTEXT
    sasl.username: mirror
%s
%s`, daemon, dst, dc1, dc2)
		cfg, err := config.Parse([]byte(yaml), "yaml", nil, nil)
		if err != nil {
			t.Fatalf("%v\n%s", err, yaml)
		}
		return cfg
	}
	const dc2 = `  - name: dc2
    bootstrap.servers: dc2:9092`
	const password = "    sasl.mechanism: PLAIN\n    sasl.password: first"
	base := parse("", "", password, dc2)
	for _, tc := range []struct {
		name                string
		cfg                 *config.Config
		dst, dc1, dc2Change bool
	}{
		{"the same configuration parsed again", parse("", "", password, dc2), false, false, false},
		{"a mirror key set to its default", parse("", "", password+"\n    mirror.topics.exclude: \"__.*\"", dc2), false, false, false},
		{"a daemon-wide key", parse("mirror.replication.throttled.rate: 1048576", "", password, dc2), false, false, false},
		{"only the value of a set secret", parse("", "", "    sasl.mechanism: PLAIN\n    sasl.password: second", dc2), false, false, false},
		{"a mirror's own key", parse("", "", password+"\n    mirror.topics.exclude: \"orders-tmp.*\"", dc2), false, true, false},
		{"a key of a mirror's source cluster", parse("", "", password+"\n    client.id: dc1-reader", dc2), false, true, false},
		{"the SASL mechanism of a mirror's source cluster", parse("", "", "    sasl.mechanism: SCRAM-SHA-512\n    sasl.password: first", dc2), false, true, false},
		{"a destination cluster key", parse("", "  client.id: dst-writer", password, dc2), true, false, false},
		{"a mirror removed", parse("", "", password, ""), false, false, true},
	} {
		if got := settingsChanged(base, tc.cfg, "destination."); got != tc.dst {
			t.Errorf("%s: destination changed = %v, want %v", tc.name, got, tc.dst)
		}
		if got := settingsChanged(base, tc.cfg, "state."); got {
			t.Errorf("%s: state changed = %v, want false", tc.name, got)
		}
		if got := mirrorChanged(base, tc.cfg, "dc1"); got != tc.dc1 {
			t.Errorf("%s: mirror dc1 changed = %v, want %v", tc.name, got, tc.dc1)
		}
		if got := mirrorChanged(base, tc.cfg, "dc2"); got != tc.dc2Change {
			t.Errorf("%s: mirror dc2 changed = %v, want %v", tc.name, got, tc.dc2Change)
		}
		// Compared both ways: the answer does not depend on which is the
		// running configuration.
		if mirrorChanged(base, tc.cfg, "dc1") != mirrorChanged(tc.cfg, base, "dc1") {
			t.Errorf("%s: mirrorChanged is not symmetric", tc.name)
		}
	}
}
