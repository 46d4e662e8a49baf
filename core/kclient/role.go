package kclient

import (
	"context"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kmirror/kmirror/core/config"
	"github.com/kmirror/kmirror/sdk/auth"
)

// Roles a client plays, as ClusterOpts and ClientID take them: a source
// client fetches (its connections carry long polls), a destination client
// produces and administers.
const (
	RoleSource      = "source"
	RoleDestination = "destination"
)

// ClusterOpts builds the franz-go options of a client of cl (Opts, with
// kmirror's dialer) plus the daemon-wide connection keys of cfg. role is
// RoleSource or RoleDestination and names the cluster in errors: source
// connections carry fetches, so replica.socket.receive.buffer.bytes sizes
// their receive buffer and replica.socket.timeout.ms bounds their reads;
// destination connections use receive.buffer.bytes and request.timeout.ms.
// Every client retries after reconnect.backoff.ms, doubled per try up to
// 10 s, and refreshes metadata at most once a second. The client id is the
// caller's (ClientID).
//
// mirror names the mirror the client belongs to ("" for the daemon's own
// destination client) and, with role, says whose credentials creds is
// asked for.
func ClusterOpts(ctx context.Context, cfg *config.Config, cl *config.Cluster, role, mirror string, creds Credentials) ([]kgo.Opt, error) {
	so := SocketOptions{SendBuffer: cfg.SendBufferBytes, ReceiveBuffer: cfg.ReceiveBufferBytes, DialTimeout: cfg.SocketConnectionSetupTimeout}
	readTimeout := cfg.RequestTimeout
	if role == RoleSource {
		so.ReceiveBuffer = cfg.ReplicaSocketReceiveBuffer
		readTimeout = cfg.ReplicaSocketTimeout
	}
	opts, err := Opts(ctx, cl, creds, auth.Request{Mirror: mirror, Role: role}, WithSockets(so))
	if err != nil {
		return nil, fmt.Errorf("%s cluster: %w", role, err)
	}
	backoff := cfg.ReconnectBackoff
	opts = append(opts,
		kgo.RequestTimeoutOverhead(readTimeout),
		kgo.RetryBackoffFn(func(tries int) time.Duration {
			d := backoff << min(tries, 10)
			return min(d, 10*time.Second)
		}),
		kgo.MetadataMinAge(time.Second),
	)
	return opts, nil
}

// ClientID is the configured client.id, or "kmirror-<role>" (role here may
// carry the mirror's name: "source-dc1").
func ClientID(configured, role string) string {
	if configured != "" {
		return configured
	}
	return "kmirror-" + role
}
