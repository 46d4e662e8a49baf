package oauth

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/kmirror/kmirror/sdk/auth"
	"github.com/kmirror/kmirror/sdk/plugin"
)

// The configuration keys of the oauth provider as a plugin (Schema). The
// Kafka client property each stands for is in its description.
const (
	KeyTokenEndpoint        = "token_endpoint"
	KeyClientID             = "client_id"
	KeyClientSecret         = "client_secret"
	KeyClientSecretFile     = "client_secret_file"
	KeyScope                = "scope"
	KeyExtensions           = "extensions"
	KeyURLEncodeCredentials = "url_encode_credentials"
	KeyRefreshBuffer        = "refresh_buffer"
	KeyRequestTimeout       = "request_timeout"
	KeyRetryBackoff         = "retry_backoff"
	KeyRetryBackoffMax      = "retry_backoff_max"
	KeyCAFile               = "ca_file"
	// KeyRefreshFactor names Config.RefreshFactor in errors; the plugin
	// keeps the default 0.8 (the schema has no fractional type).
	KeyRefreshFactor = "refresh_factor"
)

// Schema declares the oauth provider's configuration as a plugin.
var Schema = plugin.Schema{
	{Name: KeyTokenEndpoint, Type: plugin.FieldString, Required: true, Description: "the http(s) URL of the token endpoint (sasl.oauthbearer.token.endpoint.url)"},
	{Name: KeyClientID, Type: plugin.FieldString, Required: true, Description: "the client id (sasl.oauthbearer.client.id)"},
	{Name: KeyClientSecret, Type: plugin.FieldString, Secret: true, Description: "the client secret (sasl.oauthbearer.client.secret); exactly one of client_secret and client_secret_file"},
	{Name: KeyClientSecretFile, Type: plugin.FieldString, Description: "a file holding the client secret (one trailing newline removed), read at start"},
	{Name: KeyScope, Type: plugin.FieldString, Description: "the space-separated scope to request (sasl.oauthbearer.scope); empty: none"},
	{Name: KeyExtensions, Type: plugin.FieldObject, Description: "SASL extensions sent with each token, string values (RFC 7628)"},
	{Name: KeyURLEncodeCredentials, Type: plugin.FieldBool, Default: "false", Description: "form-encode the client id and secret before Basic authentication (sasl.oauthbearer.header.urlencode)"},
	{Name: KeyRefreshBuffer, Type: plugin.FieldDuration, Default: "5m", Description: "refresh a token at the latest this long before it expires, 0 to 1h (sasl.login.refresh.buffer.seconds)"},
	{Name: KeyRequestTimeout, Type: plugin.FieldDuration, Default: "30s", Description: "bound on one token request"},
	{Name: KeyRetryBackoff, Type: plugin.FieldDuration, Default: "100ms", Description: "first wait between refresh attempts after a failure (sasl.login.retry.backoff.ms)"},
	{Name: KeyRetryBackoffMax, Type: plugin.FieldDuration, Default: "10s", Description: "longest wait between refresh attempts (sasl.login.retry.backoff.max.ms)"},
	{Name: KeyCAFile, Type: plugin.FieldString, Description: "PEM file of the CAs that sign the token endpoint's certificate; default: the system's roots"},
}

// NewFromConfig builds the provider from a plugin configuration block (the
// keys of Schema); it is the constructor of plugin.ServeConfig.NewAuth.
// Warnings go to stderr as hclog JSON lines, which the host re-logs under
// plugin.auth.<name>. An invalid block is refused with a
// *plugin.ConfigError naming each key; it never holds the secret.
func NewFromConfig(_ context.Context, _ string, cfg plugin.Config) (auth.Provider, error) {
	c, err := ConfigFromPlugin(cfg)
	if err != nil {
		return nil, err
	}
	c.Logger = slog.New(slog.NewJSONHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo, ReplaceAttr: hclogKeys}))
	return New(c)
}

// hclogKeys renames slog's message, level and time to hclog's JSON keys,
// which go-plugin's host parses to re-log a plugin's lines at their level.
func hclogKeys(groups []string, a slog.Attr) slog.Attr {
	if len(groups) > 0 {
		return a
	}
	switch a.Key {
	case slog.MessageKey:
		a.Key = "@message"
	case slog.LevelKey:
		a.Key, a.Value = "@level", slog.StringValue(strings.ToLower(a.Value.String()))
	case slog.TimeKey:
		a.Key = "@timestamp"
	}
	return a
}

// ConfigFromPlugin decodes and checks a plugin configuration block into a
// Config (DefaultConfig for absent keys). Errors are *plugin.ConfigError
// values naming each key.
func ConfigFromPlugin(cfg plugin.Config) (Config, error) {
	if err := Schema.Validate(cfg); err != nil {
		return Config{}, err
	}
	var raw struct {
		TokenEndpoint        string         `json:"token_endpoint"`
		ClientID             string         `json:"client_id"`
		ClientSecret         *string        `json:"client_secret"`
		ClientSecretFile     string         `json:"client_secret_file"`
		Scope                string         `json:"scope"`
		Extensions           map[string]any `json:"extensions"`
		URLEncodeCredentials bool           `json:"url_encode_credentials"`
		RefreshBuffer        string         `json:"refresh_buffer"`
		RequestTimeout       string         `json:"request_timeout"`
		RetryBackoff         string         `json:"retry_backoff"`
		RetryBackoffMax      string         `json:"retry_backoff_max"`
		CAFile               string         `json:"ca_file"`
	}
	if err := cfg.Decode(&raw); err != nil {
		return Config{}, err
	}
	problem := func(key, reason string) (Config, error) {
		return Config{}, &plugin.ConfigError{Problems: []plugin.Problem{{Key: key, Reason: reason}}}
	}
	c := DefaultConfig()
	c.TokenEndpoint, c.ClientID, c.Scope, c.URLEncodeCredentials = raw.TokenEndpoint, raw.ClientID, raw.Scope, raw.URLEncodeCredentials
	switch {
	case raw.ClientSecret != nil && raw.ClientSecretFile != "":
		return problem(KeyClientSecret, "both client_secret and client_secret_file are set; keep one")
	case raw.ClientSecret != nil:
		c.ClientSecret = auth.NewSecret(*raw.ClientSecret)
	case raw.ClientSecretFile != "":
		b, err := os.ReadFile(raw.ClientSecretFile)
		if err != nil {
			return problem(KeyClientSecretFile, "cannot read the file: "+err.Error())
		}
		c.ClientSecret = auth.NewSecret(strings.TrimSuffix(strings.TrimSuffix(string(b), "\n"), "\r"))
		if !c.ClientSecret.IsSet() {
			return problem(KeyClientSecretFile, "the file "+raw.ClientSecretFile+" is empty")
		}
	}
	if len(raw.Extensions) > 0 {
		c.Extensions = make(map[string]string, len(raw.Extensions))
		for k, v := range raw.Extensions {
			s, ok := v.(string)
			if !ok {
				return problem(KeyExtensions, fmt.Sprintf("the value of %q must be a string", k))
			}
			c.Extensions[k] = s
		}
	}
	for _, d := range []struct {
		key string
		raw string
		dst *time.Duration
	}{
		{KeyRefreshBuffer, raw.RefreshBuffer, &c.RefreshBuffer},
		{KeyRequestTimeout, raw.RequestTimeout, &c.RequestTimeout},
		{KeyRetryBackoff, raw.RetryBackoff, &c.RetryBackoff},
		{KeyRetryBackoffMax, raw.RetryBackoffMax, &c.RetryBackoffMax},
	} {
		if d.raw != "" {
			*d.dst, _ = time.ParseDuration(d.raw) // checked by Schema.Validate
		}
	}
	if raw.CAFile != "" {
		pem, err := os.ReadFile(raw.CAFile)
		if err != nil {
			return problem(KeyCAFile, "cannot read the file: "+err.Error())
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return problem(KeyCAFile, "the file "+raw.CAFile+" holds no PEM certificate")
		}
		t := http.DefaultTransport.(*http.Transport).Clone()
		t.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
		c.HTTPClient = &http.Client{Transport: t}
	}
	if err := validate(&c); err != nil {
		var fe *fieldError
		if errors.As(err, &fe) {
			return problem(fe.key, fe.Error())
		}
		return Config{}, err
	}
	return c, nil
}
