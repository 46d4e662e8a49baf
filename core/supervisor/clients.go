package supervisor

import (
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kmirror/kmirror/core/config"
	"github.com/kmirror/kmirror/core/kclient"
)

// ClientOpts builds franz-go options for one cluster from its client keys and
// the daemon-wide connection keys. role names the client in errors and in the
// client id ("source" or "destination").
func ClientOpts(cfg *config.Config, cl *config.Cluster, role string) ([]kgo.Opt, error) {
	// Source connections carry fetches: replica.socket.receive.buffer.bytes
	// sizes their receive buffer and replica.socket.timeout.ms bounds their
	// reads; destination connections use receive.buffer.bytes and
	// request.timeout.ms.
	so := kclient.SocketOptions{SendBuffer: cfg.SendBufferBytes, ReceiveBuffer: cfg.ReceiveBufferBytes, DialTimeout: cfg.SocketConnectionSetupTimeout}
	readTimeout := cfg.RequestTimeout
	if role == "source" {
		so.ReceiveBuffer = cfg.ReplicaSocketReceiveBuffer
		readTimeout = cfg.ReplicaSocketTimeout
	}
	opts, err := kclient.Opts(cl, kclient.WithSockets(so))
	if errors.Is(err, kclient.ErrTokenSourceRequired) {
		return nil, fmt.Errorf("%s cluster: sasl.mechanism OAUTHBEARER needs a credential provider plugin, which this build does not wire yet; use PLAIN or SCRAM: %w", role, err)
	}
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

// ClientID is the configured client.id, or "kmirror-<role>".
func ClientID(configured, role string) string {
	if configured != "" {
		return configured
	}
	return "kmirror-" + role
}
