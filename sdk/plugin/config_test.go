package plugin

import (
	"context"
	"errors"
	"strings"
	"testing"

	goplugin "github.com/hashicorp/go-plugin"

	"github.com/kmirror/kmirror/sdk/filter"
)

var testSchema = Schema{
	{Name: "token_url", Type: FieldString, Required: true, Description: "token endpoint"},
	{Name: "scopes", Type: FieldStringList},
	{Name: "refresh_before", Type: FieldDuration, Default: "30s"},
	{Name: "retries", Type: FieldInt},
	{Name: "verbose", Type: FieldBool},
	{Name: "client_secret", Type: FieldString, Secret: true},
	{Name: "extensions", Type: FieldObject},
}

func TestSchemaValidateNamesEveryWrongKeyAndNeverAValue(t *testing.T) {
	t.Parallel()
	err := testSchema.Validate(Config{
		"scopes":         []any{"a", 7},
		"refresh_before": "soon",
		"retries":        1.5,
		"verbose":        "yes",
		"client_secret":  42.0,
		"extensions":     "x",
		"colour":         "blue",
	})
	var ce *ConfigError
	if !errors.As(err, &ce) || !errors.Is(err, ErrInvalidConfig) {
		t.Fatalf("Validate = %v, want a *ConfigError matching ErrInvalidConfig", err)
	}
	want := map[string]string{
		"colour":         "unknown key (known: client_secret, extensions, refresh_before, retries, scopes, token_url, verbose)",
		"scopes":         "must be a list of strings (item 1 is not)",
		"refresh_before": `must be a duration such as "30s" or "1h30m"`,
		"retries":        "must be a whole number",
		"verbose":        "must be true or false",
		"client_secret":  "must be a string",
		"extensions":     "must be an object",
		"token_url":      "required",
	}
	got := map[string]string{}
	for _, p := range ce.Problems {
		got[p.Key] = p.Reason
	}
	for k, r := range want {
		if got[k] != r {
			t.Errorf("%s: reason %q, want %q", k, got[k], r)
		}
	}
	if len(got) != len(want) {
		t.Errorf("problems %v, want exactly %v", got, want)
	}
	if msg := ce.WithPrefix("plugins.sso.config").Error(); !strings.Contains(msg, "plugins.sso.config.token_url: required") || strings.Contains(msg, "blue") || strings.Contains(msg, "soon") {
		t.Errorf("message %q: want prefixed keys and no values", msg)
	}
	if err := testSchema.Validate(Config{"token_url": "https://idp", "scopes": []any{"a"}, "retries": 3.0, "refresh_before": "1m"}); err != nil {
		t.Fatalf("valid config refused: %v", err)
	}
	if err := (Schema{}).Validate(Config{"x": 1.0}); err == nil || !strings.Contains(err.Error(), "takes no configuration") {
		t.Fatalf("empty schema with a key: %v", err)
	}
}

func TestSchemaCheckRefusesWhatAHostCannotUse(t *testing.T) {
	t.Parallel()
	for _, s := range []Schema{
		{{Name: "Bad Name", Type: FieldString}},
		{{Name: "a", Type: FieldString}, {Name: "a", Type: FieldInt}},
		{{Name: "a", Type: "float"}},
	} {
		if err := s.Check(); err == nil {
			t.Errorf("Check(%v) accepted", s)
		}
	}
}

// configConn serves cfg's plugin in process and returns the host's
// configuration client.
func configConn(t *testing.T, cfg ServeConfig) *ConfigClient {
	t.Helper()
	kind, err := cfg.Kind()
	if err != nil {
		t.Fatal(err)
	}
	client, _ := goplugin.TestPluginGRPCConn(t, false, map[string]goplugin.Plugin{string(kind): ServerPlugin(cfg, kind)})
	t.Cleanup(func() { client.Close() })
	return NewConfigClient(client.Conn)
}

func TestConfigureRunsTheConstructorOnceWithTheHostsBlock(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	var gotName string
	var gotCfg Config
	calls := 0
	cc := configConn(t, ServeConfig{Schema: testSchema, NewFilter: func(_ context.Context, name string, cfg Config) (filter.Filter, error) {
		calls++
		gotName, gotCfg = name, cfg
		if cfg["retries"] == 13.0 {
			return nil, &ConfigError{Problems: []Problem{{Key: "retries", Reason: "unlucky"}}}
		}
		return filter.Funcs{Name: name}, nil
	}})
	s, err := cc.Schema(ctx)
	if err != nil || len(s) != len(testSchema) || s[0] != testSchema[0] || s[5] != testSchema[5] {
		t.Fatalf("Schema = %v, %v; want %v", s, err, testSchema)
	}

	// Refused by the schema: the constructor is not called.
	err = cc.Configure(ctx, "sso", Config{"colour": "blue"})
	var ce *ConfigError
	if !errors.As(err, &ce) || len(ce.Problems) != 2 || !errors.Is(err, ErrInvalidConfig) {
		t.Fatalf("Configure(unknown key, no token_url) = %v, want a *ConfigError with 2 problems", err)
	}
	if calls != 0 {
		t.Fatal("constructor called for a configuration the schema refuses")
	}

	// Refused by the constructor: the key comes back.
	err = cc.Configure(ctx, "sso", Config{"token_url": "https://idp", "retries": 13})
	if !errors.As(err, &ce) || len(ce.Problems) != 1 || ce.Problems[0] != (Problem{Key: "retries", Reason: "unlucky"}) {
		t.Fatalf("Configure(refused value) = %v", err)
	}

	if err := cc.Configure(ctx, "sso", Config{"token_url": "https://idp", "scopes": []string{"a", "b"}}); err != nil {
		t.Fatalf("Configure(valid) = %v", err)
	}
	if gotName != "sso" || gotCfg["token_url"] != "https://idp" || len(gotCfg["scopes"].([]any)) != 2 {
		t.Fatalf("constructor got %q %v", gotName, gotCfg)
	}
	if err := cc.Configure(ctx, "sso", Config{"token_url": "https://idp"}); err == nil || !strings.Contains(err.Error(), "already configured") {
		t.Fatalf("second Configure = %v, want refused", err)
	}
}

func TestAReadyImplementationTakesNoKeys(t *testing.T) {
	t.Parallel()
	cc := configConn(t, ServeConfig{Filter: filter.Funcs{Name: "f"}})
	if err := cc.Configure(context.Background(), "f", nil); err != nil {
		t.Fatalf("Configure(empty) = %v", err)
	}
	err := cc.Configure(context.Background(), "f", Config{"x": 1})
	var ce *ConfigError
	if !errors.As(err, &ce) || ce.Problems[0].Key != "x" {
		t.Fatalf("Configure(x) = %v, want a *ConfigError naming x", err)
	}
}

func TestConfigDecodeRefusesUnknownFields(t *testing.T) {
	t.Parallel()
	var v struct {
		TokenURL string `json:"token_url"`
	}
	if err := (Config{"token_url": "u"}).Decode(&v); err != nil || v.TokenURL != "u" {
		t.Fatalf("Decode = %v %+v", err, v)
	}
	if err := (Config{"x": 1}).Decode(&v); !errors.Is(err, ErrInvalidConfig) {
		t.Fatalf("Decode(unknown) = %v", err)
	}
}
