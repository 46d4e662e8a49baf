package membership

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/core/backoff"
)

// ProtocolType is the protocol type of kmirror's groups (Kafka Connect's
// workers use "connect", consumers "consumer"). The broker refuses a member
// whose protocol type differs from the group's, so a kmirror group id that a
// consumer group already uses fails with ErrGroupInUse.
const ProtocolType = "kmirror"

// ProtocolName is the assignment protocol this package speaks: the sticky
// assignor of Assign with the cooperative handover described in the package
// documentation, over the version 1 wire documents.
const ProtocolName = "kmirror-sticky-v1"

// Defaults of the options, Kafka Connect's.
const (
	DefaultSessionTimeout    = 10 * time.Second
	DefaultHeartbeatInterval = 3 * time.Second
	DefaultRebalanceTimeout  = 60 * time.Second
)

// Errors Run returns for conditions that retrying does not cure.
var (
	// ErrFenced: another member joined with this member's instance id
	// (static membership): two daemons run with one daemon id.
	ErrFenced = errors.New("fenced by another member with the same instance id (two daemons share one daemon id)")
	// ErrGroupInUse: the group exists with another protocol type or
	// protocol (a consumer group, a Connect cluster, an incompatible
	// kmirror).
	ErrGroupInUse = errors.New("the group is used by another kind of member (a consumer group, a Connect cluster, or kmirror daemons of an incompatible version): choose another group id")
	// ErrNotAuthorized: the destination refuses kmirror's principal on
	// the group.
	ErrNotAuthorized = errors.New("not authorized on the group: grant kmirror's principal READ on the group")
)

// Metadata is what a member tells the group about itself as it joins.
type Metadata struct {
	// DaemonID names the daemon (and is its group.instance.id under
	// static membership).
	DaemonID string `json:"daemon"`
	// Host and AdminAddress say where the daemon runs and where its admin
	// API answers, for the group's description.
	Host         string `json:"host,omitempty"`
	AdminAddress string `json:"admin,omitempty"`
	// Items are the work items the daemon can run (its configuration's).
	Items []string `json:"items,omitempty"`
	// Weights are optional costs of items (bytes/s measured by their
	// owner): with any, the assignor balances load instead of counts.
	Weights map[string]float64 `json:"weights,omitempty"`
}

// MemberInfo is one member of a generation as every member sees it.
type MemberInfo struct {
	MemberID     string   `json:"id"`
	DaemonID     string   `json:"daemon"`
	Host         string   `json:"host,omitempty"`
	AdminAddress string   `json:"admin,omitempty"`
	Items        []string `json:"items"`
}

// View is the current generation as this member knows it: every member with
// its assignment, and the items moving between owners (withheld this
// generation while their old owner stops them).
type View struct {
	Group      string
	Generation int32
	// Leader and Self are member ids; Self is empty while not a member.
	Leader  string
	Self    string
	Members []MemberInfo
	Moving  []string
}

// Owner returns the member an item is assigned to in this generation.
func (v View) Owner(item string) (MemberInfo, bool) {
	for _, m := range v.Members {
		if _, ok := slices.BinarySearch(m.Items, item); ok {
			return m, true
		}
	}
	return MemberInfo{}, false
}

// Handler is told what this member gains and loses. Its methods are called
// one at a time from Run's goroutine, never concurrently, while heartbeats
// go on in the background; OnRevoked's items are always a subset of what
// OnAssigned gave.
type Handler interface {
	// OnAssigned: the member now owns items (sorted) from generation on.
	OnAssigned(generation int32, items []string)
	// OnRevoked: the member no longer owns items (sorted). It must return
	// only when the items have stopped: the group gives them to another
	// member after that, not before. It must return within the rebalance
	// timeout, after which the group goes on without this member.
	OnRevoked(generation int32, items []string)
}

type config struct {
	session, heartbeat, rebalance time.Duration
	static                        bool
	retry                         backoff.Policy
	log                           hclog.Logger
}

// Opt configures a Member.
type Opt func(*config)

// WithSessionTimeout sets how long the coordinator waits for a heartbeat
// before it drops the member. Default DefaultSessionTimeout; the broker
// bounds it (group.min.session.timeout.ms, group.max.session.timeout.ms).
func WithSessionTimeout(d time.Duration) Opt { return func(c *config) { c.session = d } }

// WithHeartbeatInterval sets how often a member heartbeats, which bounds how
// late it learns of a rebalance. Default DefaultHeartbeatInterval; less
// than the session timeout.
func WithHeartbeatInterval(d time.Duration) Opt { return func(c *config) { c.heartbeat = d } }

// WithRebalanceTimeout sets how long the coordinator waits for the members
// to join a rebalance, and so how long OnRevoked may take. Default
// DefaultRebalanceTimeout; at least the session timeout.
func WithRebalanceTimeout(d time.Duration) Opt { return func(c *config) { c.rebalance = d } }

// WithStaticMembership makes the daemon id the member's group.instance.id
// (KIP-345): a daemon that restarts within the session timeout without
// leaving (Run's context ended, not Close) gets its items back without a
// rebalance, and a second daemon with the same id is refused (ErrFenced).
// Default off.
func WithStaticMembership() Opt { return func(c *config) { c.static = true } }

// WithRetryBackoff sets the waits between failed requests to the group
// coordinator. Default backoff.Exponential(100ms, 5s) with jitter.
func WithRetryBackoff(p backoff.Policy) Opt { return func(c *config) { c.retry = p } }

// WithLogger sets the logger. Default: none.
func WithLogger(l hclog.Logger) Opt { return func(c *config) { c.log = l } }

// Member is this daemon's membership in a kmirror group. Build it with New,
// run it with Run; Close leaves the group.
type Member struct {
	cl    *kgo.Client
	group string
	h     Handler
	cfg   config
	log   hclog.Logger

	started   atomic.Bool
	closing   chan struct{}
	closeOnce sync.Once
	done      chan struct{}
	rejoin    chan struct{} // capacity 1: SetItems asks for a rejoin

	// lastAck is the send time (Unix ns) of the last request whose answer
	// proved this member still in the group; the coordinator's session
	// timer started no earlier.
	lastAck atomic.Int64

	mu   sync.Mutex // guards self and view
	self Metadata
	view View

	// Run's goroutine only.
	memberID   string
	generation int32
	owned      map[string]bool
	ownedGen   int32
}

// New returns a member of group on the cluster cl talks to (the
// destination), which reports self and tells h what it owns.
func New(cl *kgo.Client, group string, self Metadata, h Handler, opts ...Opt) (*Member, error) {
	c := config{
		session:   DefaultSessionTimeout,
		heartbeat: DefaultHeartbeatInterval,
		rebalance: DefaultRebalanceTimeout,
		retry:     backoff.Exponential(100*time.Millisecond, 5*time.Second),
		log:       hclog.NewNullLogger(),
	}
	for _, o := range opts {
		o(&c)
	}
	switch {
	case cl == nil || h == nil:
		return nil, fmt.Errorf("membership: group %q: a client and a handler are required", group)
	case group == "":
		return nil, errors.New("membership: the group id is empty")
	case self.DaemonID == "":
		return nil, fmt.Errorf("membership: group %q: the daemon id is empty", group)
	case c.session <= 0 || c.heartbeat <= 0 || c.heartbeat >= c.session:
		return nil, fmt.Errorf("membership: group %q: the heartbeat interval (%s) must be positive and less than the session timeout (%s)", group, c.heartbeat, c.session)
	case c.rebalance < c.session:
		return nil, fmt.Errorf("membership: group %q: the rebalance timeout (%s) must be at least the session timeout (%s)", group, c.rebalance, c.session)
	}
	if err := c.retry.Validate(); err != nil {
		return nil, fmt.Errorf("membership: group %q: retry backoff: %w", group, err)
	}
	self.Items = sortedSet(self.Items)
	return &Member{
		cl: cl, group: group, h: h, cfg: c,
		log:     c.log.With("group", group, "daemon", self.DaemonID),
		closing: make(chan struct{}),
		done:    make(chan struct{}),
		rejoin:  make(chan struct{}, 1),
		self:    self,
		view:    View{Group: group},
		owned:   map[string]bool{},
	}, nil
}

// SetItems changes the items this daemon can run and their weights (nil:
// none); the member rejoins so that the group assigns them again. Every
// call costs the group a rebalance (cheap: cooperative, nothing that stays
// put pauses), so weights are worth updating when they changed a lot, not
// on every measurement.
func (m *Member) SetItems(items []string, weights map[string]float64) {
	m.mu.Lock()
	m.self.Items = sortedSet(items)
	m.self.Weights = weights
	m.mu.Unlock()
	select {
	case m.rejoin <- struct{}{}:
	default:
	}
}

// Members returns the current generation: every member and its items.
func (m *Member) Members() View {
	m.mu.Lock()
	defer m.mu.Unlock()
	v := m.view
	v.Members = slices.Clone(v.Members)
	for i := range v.Members {
		v.Members[i].Items = slices.Clone(v.Members[i].Items)
	}
	v.Moving = slices.Clone(v.Moving)
	return v
}

// Close leaves the group: Run revokes every item (OnRevoked returns), sends
// LeaveGroup so that the group gives them to the others at once, and
// returns. Close waits for a running Run to return; it is idempotent.
func (m *Member) Close() {
	m.closeOnce.Do(func() { close(m.closing) })
	if m.started.Load() {
		<-m.done
	}
}

// Run joins the group and keeps this member in it until ctx ends or Close
// is called, telling the handler what it gains and loses. Before it
// returns, every item is revoked. When ctx ends Run does not leave the group
// (the group notices after the session timeout, as after a crash; with
// static membership a restart within it takes the items back); Close
// leaves. Run returns nil then, or an error that retrying does not cure
// (ErrFenced, ErrGroupInUse, ErrNotAuthorized, a timeout the broker
// refuses). It may be called once.
func (m *Member) Run(ctx context.Context) error {
	if !m.started.CompareAndSwap(false, true) {
		return m.errorf("Run called twice")
	}
	defer close(m.done)
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() {
		select {
		case <-m.closing:
			cancel()
		case <-ctx.Done():
		}
	})
	err := m.loop(ctx)
	cancel()
	wg.Wait()
	m.revokeAll("the member stops")
	select {
	case <-m.closing:
		m.leave()
	default:
	}
	return err
}

// outcome is what the loop does after a failed step.
type outcome int

const (
	rejoinNow  outcome = iota // rejoin at once, keeping the items
	retryLater                // transient: back off, keep the items while the session lasts
	lost                      // the session is gone: revoke everything, then rejoin
	fatal                     // return the error
)

// loop joins, syncs, applies and heartbeats until ctx ends or a fatal error.
func (m *Member) loop(ctx context.Context) error {
	retry := m.cfg.retry.Start()
	for {
		if ctx.Err() != nil {
			return nil
		}
		ga, out, err := m.joinAndSync(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			switch out {
			case fatal:
				return err
			case lost:
				m.log.Warn("membership lost; revoking every item and joining again", "member", m.memberID, "error", err)
				m.revokeAll("membership lost")
				continue
			case rejoinNow:
				m.log.Debug("rejoining", "member", m.memberID, "reason", err)
				continue
			}
			m.log.Warn("group request failed; retrying", "member", m.memberID, "error", err)
			if m.sessionExpired() {
				m.revokeAll("no answer from the coordinator within the session timeout")
			}
			d, _ := retry.Next()
			if backoff.Sleep(ctx, d) != nil {
				return nil
			}
			continue
		}
		retry.Reset()

		// Heartbeats go on while the handler runs.
		hbCtx, hbCancel := context.WithCancel(ctx)
		hbOut := make(chan error, 1)
		var hb sync.WaitGroup
		gen, memberID := ga.Generation, m.memberID
		hb.Go(func() { m.heartbeat(hbCtx, gen, memberID, hbOut) })
		stop := func() { hbCancel(); hb.Wait() }

		if m.apply(ga) {
			// This member revoked items the group moves: rejoin now,
			// so that the next generation gives them to their new
			// owners.
			stop()
			continue
		}
		err = m.wait(ctx, hbOut)
		stop()
		switch {
		case ctx.Err() != nil:
			return nil
		case err == nil: // rebalance or new items: rejoin keeping the items
		case errors.Is(err, ErrFenced):
			return m.errorf("%w", err)
		default:
			m.log.Warn("membership lost; revoking every item and joining again", "member", m.memberID, "error", err)
			m.revokeAll("membership lost")
			if errors.Is(err, kerr.UnknownMemberID) {
				m.memberID = ""
			}
		}
	}
}

// wait returns when this member must rejoin: nil for a rebalance or new
// items, an error when the session is lost.
func (m *Member) wait(ctx context.Context, hbOut <-chan error) error {
	expiry := time.NewTimer(m.untilExpiry())
	defer expiry.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case err := <-hbOut:
			return err
		case <-m.rejoin:
			return nil
		case <-expiry.C:
			if m.sessionExpired() {
				return m.errorf("no heartbeat answered within the session timeout (%s)", m.cfg.session)
			}
			expiry.Reset(m.untilExpiry())
		}
	}
}

// heartbeat heartbeats every interval until ctx ends or the coordinator
// answers something else than "carry on": it sends nil for a rebalance,
// the error when the membership is lost, on out.
func (m *Member) heartbeat(ctx context.Context, gen int32, memberID string, out chan<- error) {
	t := time.NewTicker(m.cfg.heartbeat)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		req := kmsg.NewPtrHeartbeatRequest()
		req.Group, req.Generation, req.MemberID, req.InstanceID = m.group, gen, memberID, m.instanceID()
		sent := time.Now()
		rctx, cancel := context.WithTimeout(ctx, m.cfg.session)
		resp, err := req.RequestWith(rctx, m.cl)
		cancel()
		if err != nil {
			if ctx.Err() == nil {
				m.log.Debug("heartbeat failed", "member", memberID, "error", err)
			}
			continue
		}
		switch err := kerr.ErrorForCode(resp.ErrorCode); {
		case err == nil:
			m.ack(sent)
		case errors.Is(err, kerr.RebalanceInProgress):
			m.ack(sent)
			m.log.Debug("the group rebalances", "member", memberID, "generation", gen)
			out <- nil
			return
		case errors.Is(err, kerr.UnknownMemberID), errors.Is(err, kerr.IllegalGeneration):
			out <- fmt.Errorf("heartbeat of generation %d: %w", gen, err)
			return
		case errors.Is(err, kerr.FencedInstanceID):
			out <- fmt.Errorf("heartbeat: %w: %w", ErrFenced, err)
			return
		default: // coordinator moving or loading: kgo finds it again
			m.log.Debug("heartbeat refused; retrying", "member", memberID, "error", err)
		}
	}
}

// joinAndSync runs one JoinGroup (again after MEMBER_ID_REQUIRED) and its
// SyncGroup, computing the assignment when this member leads.
func (m *Member) joinAndSync(ctx context.Context) (groupAssignment, outcome, error) {
	var ga groupAssignment
	m.mu.Lock()
	jm := joinMetadata{V: wireVersion, Metadata: m.self, Owned: sortedKeys(m.owned), OwnedGeneration: m.ownedGen}
	m.mu.Unlock()
	meta, err := encode(jm)
	if err != nil {
		return ga, fatal, m.errorf("encoding the member metadata: %w", err)
	}

	var join *kmsg.JoinGroupResponse
	for {
		req := kmsg.NewPtrJoinGroupRequest()
		req.Group = m.group
		req.SessionTimeoutMillis = int32(m.cfg.session.Milliseconds())
		req.RebalanceTimeoutMillis = int32(m.cfg.rebalance.Milliseconds())
		req.MemberID = m.memberID
		req.InstanceID = m.instanceID()
		req.ProtocolType = ProtocolType
		req.Protocols = []kmsg.JoinGroupRequestProtocol{{Name: ProtocolName, Metadata: meta}}
		req.Reason = kmsg.StringPtr("kmirror daemon " + m.self.DaemonID + " joining")
		sent := time.Now()
		resp, err := req.RequestWith(ctx, m.cl)
		if err != nil {
			return ga, retryLater, m.errorf("join: %w", err)
		}
		if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
			if errors.Is(err, kerr.MemberIDRequired) { // KIP-394: join again with this id
				m.memberID = resp.MemberID
				continue
			}
			werr := m.errorf("join: %w", m.explain(err))
			return ga, m.classify(err), werr
		}
		m.ack(sent)
		join = resp
		break
	}
	m.memberID, m.generation = join.MemberID, join.Generation
	m.log.Debug("joined", "member", m.memberID, "generation", join.Generation, "leader", join.LeaderID, "skip_assignment", join.SkipAssignment)

	req := kmsg.NewPtrSyncGroupRequest()
	req.Group, req.Generation, req.MemberID, req.InstanceID = m.group, join.Generation, m.memberID, m.instanceID()
	req.ProtocolType, req.Protocol = kmsg.StringPtr(ProtocolType), kmsg.StringPtr(ProtocolName)
	if join.LeaderID == join.MemberID && !join.SkipAssignment {
		plan, err := m.plan(join)
		if err != nil {
			return ga, retryLater, err
		}
		b, err := encode(plan)
		if err != nil {
			return ga, fatal, m.errorf("encoding the assignment of generation %d: %w", join.Generation, err)
		}
		for _, mi := range plan.Members {
			req.GroupAssignment = append(req.GroupAssignment, kmsg.SyncGroupRequestGroupAssignment{MemberID: mi.MemberID, MemberAssignment: b})
		}
	}
	sent := time.Now()
	resp, err := req.RequestWith(ctx, m.cl)
	if err != nil {
		return ga, retryLater, m.errorf("sync of generation %d: %w", join.Generation, err)
	}
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
		werr := m.errorf("sync of generation %d: %w", join.Generation, m.explain(err))
		return ga, m.classify(err), werr
	}
	m.ack(sent)
	if err := decode(resp.MemberAssignment, &ga); err != nil {
		// Not ours to read: hold nothing rather than guess.
		m.revokeAll("unreadable assignment")
		return ga, retryLater, m.errorf("decoding the assignment of generation %d: %w", join.Generation, err)
	}
	return ga, 0, nil
}

// classify says what to do after a coordinator's error code.
func (m *Member) classify(err error) outcome {
	switch {
	case errors.Is(err, kerr.RebalanceInProgress):
		return rejoinNow
	case errors.Is(err, kerr.UnknownMemberID):
		m.memberID = ""
		return lost
	case errors.Is(err, kerr.IllegalGeneration):
		return lost
	case errors.Is(err, kerr.FencedInstanceID), errors.Is(err, kerr.InconsistentGroupProtocol),
		errors.Is(err, kerr.GroupAuthorizationFailed), errors.Is(err, kerr.InvalidSessionTimeout),
		errors.Is(err, kerr.InvalidGroupID), errors.Is(err, kerr.GroupMaxSizeReached):
		return fatal
	}
	return retryLater // NOT_COORDINATOR, COORDINATOR_NOT_AVAILABLE, COORDINATOR_LOAD_IN_PROGRESS, …
}

// explain adds the operator's sentinel to a fatal error code.
func (m *Member) explain(err error) error {
	switch {
	case errors.Is(err, kerr.FencedInstanceID):
		return fmt.Errorf("%w: %w", ErrFenced, err)
	case errors.Is(err, kerr.InconsistentGroupProtocol):
		return fmt.Errorf("%w: %w", ErrGroupInUse, err)
	case errors.Is(err, kerr.GroupAuthorizationFailed):
		return fmt.Errorf("%w: %w", ErrNotAuthorized, err)
	case errors.Is(err, kerr.InvalidSessionTimeout):
		return fmt.Errorf("the session timeout %s is outside the broker's group.min/max.session.timeout.ms: %w", m.cfg.session, err)
	}
	return err
}

// plan is the leader's assignment of a generation: Assign's target, except
// that an item another present member still holds is withheld (Moving)
// until that member has revoked it and rejoined.
func (m *Member) plan(join *kmsg.JoinGroupResponse) (groupAssignment, error) {
	ga := groupAssignment{V: wireVersion, Generation: join.Generation, Leader: join.LeaderID}
	metas := make(map[string]joinMetadata, len(join.Members))
	var cands []Candidate
	claims := map[string][]string{} // item → present members holding it
	for _, jm := range join.Members {
		var md joinMetadata
		if err := decode(jm.ProtocolMetadata, &md); err != nil {
			// A member whose metadata is unreadable gets nothing, and
			// nothing it may hold is given away: its claims are unknown,
			// so it cannot take part.
			return ga, m.errorf("decoding the metadata of member %s (generation %d): %w", jm.MemberID, join.Generation, err)
		}
		metas[jm.MemberID] = md
		cands = append(cands, Candidate{ID: jm.MemberID, Items: md.Items, Owned: md.Owned, OwnedGeneration: md.OwnedGeneration})
		for _, it := range md.Owned {
			claims[it] = append(claims[it], jm.MemberID)
		}
	}
	slices.SortFunc(cands, func(a, b Candidate) int { return cmp.Compare(a.ID, b.ID) })
	target := Assign(cands, mergeWeights(cands, metas))
	moving := map[string]bool{}
	for _, c := range cands {
		md := metas[c.ID]
		mi := MemberInfo{MemberID: c.ID, DaemonID: md.DaemonID, Host: md.Host, AdminAddress: md.AdminAddress, Items: []string{}}
		for _, it := range target[c.ID] {
			holders := claims[it]
			if len(holders) == 0 || slices.Contains(holders, c.ID) {
				mi.Items = append(mi.Items, it)
			} else {
				moving[it] = true
			}
		}
		ga.Members = append(ga.Members, mi)
	}
	ga.Moving = sortedKeys(moving)
	return ga, nil
}

// mergeWeights gathers the members' weights: an item's owner knows it best,
// then the first member (by id) that reports one.
func mergeWeights(cands []Candidate, metas map[string]joinMetadata) map[string]float64 {
	w := map[string]float64{}
	for _, c := range cands {
		md := metas[c.ID]
		for _, it := range md.Owned {
			if v, ok := md.Weights[it]; ok {
				w[it] = v
			}
		}
	}
	for _, c := range cands {
		for it, v := range metas[c.ID].Weights {
			if _, ok := w[it]; !ok {
				w[it] = v
			}
		}
	}
	return w
}

// apply hands a generation's assignment to the handler, revocations first,
// and reports whether this member revoked an item the group is moving (so
// that it must rejoin for the item's new owner to get it).
func (m *Member) apply(ga groupAssignment) (mustRejoin bool) {
	var mine []string
	found := false
	for _, mi := range ga.Members {
		if mi.MemberID == m.memberID {
			mine, found = mi.Items, true
		}
	}
	if !found && m.cfg.static {
		// A static member that restarted within the session timeout
		// got its predecessor's assignment (KIP-345) under a new member
		// id: the entry of its daemon id (its instance id, unique in
		// the group) is its own.
		ga.Members = slices.Clone(ga.Members)
		for i, mi := range ga.Members {
			if mi.DaemonID == m.self.DaemonID {
				if ga.Leader == mi.MemberID {
					ga.Leader = m.memberID
				}
				ga.Members[i].MemberID = m.memberID
				mine = mi.Items
			}
		}
	}
	want := make(map[string]bool, len(mine))
	var added []string
	for _, it := range mine {
		want[it] = true
		if !m.owned[it] {
			added = append(added, it)
		}
	}
	var revoked []string
	for it := range m.owned {
		if !want[it] {
			revoked = append(revoked, it)
		}
	}
	slices.Sort(revoked)
	if len(revoked) > 0 {
		m.log.Info("revoking items", "member", m.memberID, "generation", ga.Generation, "items", len(revoked))
		m.h.OnRevoked(ga.Generation, revoked)
		for _, it := range revoked {
			delete(m.owned, it)
			if _, ok := slices.BinarySearch(ga.Moving, it); ok {
				mustRejoin = true
			}
		}
	}
	m.mu.Lock()
	m.view = View{Group: m.group, Generation: ga.Generation, Leader: ga.Leader, Self: m.memberID, Members: ga.Members, Moving: ga.Moving}
	m.mu.Unlock()
	if len(added) > 0 {
		m.log.Info("assigned items", "member", m.memberID, "generation", ga.Generation, "items", len(added))
		m.h.OnAssigned(ga.Generation, added)
		for _, it := range added {
			m.owned[it] = true
		}
	}
	m.ownedGen = ga.Generation
	return mustRejoin
}

// revokeAll revokes every item this member holds and forgets the view.
func (m *Member) revokeAll(why string) {
	m.mu.Lock()
	m.view = View{Group: m.group}
	m.mu.Unlock()
	if len(m.owned) == 0 {
		return
	}
	items := sortedKeys(m.owned)
	m.log.Info("revoking every item", "member", m.memberID, "generation", m.generation, "items", len(items), "reason", why)
	m.h.OnRevoked(m.generation, items)
	clear(m.owned)
}

// leave sends LeaveGroup, so that the group rebalances at once.
func (m *Member) leave() {
	if m.memberID == "" {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), m.cfg.session)
	defer cancel()
	req := kmsg.NewPtrLeaveGroupRequest()
	req.Group, req.MemberID = m.group, m.memberID
	req.Members = []kmsg.LeaveGroupRequestMember{{MemberID: m.memberID, InstanceID: m.instanceID(), Reason: kmsg.StringPtr("kmirror daemon " + m.self.DaemonID + " closing")}}
	resp, err := req.RequestWith(ctx, m.cl)
	if err == nil {
		err = kerr.ErrorForCode(resp.ErrorCode)
		if err == nil && len(resp.Members) > 0 {
			err = kerr.ErrorForCode(resp.Members[0].ErrorCode)
		}
	}
	if err != nil {
		m.log.Warn("leaving the group failed; the group notices after the session timeout", "member", m.memberID, "error", err)
		return
	}
	m.log.Info("left the group", "member", m.memberID)
	m.memberID = ""
}

func (m *Member) instanceID() *string {
	if m.cfg.static {
		return kmsg.StringPtr(m.self.DaemonID)
	}
	return nil
}

func (m *Member) ack(sent time.Time) {
	for {
		old := m.lastAck.Load()
		if sent.UnixNano() <= old || m.lastAck.CompareAndSwap(old, sent.UnixNano()) {
			return
		}
	}
}

// sessionExpired reports whether the coordinator may have dropped this
// member: no request sent within the last session timeout was answered as
// a member's.
func (m *Member) sessionExpired() bool {
	last := m.lastAck.Load()
	return last != 0 && time.Since(time.Unix(0, last)) >= m.cfg.session
}

func (m *Member) untilExpiry() time.Duration {
	d := time.Until(time.Unix(0, m.lastAck.Load()).Add(m.cfg.session))
	return max(d, time.Millisecond)
}

func (m *Member) errorf(format string, args ...any) error {
	return fmt.Errorf("membership: group %q, daemon %s, member %q: %w", m.group, m.self.DaemonID, m.memberID, fmt.Errorf(format, args...))
}

func sortedKeys(set map[string]bool) []string {
	out := make([]string, 0, len(set))
	for k := range set {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

func sortedSet(items []string) []string {
	out := slices.Clone(items)
	slices.Sort(out)
	return slices.Compact(out)
}
