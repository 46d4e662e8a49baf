package etcd

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/kmirror/kmirror/internal/testpki"
	"github.com/kmirror/kmirror/sdk/auth"
	"github.com/kmirror/kmirror/sdk/plugin"
	"github.com/kmirror/kmirror/sdk/statestore"
)

func TestSchemaIsValid(t *testing.T) {
	t.Parallel()
	if err := Schema.Check(); err != nil {
		t.Fatal(err)
	}
}

func TestConfigFromPlugin(t *testing.T) {
	t.Parallel()
	pw := testpki.WriteFile(t, t.TempDir(), "pw", "from-file\n")
	got, err := ConfigFromPlugin(plugin.Config{
		"endpoints":         []any{"https://a:2379", "b:2379"},
		"prefix":            "",
		"username":          "kmirror",
		"password_file":     pw,
		"server_name":       "etcd.example",
		"dial_timeout":      "2s",
		"request_timeout":   "3s",
		"max_request_bytes": float64(2 << 20),
		"list_page_size":    float64(50),
	})
	if err != nil {
		t.Fatal(err)
	}
	want := DefaultConfig()
	want.Endpoints = []string{"https://a:2379", "b:2379"}
	want.Prefix, want.Username, want.PasswordFile, want.ServerName = "", "kmirror", pw, "etcd.example"
	want.DialTimeout, want.RequestTimeout, want.MaxRequestBytes, want.ListPageSize = 2*time.Second, 3*time.Second, 2<<20, 50
	if got.Prefix != want.Prefix || strings.Join(got.Endpoints, ",") != strings.Join(want.Endpoints, ",") ||
		got.Username != want.Username || got.PasswordFile != want.PasswordFile || got.ServerName != want.ServerName ||
		got.DialTimeout != want.DialTimeout || got.RequestTimeout != want.RequestTimeout ||
		got.MaxRequestBytes != want.MaxRequestBytes || got.ListPageSize != want.ListPageSize {
		t.Fatalf("ConfigFromPlugin = %+v, want %+v", got, want)
	}

	defaults, err := ConfigFromPlugin(plugin.Config{"endpoints": []any{"h:1"}, "username": "u", "password": "pw-in-config"})
	if err != nil {
		t.Fatal(err)
	}
	if defaults.Prefix != "kmirror/" || defaults.Password != auth.NewSecret("pw-in-config") || defaults.ListPageSize != 500 {
		t.Fatalf("absent keys: %+v, want the defaults", defaults)
	}
}

func TestConfigFromPluginRefusesNamingTheKey(t *testing.T) {
	t.Parallel()
	const secret = "pw-never-printed"
	for _, c := range []struct {
		cfg plugin.Config
		key string
	}{
		{plugin.Config{}, "endpoints"},
		{plugin.Config{"endpoints": []any{}}, "endpoints"},
		{plugin.Config{"endpoints": []any{"ftp://h:1"}}, "endpoints"},
		{plugin.Config{"endpoints": []any{"h:1"}, "prefix": "no-slash"}, "prefix"},
		{plugin.Config{"endpoints": []any{"h:1"}, "password": secret}, "username"},
		{plugin.Config{"endpoints": []any{"h:1"}, "username": "u", "password": secret, "password_file": "/pw"}, "password_file"},
		{plugin.Config{"endpoints": []any{"h:1"}, "username": "u", "password_file": "/nonexistent/pw"}, "password_file"},
		{plugin.Config{"endpoints": []any{"h:1"}, "cert_file": "/c"}, "key_file"},
		{plugin.Config{"endpoints": []any{"h:1"}, "ca_file": "/nonexistent/ca.pem"}, "ca_file"},
		{plugin.Config{"endpoints": []any{"h:1"}, "dial_timeout": "soon"}, "dial_timeout"},
		{plugin.Config{"endpoints": []any{"h:1"}, "request_timeout": "0s"}, "request_timeout"},
		{plugin.Config{"endpoints": []any{"h:1"}, "list_page_size": float64(0)}, "list_page_size"},
		{plugin.Config{"endpoints": []any{"h:1"}, "max_request_bytes": float64(10)}, "max_request_bytes"},
		{plugin.Config{"endpoints": []any{"h:1"}, "bogus": "x"}, "bogus"},
	} {
		_, err := ConfigFromPlugin(c.cfg)
		var ce *plugin.ConfigError
		if !errors.As(err, &ce) || !errors.Is(err, plugin.ErrInvalidConfig) || len(ce.Problems) == 0 || ce.Problems[0].Key != c.key {
			t.Errorf("ConfigFromPlugin(%v) = %v; want a ConfigError naming %s", c.cfg, err, c.key)
		}
		if err != nil && strings.Contains(err.Error(), secret) {
			t.Errorf("ConfigFromPlugin(%v): the password is in the error: %v", c.cfg, err)
		}
	}
}

// TestNewFromConfig: the plugin constructor opens a working store.
func TestNewFromConfig(t *testing.T) {
	t.Parallel()
	s, err := NewFromConfig(t.Context(), "etcd", plugin.Config{"endpoints": []any{srv.Endpoint}, "prefix": srv.Prefix(t)})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	v, err := s.Put(t.Context(), "k", []byte("v"), statestore.Absent)
	if err != nil {
		t.Fatal(err)
	}
	if e, err := s.Get(t.Context(), "k"); err != nil || e.Version != v {
		t.Fatalf("Get = %+v, %v", e, err)
	}
}
