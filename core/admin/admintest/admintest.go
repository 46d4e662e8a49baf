// Package admintest holds test helpers for the admin API and its clients: a
// fake Controller that records calls and answers what the test sets. Their
// certificates come from internal/testpki.
package admintest

import (
	"context"
	"sync"
	"time"

	"github.com/kmirror/kmirror/core/admin"
)

// Call is one call the fake controller received.
type Call struct {
	Op      string // "pause", "resume", "stop", "start", "failover"
	Mirror  string
	Topics  []string
	Exclude []string      // start only
	Wait    time.Duration // failover only
	// Settings: create only.
	Settings string
	// AllowRecreate and SideTopicSuffix: failback only.
	AllowRecreate   bool
	SideTopicSuffix string
	// DryRun: the call was a Plan (Op names the operation planned).
	DryRun bool
}

// Controller is a fake admin.Controller. Set its fields before the server
// starts, or through Update afterwards; read Calls to see what was asked.
type Controller struct {
	mu sync.Mutex
	// StatusValue is what Status returns.
	StatusValue admin.Status
	// Err, when set, is returned by every operation.
	Err error
	// Block makes every operation wait for its context to end and return
	// the context's error.
	Block bool
	// Result and FailoverResult are returned by successful operations;
	// their Mirror field is set to the mirror asked for.
	Result         admin.OpResult
	FailoverResult admin.FailoverResult
	FailbackResult admin.FailbackResult
	// PlanResult is returned by Plan; its Mirror and Op are set to those
	// asked for.
	PlanResult admin.Plan
	calls      []Call
}

// Update changes the controller's fields under its lock; use it once the
// controller serves requests.
func (c *Controller) Update(f func(c *Controller)) {
	c.mu.Lock()
	defer c.mu.Unlock()
	f(c)
}

// Calls returns the operations received so far.
func (c *Controller) Calls() []Call {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]Call(nil), c.calls...)
}

// Status implements admin.Controller.
func (c *Controller) Status() admin.Status {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.StatusValue
}

func (c *Controller) op(ctx context.Context, call Call) (admin.OpResult, error) {
	c.mu.Lock()
	c.calls = append(c.calls, call)
	res, err, block := c.Result, c.Err, c.Block
	c.mu.Unlock()
	if block {
		<-ctx.Done()
		return admin.OpResult{}, ctx.Err()
	}
	if err != nil {
		return admin.OpResult{}, err
	}
	res.Mirror = call.Mirror
	return res, nil
}

// Pause implements admin.Controller.
func (c *Controller) Pause(ctx context.Context, m string, topics []string) (admin.OpResult, error) {
	return c.op(ctx, Call{Op: "pause", Mirror: m, Topics: topics})
}

// Resume implements admin.Controller.
func (c *Controller) Resume(ctx context.Context, m string, topics []string) (admin.OpResult, error) {
	return c.op(ctx, Call{Op: "resume", Mirror: m, Topics: topics})
}

// StopTopics implements admin.Controller.
func (c *Controller) StopTopics(ctx context.Context, m string, topics []string) (admin.OpResult, error) {
	return c.op(ctx, Call{Op: "stop", Mirror: m, Topics: topics})
}

// StartTopics implements admin.Controller.
func (c *Controller) StartTopics(ctx context.Context, m string, topics, exclude []string) (admin.OpResult, error) {
	return c.op(ctx, Call{Op: "start", Mirror: m, Topics: topics, Exclude: exclude})
}

// ResetTopics implements admin.Controller.
func (c *Controller) ResetTopics(ctx context.Context, m string, topics []string) (admin.OpResult, error) {
	return c.op(ctx, Call{Op: "reset", Mirror: m, Topics: topics})
}

// Failover implements admin.Controller.
func (c *Controller) Failover(ctx context.Context, req admin.FailoverOrder) (admin.FailoverResult, error) {
	if _, err := c.op(ctx, Call{Op: "failover", Mirror: req.Mirror, Topics: req.Topics, Wait: req.WaitForCatchUp}); err != nil {
		return admin.FailoverResult{}, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	res := c.FailoverResult
	res.Mirror = req.Mirror
	return res, nil
}

// CreateMirror implements admin.Controller.
func (c *Controller) CreateMirror(ctx context.Context, m string, settings []byte) (admin.OpResult, error) {
	return c.op(ctx, Call{Op: "create", Mirror: m, Settings: string(settings)})
}

// DeleteMirror implements admin.Controller.
func (c *Controller) DeleteMirror(ctx context.Context, m string) (admin.OpResult, error) {
	return c.op(ctx, Call{Op: "delete", Mirror: m})
}

// Failback implements admin.Controller.
func (c *Controller) Failback(ctx context.Context, req admin.FailbackOrder) (admin.FailbackResult, error) {
	if _, err := c.op(ctx, Call{Op: "failback", Mirror: req.Mirror, AllowRecreate: req.AllowRecreate, SideTopicSuffix: req.SideTopicSuffix}); err != nil {
		return admin.FailbackResult{}, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	res := c.FailbackResult
	res.Of = req.Mirror
	return res, nil
}

// Plan implements admin.Controller.
func (c *Controller) Plan(ctx context.Context, req admin.PlanOrder) (admin.Plan, error) {
	if _, err := c.op(ctx, Call{Op: req.Op, Mirror: req.Mirror, Topics: req.Topics, Wait: req.WaitForCatchUp,
		AllowRecreate: req.AllowRecreate, SideTopicSuffix: req.SideTopicSuffix, DryRun: true}); err != nil {
		return admin.Plan{}, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	res := c.PlanResult
	res.Mirror, res.Op = req.Mirror, req.Op
	return res, nil
}
