package metrics

import (
	"context"
	"errors"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
)

// Client records what one cluster client of kmirror does on the network,
// from franz-go's hooks (Hook): connections opened, failed and closed,
// authentications refused, bytes written and read, requests by API and
// their latency, and the time brokers throttled it (KIP-1279's fetcher
// network metrics: connection-count, connection-creation-total,
// connection-close-total, failed-authentication-total,
// incoming-byte-total, outgoing-byte-total, request-total). Names, in
// Prometheus form, each labelled {cluster, mirror}:
//
//	kmirror_client_connections                          gauge
//	kmirror_client_dials_total{result}                  counter (result: ok, error)
//	kmirror_client_authentication_failures_total        counter
//	kmirror_client_disconnects_total                    counter
//	kmirror_client_incoming_bytes_total                 counter
//	kmirror_client_outgoing_bytes_total                 counter
//	kmirror_client_requests_total{api,result}           counter
//	kmirror_client_request_latency_seconds{api}         histogram
//	kmirror_client_throttle_seconds_total               counter
//
// cluster is the client's role (source or destination) and mirror the
// mirror it serves, empty for the daemon's destination client, which every
// mirror shares. Brokers are not a label: a cluster's series stay as many
// as the API keys kmirror uses, whatever the cluster's size. The hooks
// run on franz-go's request paths: they touch atomics and, for the
// latency, one histogram with attributes built once per API key.
type Client struct {
	inst *clientInstruments
	// attrs are {cluster, mirror}; ok and fail add result.
	attrs, ok, fail metric.ObserveOption
	base            []attribute.KeyValue

	conns sync.Map // net.Conn → struct{}: the connections open now

	open, dials, dialErrors, authFailures, disconnects atomic.Int64
	bytesIn, bytesOut, throttled                       atomic.Int64 // throttled: nanoseconds

	apis [kmsg.MaxKey + 2]apiStats // by key; the last for keys above MaxKey
}

// apiStats are a client's requests of one API key.
type apiStats struct {
	once     sync.Once
	used     atomic.Bool
	ok, fail atomic.Int64
	okAttr   metric.ObserveOption
	failAttr metric.ObserveOption
	record   []metric.RecordOption
}

// clientKey names a Client: one per cluster role and mirror.
type clientKey struct{ cluster, mirror string }

// clientInstruments are shared by every Client of a Provider.
type clientInstruments struct {
	latency metric.Float64Histogram
}

// Client returns the figures of the client of cluster ("source" or
// "destination") serving mirror ("" for the daemon's destination): a new
// Client at the first call, the same one (counters intact) afterwards, so
// that a client built again (a mirror reconnecting or restarted) adds to
// its series. A nil Provider returns a nil Client, whose Hook records
// nothing.
func (p *Provider) Client(cluster, mirror string) (*Client, error) {
	if p == nil {
		return nil, nil
	}
	p.clOnce.Do(func() { p.clInst, p.clErr = p.newClientInstruments() })
	if p.clErr != nil {
		return nil, p.clErr
	}
	p.clMu.Lock()
	defer p.clMu.Unlock()
	if p.clients == nil {
		p.clients = map[clientKey]*Client{}
	}
	k := clientKey{cluster, mirror}
	if c, ok := p.clients[k]; ok {
		return c, nil
	}
	base := []attribute.KeyValue{attribute.String("cluster", cluster), attribute.String("mirror", mirror)}
	c := &Client{inst: p.clInst, base: base,
		attrs: metric.WithAttributeSet(attribute.NewSet(base...)),
		ok:    metric.WithAttributeSet(attribute.NewSet(append(base[:2:2], attribute.String("result", "ok"))...)),
		fail:  metric.WithAttributeSet(attribute.NewSet(append(base[:2:2], attribute.String("result", "error"))...)),
	}
	p.clients[k] = c
	return c, nil
}

// Hook returns the kgo option that feeds c from a client's connections
// and requests. Clients built from that client's options (the fetcher's
// extra clients) feed c too.
func (c *Client) Hook() kgo.Opt {
	if c == nil {
		return kgo.WithHooks()
	}
	return kgo.WithHooks(clientHook{c})
}

func (p *Provider) clientList() []*Client {
	p.clMu.Lock()
	defer p.clMu.Unlock()
	out := make([]*Client, 0, len(p.clients))
	for _, c := range p.clients {
		out = append(out, c)
	}
	return out
}

func (p *Provider) newClientInstruments() (*clientInstruments, error) {
	m := p.Meter("github.com/kmirror/kmirror/core/metrics/client")
	in := &clientInstruments{}
	var err error
	if in.latency, err = m.Float64Histogram("client.request.latency", metric.WithUnit("s"), metric.WithExplicitBucketBoundaries(latencyBuckets...),
		metric.WithDescription("Time from writing a request to a broker to reading its answer, by cluster, mirror and API (Kafka's request-latency; a Fetch long poll waits up to its max wait).")); err != nil {
		return nil, err
	}
	type counter struct {
		name, doc string
		gauge     bool
		observe   func(o metric.Int64Observer, c *Client)
	}
	for _, k := range []counter{
		{"client.connections", "Connections open to the cluster's brokers (KIP-1279 connection-count), by cluster and mirror.", true,
			func(o metric.Int64Observer, c *Client) { o.Observe(c.open.Load(), c.attrs) }},
		{"client.dials", "Connections opened to the cluster's brokers, by cluster, mirror and result (error: the dial, TLS, or the connection's set-up including SASL failed; KIP-1279 connection-creation-total).", false,
			func(o metric.Int64Observer, c *Client) {
				o.Observe(c.dials.Load()-c.dialErrors.Load(), c.ok)
				o.Observe(c.dialErrors.Load(), c.fail)
			}},
		{"client.authentication.failures", "Connections whose SASL authentication the broker refused, with an error or by closing the connection during SASLAuthenticate (KIP-1279 failed-authentication-total), by cluster and mirror.", false,
			func(o metric.Int64Observer, c *Client) { o.Observe(c.authFailures.Load(), c.attrs) }},
		{"client.disconnects", "Connections to the cluster's brokers closed (idle, failed, or the client closed; KIP-1279 connection-close-total), by cluster and mirror.", false,
			func(o metric.Int64Observer, c *Client) { o.Observe(c.disconnects.Load(), c.attrs) }},
		{"client.incoming.bytes", "Bytes read from the cluster's brokers (KIP-1279 incoming-byte-total), by cluster and mirror.", false,
			func(o metric.Int64Observer, c *Client) { o.Observe(c.bytesIn.Load(), c.attrs) }},
		{"client.outgoing.bytes", "Bytes written to the cluster's brokers (KIP-1279 outgoing-byte-total), by cluster and mirror.", false,
			func(o metric.Int64Observer, c *Client) { o.Observe(c.bytesOut.Load(), c.attrs) }},
		{"client.requests", "Requests answered or failed, by cluster, mirror, API (Kafka's request name) and result (error: the request could not be written or its answer read; errors inside an answer are the caller's; KIP-1279 request-total).", false,
			func(o metric.Int64Observer, c *Client) {
				for i := range c.apis {
					a := &c.apis[i]
					if a.used.Load() {
						o.Observe(a.ok.Load(), a.okAttr)
						o.Observe(a.fail.Load(), a.failAttr)
					}
				}
			}},
	} {
		cb := metric.WithInt64Callback(func(_ context.Context, o metric.Int64Observer) error {
			for _, c := range p.clientList() {
				k.observe(o, c)
			}
			return nil
		})
		if k.gauge {
			_, err = m.Int64ObservableGauge(k.name, metric.WithDescription(k.doc), cb)
		} else {
			_, err = m.Int64ObservableCounter(k.name, metric.WithDescription(k.doc), cb)
		}
		if err != nil {
			return nil, err
		}
	}
	_, err = m.Float64ObservableCounter("client.throttle", metric.WithUnit("s"),
		metric.WithDescription("Time the cluster's brokers throttled the client (quota), by cluster and mirror."),
		metric.WithFloat64Callback(func(_ context.Context, o metric.Float64Observer) error {
			for _, c := range p.clientList() {
				o.Observe(time.Duration(c.throttled.Load()).Seconds(), c.attrs)
			}
			return nil
		}))
	if err != nil {
		return nil, err
	}
	return in, nil
}

// api returns the stats of API key, their attributes built at first use.
func (c *Client) api(key int16) *apiStats {
	i := int(key)
	if i < 0 || i > kmsg.MaxKey {
		i = kmsg.MaxKey + 1
	}
	a := &c.apis[i]
	a.once.Do(func() {
		name := "unknown"
		if i <= kmsg.MaxKey {
			name = kmsg.NameForKey(key)
		}
		kv := append(c.base[:2:2], attribute.String("api", name))
		a.record = []metric.RecordOption{metric.WithAttributeSet(attribute.NewSet(kv...))}
		a.okAttr = metric.WithAttributeSet(attribute.NewSet(append(kv[:3:3], attribute.String("result", "ok"))...))
		a.failAttr = metric.WithAttributeSet(attribute.NewSet(append(kv[:3:3], attribute.String("result", "error"))...))
		a.used.Store(true)
	})
	return a
}

// stoppedOnPurpose reports an error of a client or request kmirror
// stopped itself, which is no failure of the cluster.
func stoppedOnPurpose(err error) bool {
	return errors.Is(err, context.Canceled) || errors.Is(err, net.ErrClosed) || errors.Is(err, kgo.ErrClientClosed)
}

// authFailure reports a broker's refusal of a connection's SASL
// authentication, as Kafka answers it (an error code, then it closes the
// connection).
func authFailure(err error) bool {
	return errors.Is(err, kerr.SaslAuthenticationFailed) || errors.Is(err, kerr.IllegalSaslState) || errors.Is(err, kerr.UnsupportedSaslMechanism)
}

// saslAuthenticate is the SASLAuthenticate request's key.
var saslAuthenticate = kmsg.NewPtrSASLAuthenticateRequest().Key()

// clientHook adapts Client to kgo's hook interfaces.
type clientHook struct{ c *Client }

var (
	_ kgo.HookBrokerConnect    = clientHook{}
	_ kgo.HookBrokerDisconnect = clientHook{}
	_ kgo.HookBrokerWrite      = clientHook{}
	_ kgo.HookBrokerRead       = clientHook{}
	_ kgo.HookBrokerE2E        = clientHook{}
	_ kgo.HookBrokerThrottle   = clientHook{}
)

// OnBrokerConnect sees each connection attempt once set up: err is the
// dial's, TLS's, or the set-up's (ApiVersions, SASL), conn nil only when
// the dial failed.
func (h clientHook) OnBrokerConnect(_ kgo.BrokerMetadata, _ time.Duration, conn net.Conn, err error) {
	c := h.c
	if err != nil && stoppedOnPurpose(err) {
		return
	}
	c.dials.Add(1)
	if err != nil {
		c.dialErrors.Add(1)
		if authFailure(err) {
			c.authFailures.Add(1)
		}
		return
	}
	if _, loaded := c.conns.LoadOrStore(conn, struct{}{}); !loaded {
		c.open.Add(1)
	}
}

// OnBrokerDisconnect sees a connection close; one that failed its set-up
// was never counted open.
func (h clientHook) OnBrokerDisconnect(_ kgo.BrokerMetadata, conn net.Conn) {
	if _, ok := h.c.conns.LoadAndDelete(conn); ok {
		h.c.open.Add(-1)
		h.c.disconnects.Add(1)
	}
}

func (h clientHook) OnBrokerWrite(_ kgo.BrokerMetadata, _ int16, n int, _, _ time.Duration, _ error) {
	h.c.bytesOut.Add(int64(n))
}

func (h clientHook) OnBrokerRead(_ kgo.BrokerMetadata, _ int16, n int, _, _ time.Duration, _ error) {
	h.c.bytesIn.Add(int64(n))
}

func (h clientHook) OnBrokerE2E(_ kgo.BrokerMetadata, key int16, e kgo.BrokerE2E) {
	a := h.c.api(key)
	if err := e.Err(); err != nil {
		if !stoppedOnPurpose(err) {
			a.fail.Add(1)
			// A broker that refuses the credentials may close the
			// connection instead of answering (kfake does): the
			// refusal is then a SASLAuthenticate without an answer.
			if key == saslAuthenticate && e.ReadErr != nil {
				h.c.authFailures.Add(1)
			}
		}
		return
	}
	a.ok.Add(1)
	h.c.inst.latency.Record(context.Background(), e.DurationE2E().Seconds(), a.record...)
}

func (h clientHook) OnBrokerThrottle(_ kgo.BrokerMetadata, d time.Duration, _ bool) {
	h.c.throttled.Add(int64(d))
}
