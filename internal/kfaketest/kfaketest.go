// Package kfaketest holds the fixtures kmirror's tests share: in-process
// franz-go kfake clusters and clients that close with the test, a context
// bounded by the test, and WaitFor, which polls a condition instead of
// sleeping for a guessed time.
//
// Only _test.go files import this package (TestOnlyTestsImportThisPackage
// checks it). It lives at the module root, not under core, so that cmd's
// tests can use it too.
//
// Every helper takes the test's testing.TB and must be called from the
// test's own goroutine: a failure ends the test with t.Fatalf.
package kfaketest

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
)

const (
	// DefaultBrokers is the number of brokers NewCluster starts unless
	// an option (kfake.NumBrokers) says otherwise.
	DefaultBrokers = 1

	// Timeout bounds Context and, by default, WaitFor: long enough for a
	// loaded CI machine, short enough that a hung test fails on its own
	// rather than at go test's global timeout.
	Timeout = 30 * time.Second

	// PollInterval is how often WaitFor evaluates its condition once it
	// has waited a while. It first looks again after FirstPoll, then
	// doubles the pause up to PollInterval: a condition that holds a moment
	// later is seen at once (a test racing a short window needs that), and
	// a long wait costs little CPU.
	PollInterval = 10 * time.Millisecond

	// FirstPoll is WaitFor's first pause between two evaluations.
	FirstPoll = 100 * time.Microsecond
)

// NewCluster starts an in-process kfake cluster of DefaultBrokers brokers,
// closed when the test ends. The options are kfake's and apply after the
// defaults, so kfake.NumBrokers replaces the broker count; use
// kfake.SeedTopics to create topics up front and kfake.BrokerConfigs for
// broker configs (topics with their own configs: CreateTopic).
func NewCluster(t testing.TB, opts ...kfake.Opt) *kfake.Cluster {
	t.Helper()
	c, err := kfake.NewCluster(append([]kfake.Opt{kfake.NumBrokers(DefaultBrokers)}, opts...)...)
	if err != nil {
		t.Fatalf("starting a kfake cluster: %v", err)
	}
	t.Cleanup(c.Close)
	return c
}

// NewClient returns a client seeded with c's brokers and the given options,
// closed when the test ends (closing it earlier is harmless).
func NewClient(t testing.TB, c *kfake.Cluster, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(c.ListenAddrs()...)}, opts...)...)
	if err != nil {
		t.Fatalf("creating a client of the kfake cluster: %v", err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// NewAdmin returns an admin client over a new NewClient of c.
func NewAdmin(t testing.TB, c *kfake.Cluster) *kadm.Client {
	t.Helper()
	return kadm.NewClient(NewClient(t, c))
}

// CreateTopic creates topic with partitions partitions (replication factor
// 1) and the given topic configs (nil for none) through cl, failing the test
// if the cluster refuses.
func CreateTopic(t testing.TB, cl *kgo.Client, topic string, partitions int32, configs map[string]*string) {
	t.Helper()
	resp, err := kadm.NewClient(cl).CreateTopic(Context(t), partitions, 1, configs, topic)
	if err == nil {
		err = resp.Err
	}
	if err != nil {
		t.Fatalf("creating topic %s: %v", topic, err)
	}
}

// Context returns a context cancelled after Timeout or when the test ends,
// whichever is first.
func Context(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), Timeout)
	t.Cleanup(cancel)
	return ctx
}

// WaitFor polls cond (see PollInterval) until it reports done, for up to
// Timeout. cond returns whether the awaited state is reached and, if not, a
// description of the state it saw; on timeout the test fails naming what it
// waited for and the last description. cond runs on the test's goroutine,
// so it may itself fail the test.
func WaitFor(t testing.TB, what string, cond func() (done bool, state string)) {
	t.Helper()
	WaitForWithin(t, Timeout, what, cond)
}

// WaitForWithin is WaitFor with its own deadline.
func WaitForWithin(t testing.TB, timeout time.Duration, what string, cond func() (done bool, state string)) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	pause := FirstPoll
	for {
		done, state := cond()
		if done {
			return
		}
		if time.Now().After(deadline) {
			if state == "" {
				t.Fatalf("timed out after %s waiting for %s", timeout, what)
			}
			t.Fatalf("timed out after %s waiting for %s; last state: %s", timeout, what, state)
		}
		time.Sleep(pause) // the poll's pause, not a guess at how long cond takes
		pause = min(2*pause, PollInterval)
	}
}
