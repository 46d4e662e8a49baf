// Package kclienttest gives tests a kclient.Credentials without a plugin
// host: credentials straight from a cluster's sasl.* keys, as the built-in
// auth plugins would serve them. Production code never imports it (the
// daemon's credentials always come through the plugin host).
package kclienttest

import (
	"context"
	"time"

	"github.com/kmirror/kmirror/core/config"
	"github.com/kmirror/kmirror/sdk/auth"
)

// KeysCredentials is a kclient.Credentials serving each cluster's own
// sasl.* keys; for OAUTHBEARER it serves the token "token-of-<client id>",
// valid for an hour.
func KeysCredentials(_ context.Context, cl *config.Cluster, _ auth.Request) (auth.Provider, error) {
	return keysAuth{cl: cl}, nil
}

type keysAuth struct{ cl *config.Cluster }

func (k keysAuth) Info() auth.Info {
	return auth.Info{Name: "keys", ProtocolMajor: auth.ProtocolMajor, Mechanisms: auth.Mechanisms()}
}

func (k keysAuth) Credentials(_ context.Context, req auth.Request) (auth.Credentials, error) {
	s, err := k.cl.SASL()
	if err != nil {
		return auth.Credentials{}, err
	}
	if req.Mechanism == auth.MechanismOAuthBearer {
		return auth.Credentials{Token: auth.NewSecret("token-of-" + s.OAuth.ClientID), Expiry: time.Now().Add(time.Hour)}, nil
	}
	return auth.Credentials{Username: s.Username, Password: s.Password}, nil
}

func (k keysAuth) Close() error { return nil }
