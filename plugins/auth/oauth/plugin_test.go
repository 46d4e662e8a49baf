package oauth

import (
	"bytes"
	"encoding/json"
	"encoding/pem"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kmirror/kmirror/sdk/auth/authtest"
	"github.com/kmirror/kmirror/sdk/plugin"
)

func TestNewFromConfig(t *testing.T) {
	t.Parallel()
	// A TLS endpoint whose CA comes from ca_file, a secret from a file.
	var form, user, pass string
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_ = r.ParseForm()
		form = r.PostForm.Encode()
		user, pass, _ = r.BasicAuth()
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"access_token":"tls-token","expires_in":3600}`))
	}))
	t.Cleanup(srv.Close)
	dir := t.TempDir()
	caFile := filepath.Join(dir, "ca.pem")
	if err := os.WriteFile(caFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}), 0o600); err != nil {
		t.Fatal(err)
	}
	secretFile := filepath.Join(dir, "secret")
	if err := os.WriteFile(secretFile, []byte(clientSecret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	p, err := NewFromConfig(t.Context(), "sso", plugin.Config{
		"token_endpoint": srv.URL + "/token", "client_id": clientID, "client_secret_file": secretFile,
		"scope": "kafka", "extensions": map[string]any{"logicalCluster": "lkc-1"},
		"refresh_buffer": "1m", "request_timeout": "5s", "ca_file": caFile,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	c, err := p.Credentials(t.Context(), oauthReq)
	if err != nil {
		t.Fatal(err)
	}
	if c.Token.Reveal() != "tls-token" || c.Extensions["logicalCluster"] != "lkc-1" || user != clientID || pass != clientSecret || form != "grant_type=client_credentials&scope=kafka" {
		t.Fatalf("credentials %+v; request user %q, form %q", c, user, form)
	}
	pp := p.(*Provider)
	if pp.cfg.RefreshBuffer != time.Minute || pp.cfg.RequestTimeout != 5*time.Second || pp.cfg.RetryBackoff != DefaultConfig().RetryBackoff {
		t.Fatalf("durations %+v", pp.cfg)
	}
}

func TestNewFromConfigNamesTheKey(t *testing.T) {
	t.Parallel()
	base := func(kv ...any) plugin.Config {
		c := plugin.Config{"token_endpoint": "https://idp.example/token", "client_id": clientID, "client_secret": clientSecret}
		for i := 0; i < len(kv); i += 2 {
			if kv[i+1] == nil {
				delete(c, kv[i].(string))
			} else {
				c[kv[i].(string)] = kv[i+1]
			}
		}
		return c
	}
	missing := filepath.Join(t.TempDir(), "missing")
	for _, c := range []struct {
		cfg      plugin.Config
		key, has string
	}{
		{base("token_endpoint", nil), "token_endpoint", "required"},
		{base("token_endpoint", "ftp://idp/token"), "token_endpoint", "not an http(s) URL"},
		{base("token_endpoint", "https://user:"+clientSecret+"@idp/token"), "token_endpoint", "must not carry credentials"},
		{base("client_secret", nil), "client_secret", "no client secret"},
		{base("client_secret_file", missing), "client_secret", "keep one"},
		{base("client_secret", nil, "client_secret_file", missing), "client_secret_file", "no such file"},
		{base("client_id", "a:b"), "client_id", "contains ':'"},
		{base("scope", "a  b"), "scope", "scope"},
		{base("refresh_buffer", "2h"), "refresh_buffer", "outside [0, 1h]"},
		{base("refresh_buffer", "soon"), "refresh_buffer", "must be a duration"},
		{base("retry_backoff", "1m"), "retry_backoff", "need 0 < backoff <= maximum"},
		{base("extensions", map[string]any{"auth": "x"}), "extensions", "reserved"},
		{base("extensions", map[string]any{"a": 1}), "extensions", `the value of "a" must be a string`},
		{base("ca_file", missing), "ca_file", "no such file"},
		{base("refresh_factor", 0.9), "refresh_factor", "unknown key"},
	} {
		p, err := NewFromConfig(t.Context(), "sso", c.cfg)
		var ce *plugin.ConfigError
		if p != nil || !errors.As(err, &ce) || len(ce.Problems) != 1 || ce.Problems[0].Key != c.key || !strings.Contains(ce.Problems[0].Reason, c.has) {
			t.Errorf("NewFromConfig(%s) = %v; want a *plugin.ConfigError naming %s: %q", c.key, err, c.key, c.has)
			continue
		}
		if leak := authtest.Leaks(err, clientSecret); leak != "" {
			t.Errorf("NewFromConfig(%s): %s", c.key, leak)
		}
	}
}

// The plugin's log lines carry hclog's keys, so that the host re-logs them
// at their level.
func TestPluginLogLinesAreHclogJSON(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{ReplaceAttr: hclogKeys})).Warn("token refresh failed", "endpoint", "https://idp")
	var line map[string]any
	if err := json.Unmarshal(buf.Bytes(), &line); err != nil {
		t.Fatal(err)
	}
	if line["@message"] != "token refresh failed" || line["@level"] != "warn" || line["@timestamp"] == nil || line["endpoint"] != "https://idp" {
		t.Fatalf("log line %s", buf.String())
	}
}
