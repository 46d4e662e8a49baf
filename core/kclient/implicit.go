package kclient

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"

	"github.com/kmirror/kmirror/core/config"
	"github.com/kmirror/kmirror/sdk/auth"
)

// Built-in auth plugins kmirror runs for a cluster whose credentials come
// from its sasl.* keys (no sasl.credentials.plugin).
const (
	BuiltinAuthStatic = "static" // PLAIN and SCRAM
	BuiltinAuthOAuth  = "oauth"  // OAUTHBEARER, client-credentials flow
)

// ImplicitAuth describes the built-in auth plugin that serves cl's
// credentials for req when sasl.credentials.plugin is not set (the
// Credentials the daemon wires start it through the plugin host): its plugin
// name (kmirror-sasl-<role>-<mirror>, or kmirror-sasl-destination for the daemon's
// destination), the built-in (BuiltinAuthStatic or BuiltinAuthOAuth) and
// the plugin's config block, built from the sasl.* keys. A password file
// is passed as such, so the plugin re-reads it when it changes. The block
// holds secrets: never log or print it.
func ImplicitAuth(cl *config.Cluster, req auth.Request) (name, builtin string, cfg map[string]any, err error) {
	s, err := cl.SASL()
	if err != nil {
		return "", "", nil, err
	}
	name = implicitAuthName(req)
	switch s.Mechanism {
	case config.MechanismOAuthBearer:
		cfg = map[string]any{
			"token_endpoint": s.OAuth.TokenEndpointURL,
			"client_id":      s.OAuth.ClientID,
			"client_secret":  s.OAuth.ClientSecret.Reveal(),
		}
		if s.OAuth.Scope != "" {
			cfg["scope"] = s.OAuth.Scope
		}
		return name, BuiltinAuthOAuth, cfg, nil
	case config.MechanismGSSAPI:
		return "", "", nil, fmt.Errorf("%v: GSSAPI logs in with the keytab of sasl.kerberos.keytab; no auth plugin serves it", req)
	case "":
		return "", "", nil, fmt.Errorf("%v: the cluster does not use SASL", req)
	}
	cfg = map[string]any{"username": s.Username, "mechanisms": []any{s.Mechanism}}
	if cl.SASLPasswordFile != "" && !cl.SASLJAASConfig.IsSet() {
		cfg["password_file"] = cl.SASLPasswordFile
	} else {
		cfg["password"] = s.Password.Reveal()
	}
	return name, BuiltinAuthStatic, cfg, nil
}

// implicitAuthName names the built-in auth plugin of one client: plugin
// names are lower case, mirror names need not be, so a mirror name with
// upper case letters gets a short hash to keep names apart.
func implicitAuthName(req auth.Request) string {
	if req.Mirror == "" {
		return config.ReservedPluginPrefix + "sasl-" + req.Role
	}
	n := config.ReservedPluginPrefix + "sasl-" + req.Role + "-" + strings.ToLower(req.Mirror)
	if strings.ToLower(req.Mirror) != req.Mirror {
		sum := sha256.Sum256([]byte(req.Mirror))
		n += "-" + hex.EncodeToString(sum[:3])
	}
	return n
}
