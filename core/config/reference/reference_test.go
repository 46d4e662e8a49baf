package reference_test

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kmirror/kmirror/core/config"
	"github.com/kmirror/kmirror/core/config/reference"
	"github.com/kmirror/kmirror/internal/testpki"
)

const regenerate = "run `go run ./core/config/gen`"

// TestReferenceIsCurrent fails when docs/config.md no longer matches the
// declaration table, so CI catches a key changed without its docs.
func TestReferenceIsCurrent(t *testing.T) {
	t.Parallel()
	got, err := os.ReadFile(filepath.Join("..", "..", "..", "docs", "config.md"))
	if err != nil {
		t.Fatalf("docs/config.md: %v; %s", err, regenerate)
	}
	if !bytes.Equal(got, reference.Generate()) {
		t.Fatalf("docs/config.md is stale: %s", regenerate)
	}
}

func TestSampleCopyIsCurrent(t *testing.T) {
	t.Parallel()
	got, err := os.ReadFile(filepath.Join("..", "..", "..", "docs", "kmirror.sample.yaml"))
	if err != nil {
		t.Fatalf("docs/kmirror.sample.yaml: %v; %s", err, regenerate)
	}
	if string(got) != reference.Sample {
		t.Fatalf("docs/kmirror.sample.yaml differs from core/config/reference/kmirror.sample.yaml (the embedded original): %s", regenerate)
	}
}

func TestReferenceListsEveryKey(t *testing.T) {
	t.Parallel()
	ref := string(reference.Generate())
	for _, k := range config.Keys {
		name := k.Name
		switch k.Scope {
		case config.ScopeState:
			name = "state." + name
		case config.ScopePlugin:
			name = "plugins.<name>." + name
		}
		if !strings.Contains(ref, "### `"+name+"`") {
			t.Errorf("reference has no section for %s", k.Name)
		}
	}
	for _, u := range config.Unsupported {
		if !strings.Contains(ref, "| `"+u.Name+"` |") {
			t.Errorf("reference does not list unsupported key %s", u.Name)
		}
	}
	for _, want := range []string{"`KMIRROR_MIRRORS__<NAME>__SASL_PASSWORD`", "`KMIRROR_DESTINATION__BOOTSTRAP_SERVERS`", "`KMIRROR_STATE__DIR`", "(Long.MAX_VALUE)", "- Secret: yes"} {
		if !strings.Contains(ref, want) {
			t.Errorf("reference lacks %s", want)
		}
	}
}

// TestSample parses the shipped sample. Its TLS files do not exist here, so
// the test writes real PEM files and points the sample at them through the
// same environment overrides an operator would use; the password, which the
// sample keeps out of the file, comes from the environment as it says.
func TestSample(t *testing.T) {
	t.Parallel()
	p := testpki.New(t, "kmirror test CA")
	client := p.IssueClient(t, "kmirror")
	env := []string{
		"KMIRROR_DESTINATION__SSL_TRUSTSTORE_LOCATION=" + p.CAFile,
		"KMIRROR_DESTINATION__SSL_KEYSTORE_LOCATION=" + client.KeystoreFile,
		"KMIRROR_MIRRORS__DC1_TO_DC2__SSL_TRUSTSTORE_LOCATION=" + p.CAFile,
		"KMIRROR_MIRRORS__DC1_TO_DC2__SASL_PASSWORD=sample-password",
		"KMIRROR_STATE__DIR=" + t.TempDir(),
	}
	cfg, err := config.Parse([]byte(reference.Sample), "yaml", env, nil)
	if err != nil {
		t.Fatalf("the sample does not load:\n%v", err)
	}
	if cfg.MetadataRefreshInterval != 30*time.Second || cfg.ReplicationThrottledRate != 104857600 ||
		cfg.ReplicaSocketReceiveBuffer != 1048576 || cfg.LogFormat != "json" || cfg.HTTPAddress != "0.0.0.0:9644" {
		t.Errorf("daemon values: %s", cfg.Summary())
	}
	if len(cfg.Destination.BootstrapServers) != 3 || cfg.Destination.SecurityProtocol != config.ProtocolSSL || cfg.Destination.ClientID != "kmirror-dr" {
		t.Errorf("destination: %+v", cfg.Destination)
	}
	tc, err := cfg.Destination.TLS()
	if err != nil || tc.Roots == nil || tc.Certificate == nil {
		t.Errorf("destination TLS: %v, %v", tc, err)
	}
	if len(cfg.Mirrors) != 2 {
		t.Fatalf("got %d mirrors, want 2", len(cfg.Mirrors))
	}
	dc1, ok := cfg.Mirror("dc1-to-dc2")
	if !ok {
		t.Fatal("no mirror dc1-to-dc2")
	}
	s, err := dc1.Source.SASL()
	if err != nil || s.Mechanism != config.MechanismSCRAMSHA512 || s.Username != "kmirror" || s.Password.Reveal() != "sample-password" {
		t.Errorf("dc1 SASL = %+v, %v", s, err)
	}
	for topic, want := range map[string]bool{"orders-eu": true, "payments": true, "orders-tmp": false, "__consumer_offsets": false, "audit": false} {
		if got := dc1.TopicsInclude.Match(topic) && !dc1.TopicsExclude.Match(topic); got != want {
			t.Errorf("dc1 mirrors topic %s = %v, want %v", topic, got, want)
		}
	}
	if !dc1.GroupsInclude.Match("billing-eu") || !dc1.GroupsExclude.Match("billing-test") {
		t.Errorf("dc1 groups: include %q exclude %q", dc1.GroupsInclude, dc1.GroupsExclude)
	}
	if dc1.ACLInclude.String() != "TOPIC;orders.*,GROUP;billing-.*;READ;ALLOW" {
		t.Errorf("dc1 acl include = %q", dc1.ACLInclude)
	}
	if dc1.TopicPropertiesExclude.String() != strings.ReplaceAll(config.DefaultTopicPropertiesExclude, ", ", ",") {
		t.Errorf("dc1 topic properties exclude = %q", dc1.TopicPropertiesExclude)
	}
	legacy, _ := cfg.Mirror("legacy-plain")
	if legacy.Source.SecurityProtocol != config.ProtocolPlaintext || !legacy.TopicsInclude.Match("inventory.items") || legacy.TopicsInclude.Match("inventoryXitems") {
		t.Errorf("legacy-plain: protocol %s, topics %q", legacy.Source.SecurityProtocol, legacy.TopicsInclude)
	}

	// Without the overrides the sample names files that do not exist here,
	// and says so by key; the check is not skipped.
	_, err = config.Parse([]byte(reference.Sample), "yaml", nil, nil)
	if err == nil {
		t.Fatal("the sample loaded without its TLS files and password")
	}
	errs := err.(*config.Errors)
	if !errs.Has("destination.ssl.truststore.location", "cannot read the truststore") ||
		!errs.Has("mirrors[dc1-to-dc2].sasl.password", "required with sasl.username") {
		t.Errorf("errors without overrides:\n%s", err)
	}
}
