package static

import (
	"context"

	"github.com/kmirror/kmirror/sdk/auth"
	"github.com/kmirror/kmirror/sdk/plugin"
)

// The configuration keys of the static provider as a plugin (Schema).
const (
	KeyUsername     = "username"
	KeyPassword     = "password"
	KeyPasswordFile = "password_file"
	KeyPasswordEnv  = "password_env"
	KeyMechanisms   = "mechanisms"
)

// Schema declares the static provider's configuration as a plugin.
var Schema = plugin.Schema{
	{Name: KeyUsername, Type: plugin.FieldString, Required: true, Description: "the SASL user name"},
	{Name: KeyPassword, Type: plugin.FieldString, Secret: true, Description: "the password; exactly one of password, password_file and password_env"},
	{Name: KeyPasswordFile, Type: plugin.FieldString, Description: "a file holding the password (one trailing newline removed), re-read when it changes"},
	{Name: KeyPasswordEnv, Type: plugin.FieldString, Description: "an environment variable holding the password, read at start"},
	{Name: KeyMechanisms, Type: plugin.FieldStringList, Default: `["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"]`, Description: "the mechanisms served"},
}

// NewFromConfig builds the provider from a plugin configuration block (the
// keys of Schema); it is the constructor of plugin.ServeConfig.NewAuth. An
// invalid block is refused with a *plugin.ConfigError naming each key; it
// never holds the password.
func NewFromConfig(_ context.Context, _ string, cfg plugin.Config) (auth.Provider, error) {
	c, err := ConfigFromPlugin(cfg)
	if err != nil {
		return nil, err
	}
	p, err := New(c)
	if err != nil {
		// What remains is the password source: a file that cannot be
		// read or holds no usable password, an empty variable.
		key := KeyPassword
		switch {
		case c.PasswordFile != "":
			key = KeyPasswordFile
		case c.PasswordEnv != "":
			key = KeyPasswordEnv
		}
		return nil, &plugin.ConfigError{Problems: []plugin.Problem{{Key: key, Reason: err.Error()}}}
	}
	return p, nil
}

// ConfigFromPlugin decodes and checks a plugin configuration block into a
// Config. Errors are *plugin.ConfigError values naming each key.
func ConfigFromPlugin(cfg plugin.Config) (Config, error) {
	if err := Schema.Validate(cfg); err != nil {
		return Config{}, err
	}
	var raw struct {
		Username     string   `json:"username"`
		Password     *string  `json:"password"`
		PasswordFile string   `json:"password_file"`
		PasswordEnv  string   `json:"password_env"`
		Mechanisms   []string `json:"mechanisms"`
	}
	if err := cfg.Decode(&raw); err != nil {
		return Config{}, err
	}
	c := Config{Username: raw.Username, PasswordFile: raw.PasswordFile, PasswordEnv: raw.PasswordEnv, Mechanisms: raw.Mechanisms}
	if raw.Password != nil {
		c.Password = auth.NewSecret(*raw.Password)
	}
	if probs := c.check(); len(probs) > 0 {
		ce := &plugin.ConfigError{}
		for _, p := range probs {
			ce.Problems = append(ce.Problems, plugin.Problem{Key: p.key, Reason: p.reason})
		}
		return Config{}, ce
	}
	return c, nil
}
