package topicsync

import (
	"context"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/core/config"
	"github.com/kmirror/kmirror/core/scope"
	"github.com/kmirror/kmirror/internal/kfaketest"
	"github.com/kmirror/kmirror/sdk/filter"
)

// fixture is a source and a destination kfake cluster with clients.
type fixture struct {
	src, dst     *kfake.Cluster
	srcCl, dstCl *kgo.Client
}

func newFixture(t *testing.T, dstOpts ...kfake.Opt) *fixture {
	t.Helper()
	src := kfaketest.NewCluster(t)
	dst := kfaketest.NewCluster(t, dstOpts...)
	f := &fixture{src: src, dst: dst}
	f.srcCl = kfaketest.NewClient(t, src)
	if len(dstOpts) == 0 {
		// kadm answers ListEndOffsets from the client's metadata, which
		// otherwise keeps a new topic unknown for up to 5 s.
		f.dstCl = kfaketest.NewClient(t, dst, kgo.MetadataMinAge(10*time.Millisecond))
	}
	return f
}

func deleteTopic(t *testing.T, cl *kgo.Client, topic string) {
	t.Helper()
	resp, err := kadm.NewClient(cl).DeleteTopic(context.Background(), topic)
	if err == nil {
		err = resp.Err
	}
	if err != nil {
		t.Fatalf("deleting topic %s: %v", topic, err)
	}
}

// dynamicConfigs returns the configs set on a topic (not defaults).
func dynamicConfigs(t *testing.T, cl *kgo.Client, topic string) map[string]string {
	t.Helper()
	cfgs, err := topicConfigs(context.Background(), kadm.NewClient(cl), topic)
	if err != nil {
		t.Fatal(err)
	}
	return cfgs[topic].Dynamic
}

func partitionCount(t *testing.T, cl *kgo.Client, topic string) int32 {
	t.Helper()
	d, err := kadm.NewClient(cl).ListTopics(context.Background(), topic)
	if err != nil {
		t.Fatal(err)
	}
	if td, ok := d[topic]; ok && td.Err == nil {
		return int32(len(td.Partitions))
	}
	return 0
}

func regexes(t *testing.T, csv string) config.RegexList {
	t.Helper()
	var items []string
	if csv != "" {
		items = strings.Split(csv, ",")
	}
	l, err := config.CompileRegexList(items)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// fakeEngine is the mirror's side of the rounds: it records what the
// Syncer asks of it.
type fakeEngine struct {
	name string
	s    *Syncer // Start makes topics read-only through it when protect is set

	mu        sync.Mutex
	running   map[Running]bool
	recorded  []string          // topics recorded in the state store
	stoppedBy map[string]bool   // topics an operator stopped
	claims    map[string]string // topic → the mirror that owns it
	protect   bool
	startErr  map[string]error
	started   map[string]int32 // topic → partitions last handed to Start
	recreated []Running        // what Recreated was told, with the new id
	stops     map[string]string
	written   map[string]bool // topics whose partitions copied records (Written)
	destGone  []string        // what DestinationDeleted was told, in order
}

func newFakeEngine(name string) *fakeEngine {
	return &fakeEngine{name: name, running: map[Running]bool{}, stoppedBy: map[string]bool{}, claims: map[string]string{},
		startErr: map[string]error{}, started: map[string]int32{}, stops: map[string]string{}, written: map[string]bool{}}
}

func (e *fakeEngine) Running() []Running {
	e.mu.Lock()
	defer e.mu.Unlock()
	var out []Running
	for r := range e.running {
		out = append(out, r)
	}
	return out
}

func (e *fakeEngine) Known(context.Context) ([]string, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	seen := map[string]bool{}
	for r := range e.running {
		seen[r.Topic] = true
	}
	for _, t := range e.recorded {
		seen[t] = true
	}
	var out []string
	for t := range seen {
		out = append(out, t)
	}
	sort.Strings(out)
	return out, nil
}

func (e *fakeEngine) WithoutStopped(_ context.Context, topics []Topic) ([]Topic, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	var out []Topic
	for _, t := range topics {
		if !e.stoppedBy[t.Name] {
			out = append(out, t)
		}
	}
	return out, nil
}

func (e *fakeEngine) Claim(topics []string) map[string]string {
	e.mu.Lock()
	defer e.mu.Unlock()
	conflicts := map[string]string{}
	for _, t := range topics {
		switch owner, ok := e.claims[t]; {
		case !ok:
			e.claims[t] = e.name
		case owner != e.name:
			conflicts[t] = owner
		}
	}
	return conflicts
}

func (e *fakeEngine) Owns(topic string) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.claims[topic] == e.name
}

func (e *fakeEngine) Start(ctx context.Context, t Topic, partitions int32) error {
	e.mu.Lock()
	err, protect := e.startErr[t.Name], e.protect
	e.mu.Unlock()
	if err != nil {
		return err
	}
	if protect {
		if err := e.s.Protect(ctx, t.Name); err != nil {
			return err
		}
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	e.started[t.Name] = partitions
	for p := int32(0); p < partitions; p++ {
		if !e.isRunning(t.Name, p) {
			e.running[Running{Topic: t.Name, Partition: p, TopicID: t.ID}] = true
		}
	}
	return nil
}

func (e *fakeEngine) isRunning(topic string, p int32) bool {
	for r := range e.running {
		if r.Topic == topic && r.Partition == p {
			return true
		}
	}
	return false
}

func (e *fakeEngine) Recreated(topic string, p int32, id [16]byte) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.recreated = append(e.recreated, Running{Topic: topic, Partition: p, TopicID: id})
}

func (e *fakeEngine) Written(_ context.Context, topic string) (bool, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.written[topic], nil
}

func (e *fakeEngine) DestinationDeleted(_ context.Context, topic string) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.destGone = append(e.destGone, topic)
	return nil
}

func (e *fakeEngine) Stop(_ context.Context, reasons map[string]string) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	for t, r := range reasons {
		e.stops[t] = r
	}
	return nil
}

// newSyncer builds a Syncer of mirror "test" over f with the topic include
// and exclude patterns (comma-separated) and mirror.topic.properties.exclude.
func newSyncer(t *testing.T, f *fixture, dst *kgo.Client, include, exclude, propsExclude string) (*Syncer, *fakeEngine) {
	t.Helper()
	mc := &config.Mirror{Name: "test", TopicsInclude: regexes(t, include), TopicsExclude: regexes(t, exclude)}
	scope := scope.New(mc)
	eng := newFakeEngine("test")
	if dst == nil {
		dst = f.dstCl
	}
	s, err := New(Options{
		Mirror: "test", Source: f.srcCl, Destination: dst,
		Filter:            scope,
		InScope:           func(topic string) bool { return scope.Topic(filter.Topic{Name: topic}) },
		PropertiesExclude: regexes(t, propsExclude),
		Engine:            eng,
	})
	if err != nil {
		t.Fatal(err)
	}
	eng.s = s
	return s, eng
}

// aclBindings returns every ACL binding of the cluster behind cl.
func aclBindings(t *testing.T, cl *kgo.Client) []kmsg.DescribeACLsResponseResource {
	t.Helper()
	req := kmsg.NewPtrDescribeACLsRequest()
	req.ResourceType = kmsg.ACLResourceTypeAny
	req.ResourcePatternType = kmsg.ACLResourcePatternTypeAny
	req.Operation = kmsg.ACLOperationAny
	req.PermissionType = kmsg.ACLPermissionTypeAny
	resp, err := req.RequestWith(context.Background(), cl)
	if err != nil {
		t.Fatal(err)
	}
	return resp.Resources
}
