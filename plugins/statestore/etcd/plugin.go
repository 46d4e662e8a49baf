package etcd

import (
	"context"
	"errors"
	"time"

	"github.com/kmirror/kmirror/sdk/auth"
	"github.com/kmirror/kmirror/sdk/plugin"
	"github.com/kmirror/kmirror/sdk/statestore"
)

// The configuration keys of the etcd store as a plugin (Schema), one per
// Config field.
const (
	KeyEndpoints       = "endpoints"
	KeyPrefix          = "prefix"
	KeyUsername        = "username"
	KeyPassword        = "password"
	KeyPasswordFile    = "password_file"
	KeyCAFile          = "ca_file"
	KeyCertFile        = "cert_file"
	KeyKeyFile         = "key_file"
	KeyServerName      = "server_name"
	KeyDialTimeout     = "dial_timeout"
	KeyRequestTimeout  = "request_timeout"
	KeyMaxRequestBytes = "max_request_bytes"
	KeyListPageSize    = "list_page_size"
)

// Schema declares the etcd store's configuration as a plugin.
var Schema = plugin.Schema{
	{Name: KeyEndpoints, Type: plugin.FieldStringList, Required: true, Description: "client URLs of etcd members: host:port, http://host:port or https://host:port"},
	{Name: KeyPrefix, Type: plugin.FieldString, Default: "kmirror/", Description: "put before every key, so that several deployments share one etcd; empty (the whole key space) or ending with '/'"},
	{Name: KeyUsername, Type: plugin.FieldString, Description: "etcd user (etcd authentication); with password or password_file"},
	{Name: KeyPassword, Type: plugin.FieldString, Secret: true, Description: "the user's password; exactly one of password and password_file with a username"},
	{Name: KeyPasswordFile, Type: plugin.FieldString, Description: "a file holding the password (one trailing newline removed), read at start"},
	{Name: KeyCAFile, Type: plugin.FieldString, Description: "PEM file of the CAs that sign the members' certificates; turns TLS on (default with https:// endpoints: the system's roots)"},
	{Name: KeyCertFile, Type: plugin.FieldString, Description: "PEM client certificate for etcd's --client-cert-auth; with key_file; turns TLS on"},
	{Name: KeyKeyFile, Type: plugin.FieldString, Description: "PEM private key of cert_file"},
	{Name: KeyServerName, Type: plugin.FieldString, Description: "name checked in the members' certificates; default: the endpoint's host"},
	{Name: KeyDialTimeout, Type: plugin.FieldDuration, Default: "5s", Description: "bound on the first contact with etcd at start (connect, authenticate, first read)"},
	{Name: KeyRequestTimeout, Type: plugin.FieldDuration, Default: "10s", Description: "bound on each request to etcd"},
	{Name: KeyMaxRequestBytes, Type: plugin.FieldInt, Default: "8388608", Description: "largest request the client sends, so the largest value; etcd's --max-request-bytes (default 1.5 MiB) must allow it too"},
	{Name: KeyListPageSize, Type: plugin.FieldInt, Default: "500", Description: "keys per range request when listing"},
}

// NewFromConfig opens the store from a plugin configuration block (the
// keys of Schema); it is the constructor of
// plugin.ServeConfig.NewStateStore. An invalid block is refused with a
// *plugin.ConfigError naming each key, which never holds the password;
// Open's own errors (etcd unreachable, credentials refused) come back as
// they are.
func NewFromConfig(ctx context.Context, _ string, cfg plugin.Config) (statestore.Store, error) {
	c, err := ConfigFromPlugin(cfg)
	if err != nil {
		return nil, err
	}
	return Open(ctx, c)
}

// ConfigFromPlugin decodes and checks a plugin configuration block into a
// Config (DefaultConfig for absent keys). Errors are *plugin.ConfigError
// values naming the key.
func ConfigFromPlugin(cfg plugin.Config) (Config, error) {
	if err := Schema.Validate(cfg); err != nil {
		return Config{}, err
	}
	var raw struct {
		Endpoints       []string `json:"endpoints"`
		Prefix          *string  `json:"prefix"`
		Username        string   `json:"username"`
		Password        *string  `json:"password"`
		PasswordFile    string   `json:"password_file"`
		CAFile          string   `json:"ca_file"`
		CertFile        string   `json:"cert_file"`
		KeyFile         string   `json:"key_file"`
		ServerName      string   `json:"server_name"`
		DialTimeout     string   `json:"dial_timeout"`
		RequestTimeout  string   `json:"request_timeout"`
		MaxRequestBytes *int     `json:"max_request_bytes"`
		ListPageSize    *int     `json:"list_page_size"`
	}
	if err := cfg.Decode(&raw); err != nil {
		return Config{}, err
	}
	c := DefaultConfig()
	c.Endpoints, c.Username, c.PasswordFile = raw.Endpoints, raw.Username, raw.PasswordFile
	c.CAFile, c.CertFile, c.KeyFile, c.ServerName = raw.CAFile, raw.CertFile, raw.KeyFile, raw.ServerName
	if raw.Prefix != nil {
		c.Prefix = *raw.Prefix
	}
	if raw.Password != nil {
		c.Password = auth.NewSecret(*raw.Password)
	}
	if raw.DialTimeout != "" {
		c.DialTimeout, _ = time.ParseDuration(raw.DialTimeout) // checked by Schema.Validate
	}
	if raw.RequestTimeout != "" {
		c.RequestTimeout, _ = time.ParseDuration(raw.RequestTimeout)
	}
	if raw.MaxRequestBytes != nil {
		c.MaxRequestBytes = *raw.MaxRequestBytes
	}
	if raw.ListPageSize != nil {
		c.ListPageSize = *raw.ListPageSize
	}
	err := c.validate()
	if err == nil {
		_, err = c.tlsConfig()
	}
	if err == nil {
		_, err = c.password()
	}
	var fe *fieldError
	if errors.As(err, &fe) {
		return Config{}, &plugin.ConfigError{Problems: []plugin.Problem{{Key: fe.key, Reason: fe.reason}}}
	}
	if err != nil {
		return Config{}, err
	}
	return c, nil
}
