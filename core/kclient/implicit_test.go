package kclient_test

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/kmirror/kmirror/core/config"
	"github.com/kmirror/kmirror/core/kclient"
	"github.com/kmirror/kmirror/sdk/auth"
)

// A cluster without sasl.credentials.plugin gets its credentials from a
// built-in plugin whose block carries what its sasl.* keys say.
func TestImplicitAuthFromTheClusterKeys(t *testing.T) {
	t.Parallel()
	pw := filepath.Join(t.TempDir(), "pw")
	if err := os.WriteFile(pw, []byte("file-pw\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := mustParse(t, `
destination:
  bootstrap.servers: d:9092
  security.protocol: SASL_PLAINTEXT
  sasl.mechanism: OAUTHBEARER
  sasl.oauthbearer.token.endpoint.url: https://idp/token
  sasl.oauthbearer.client.id: kmirror
  sasl.oauthbearer.client.secret: s3cret
  sasl.oauthbearer.scope: mirror
state:
  dir: /tmp/s
mirrors:
  - name: Dc1
    bootstrap.servers: s:9092
    security.protocol: SASL_PLAINTEXT
    sasl.mechanism: SCRAM-SHA-512
    sasl.username: bob
    sasl.password.file: `+pw+`
  - name: dc2
    bootstrap.servers: s:9092
    security.protocol: SASL_PLAINTEXT
    sasl.jaas.config: 'org.apache.kafka.common.security.plain.PlainLoginModule required username="al" password="al-pw";'
`, nil, nil)
	name, builtin, c, err := kclient.ImplicitAuth(&cfg.Destination, auth.Request{Role: auth.RoleDestination})
	want := map[string]any{"token_endpoint": "https://idp/token", "client_id": "kmirror", "client_secret": "s3cret", "scope": "mirror"}
	if err != nil || name != "kmirror-sasl-destination" || builtin != kclient.BuiltinAuthOAuth || !reflect.DeepEqual(c, want) {
		t.Fatalf("destination: %s %s %v %v", name, builtin, c, err)
	}
	dc1, _ := cfg.Mirror("Dc1")
	name, builtin, c, err = kclient.ImplicitAuth(&dc1.Source, auth.Request{Mirror: "Dc1", Role: auth.RoleSource})
	want = map[string]any{"username": "bob", "password_file": pw, "mechanisms": []any{"SCRAM-SHA-512"}}
	if err != nil || builtin != kclient.BuiltinAuthStatic || !reflect.DeepEqual(c, want) || !CheckPluginNameOK(name) || name == "kmirror-sasl-source-dc1" {
		t.Fatalf("Dc1: %q %s %v %v (an upper-case mirror name gets a hash, so Dc1 and dc1 differ)", name, builtin, c, err)
	}
	dc2, _ := cfg.Mirror("dc2")
	name, _, c, err = kclient.ImplicitAuth(&dc2.Source, auth.Request{Mirror: "dc2", Role: auth.RoleSource})
	want = map[string]any{"username": "al", "password": "al-pw", "mechanisms": []any{"PLAIN"}}
	if err != nil || name != "kmirror-sasl-source-dc2" || !reflect.DeepEqual(c, want) {
		t.Fatalf("dc2: %q %v %v", name, c, err)
	}
}

func CheckPluginNameOK(n string) bool { return config.CheckPluginName(n) == nil }
