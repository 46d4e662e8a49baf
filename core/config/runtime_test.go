package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestParseMirrorReadsOneMirrorsSettings(t *testing.T) {
	t.Parallel()
	pw := filepath.Join(t.TempDir(), "pw")
	if err := os.WriteFile(pw, []byte("s3cret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	m, err := ParseMirror([]byte(`# a run-time mirror
bootstrap.servers: a:9092,b:9092
security.protocol: SASL_PLAINTEXT
sasl.mechanism: SCRAM-SHA-512
sasl.username: kmirror
sasl.password.file: `+pw+`
mirror.topics.include: "orders.*"
mirror.groups.include: "app-.*"
`), "dc2")
	if err != nil {
		t.Fatal(err)
	}
	if m.Name != "dc2" || strings.Join(m.Source.BootstrapServers, ",") != "a:9092,b:9092" || !m.TopicsInclude.Match("orders.eu") || m.TopicsInclude.Match("payments") || !m.GroupsInclude.Match("app-1") {
		t.Fatalf("parsed %+v", m)
	}
	if s, err := m.Source.SASL(); err != nil || s.Username != "kmirror" {
		t.Fatalf("SASL settings: %+v, %v", s, err)
	}
}

func TestParseMirrorRefusesInlineSecretsBadKeysAndAnotherName(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, data, want string
	}{
		{"inline password", "bootstrap.servers: a:9092\nsecurity.protocol: SASL_PLAINTEXT\nsasl.mechanism: PLAIN\nsasl.username: u\nsasl.password: hunter2\n",
			"mirrors[dc2].sasl.password: a run-time mirror's settings are kept in the state store, which never holds a secret"},
		{"unknown key", "bootstrap.servers: a:9092\nmirror.topics.includ: x\n", "mirrors[dc2].mirror.topics.includ"},
		{"bad regex", "bootstrap.servers: a:9092\nmirror.topics.include: \"(\"\n", "mirrors[dc2].mirror.topics.include"},
		{"other name", "name: dc3\nbootstrap.servers: a:9092\n", `mirrors[dc2].name: the settings name mirror "dc3"`},
		{"no bootstrap", "mirror.topics.include: x\n", "mirrors[dc2].bootstrap.servers"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseMirror([]byte(tc.data), "dc2")
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want one saying %q", err, tc.want)
			}
			if strings.Contains(err.Error(), "hunter2") {
				t.Fatalf("the error shows the secret: %v", err)
			}
		})
	}
	if _, err := ParseMirror([]byte("bootstrap.servers: a:9092\n"), "bad name"); err == nil {
		t.Fatal("a name with a space was accepted")
	}
}
