package kclient

import (
	"context"
	"errors"
	"net"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/twmb/franz-go/pkg/kgo"
)

// DefaultRepeatInterval is how often at most Health logs that a cluster is
// still unreachable.
const DefaultRepeatInterval = 30 * time.Second

// Health tracks whether kmirror can talk to one cluster now, from what the
// cluster's client already does: it is a kgo hook (Hook) that watches every
// dial, request write and response read, and adds no traffic of its own.
//
// Each broker (and each seed address) counts as reachable after its last
// dial, write or read succeeded and as unreachable after it failed; a
// broker whose idle connection closed is forgotten. The cluster is
// reachable while any broker is; while no broker is known (before the
// first dial, or once every connection went idle) it keeps its last state,
// reachable at first.
//
// The transitions are logged: the first failure at once, then, while the
// cluster stays unreachable, at most one line per repeat interval saying how
// many failures repeated; and the recovery with the count and how long it
// lasted.
type Health struct {
	log      hclog.Logger
	interval time.Duration
	now      func() time.Time

	mu        sync.Mutex
	nodes     map[int32]bool // broker → its last dial, write or read succeeded
	reachable bool
	since     time.Time
	lastErr   string
	repeats   int       // failures since the last logged line
	failures  int       // failures since the cluster became unreachable
	loggedAt  time.Time // when the last "unreachable" line was logged
}

// ClusterHealth is a snapshot of a cluster's reachability.
type ClusterHealth struct {
	// Reachable is false while kmirror cannot talk to any broker of the
	// cluster.
	Reachable bool
	// Since is when Reachable took its value (the tracker's creation at
	// first).
	Since time.Time
	// LastError is the last failure seen (a dial, write or read error; it
	// names a broker address, never a credential); empty before any.
	LastError string
}

// NewHealth returns a tracker that logs with log at most once per interval
// (DefaultRepeatInterval when interval is not positive) while the cluster
// stays unreachable.
func NewHealth(log hclog.Logger, interval time.Duration) *Health {
	if interval <= 0 {
		interval = DefaultRepeatInterval
	}
	h := &Health{log: log, interval: interval, now: time.Now, nodes: map[int32]bool{}, reachable: true}
	h.since = h.now()
	return h
}

// Hook returns the kgo option that feeds h from a client's connections.
func (h *Health) Hook() kgo.Opt { return kgo.WithHooks(healthHook{h}) }

// Snapshot returns the cluster's reachability now.
func (h *Health) Snapshot() ClusterHealth {
	h.mu.Lock()
	defer h.mu.Unlock()
	return ClusterHealth{Reachable: h.reachable, Since: h.since, LastError: h.lastErr}
}

// observe records the outcome of one dial, write or read of a broker.
func (h *Health) observe(node int32, err error) {
	if err != nil && (errors.Is(err, context.Canceled) || errors.Is(err, net.ErrClosed)) {
		return // the client or a request was stopped on purpose
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	now := h.now()
	h.nodes[node] = err == nil
	if err != nil {
		h.lastErr = err.Error()
	}
	was := h.reachable
	h.reachable = h.anyReachable()
	switch {
	case was && !h.reachable:
		h.since, h.failures, h.repeats, h.loggedAt = now, 1, 0, now
		h.log.Warn("cluster unreachable; retrying", "error", h.lastErr)
	case !was && h.reachable:
		h.log.Info("cluster reachable again", "failures", h.failures, "unreachable_for", now.Sub(h.since).Round(time.Millisecond).String())
		h.since, h.failures, h.repeats = now, 0, 0
	case !h.reachable && err != nil:
		h.failures++
		h.repeats++
		if now.Sub(h.loggedAt) >= h.interval {
			h.log.Warn("cluster still unreachable; retrying", "error", h.lastErr, "repeated", h.repeats,
				"unreachable_for", now.Sub(h.since).Round(time.Millisecond).String())
			h.repeats, h.loggedAt = 0, now
		}
	}
}

// anyReachable reports whether any known broker is reachable; with none
// known it keeps the last state. h.mu must be held.
func (h *Health) anyReachable() bool {
	if len(h.nodes) == 0 {
		return h.reachable
	}
	for _, ok := range h.nodes {
		if ok {
			return true
		}
	}
	return false
}

// forget drops a broker whose connection closed after it last succeeded
// (an idle connection), so that a broker kmirror no longer talks to does
// not keep the cluster reachable.
func (h *Health) forget(node int32) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.nodes[node] {
		delete(h.nodes, node)
	}
}

// healthHook adapts Health to kgo's hook interfaces.
type healthHook struct{ h *Health }

var (
	_ kgo.HookBrokerConnect    = healthHook{}
	_ kgo.HookBrokerDisconnect = healthHook{}
	_ kgo.HookBrokerWrite      = healthHook{}
	_ kgo.HookBrokerRead       = healthHook{}
)

func (k healthHook) OnBrokerConnect(meta kgo.BrokerMetadata, _ time.Duration, _ net.Conn, err error) {
	k.h.observe(meta.NodeID, err)
}

func (k healthHook) OnBrokerDisconnect(meta kgo.BrokerMetadata, _ net.Conn) { k.h.forget(meta.NodeID) }

func (k healthHook) OnBrokerWrite(meta kgo.BrokerMetadata, _ int16, _ int, _, _ time.Duration, err error) {
	k.h.observe(meta.NodeID, err)
}

func (k healthHook) OnBrokerRead(meta kgo.BrokerMetadata, _ int16, _ int, _, _ time.Duration, err error) {
	k.h.observe(meta.NodeID, err)
}
