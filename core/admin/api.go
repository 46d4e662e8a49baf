package admin

import (
	"context"
	"time"
)

// Controller is what the admin API needs from the engine; *mirror.Engine
// implements it. Topic lists are regexes matched against whole topic names;
// an empty list means every topic of the mirror (Pause, Resume, Failover).
// Errors wrap ErrNoMirror, ErrInvalidRequest or ErrConflict where the
// caller can act on them.
type Controller interface {
	Status() Status
	Pause(ctx context.Context, mirrorName string, topics []string) (OpResult, error)
	Resume(ctx context.Context, mirrorName string, topics []string) (OpResult, error)
	StopTopics(ctx context.Context, mirrorName string, topics []string) (OpResult, error)
	StartTopics(ctx context.Context, mirrorName string, topics, exclude []string) (OpResult, error)
	// ResetTopics forgets the FAILED partitions of the matching topics
	// (their records and offset maps): the mirror starts them again from
	// the source's log start. Topics is required.
	ResetTopics(ctx context.Context, mirrorName string, topics []string) (OpResult, error)
	Failover(ctx context.Context, req FailoverOrder) (FailoverResult, error)
	Failback(ctx context.Context, req FailbackOrder) (FailbackResult, error)
	CreateMirror(ctx context.Context, mirrorName string, settings []byte) (OpResult, error)
	DeleteMirror(ctx context.Context, mirrorName string) (OpResult, error)
	// Plan answers a dry run of stop, delete, failover or failback: what
	// the operation would do, per topic and partition, changing nothing.
	// It refuses what the operation would refuse, with the same error.
	Plan(ctx context.Context, req PlanOrder) (Plan, error)
}

// Routes of the admin API, as ServeMux patterns.
const (
	RouteList     = "GET /v1/mirrors"
	RouteMirror   = "GET /v1/mirrors/{mirror}"
	RoutePause    = "POST /v1/mirrors/{mirror}/pause"
	RouteResume   = "POST /v1/mirrors/{mirror}/resume"
	RouteStop     = "POST /v1/mirrors/{mirror}/stop"
	RouteStart    = "POST /v1/mirrors/{mirror}/start"
	RouteReset    = "POST /v1/mirrors/{mirror}/reset"
	RouteFailover = "POST /v1/mirrors/{mirror}/failover"
	RouteFailback = "POST /v1/mirrors/{mirror}/failback"
	RouteCreate   = "POST /v1/mirrors"
	RouteDelete   = "DELETE /v1/mirrors/{mirror}"
	RouteLag      = "GET /v1/mirrors/{mirror}/lag"
)

// CreateRequest is the body of create: the new mirror's name and its
// settings, YAML holding the keys of one entry of the configuration's
// mirrors: list (source cluster keys and mirror.* keys). Secrets only as
// file references (sasl.password.file, ssl.keystore.location): the settings
// are kept in the state store.
type CreateRequest struct {
	Name   string `json:"name"`
	Config string `json:"config"`
}

// TopicsRequest is the body of pause, resume, stop and reset: regexes of
// the topics to act on. Empty means every topic of the mirror for pause and
// resume; stop and reset require at least one (".*" for all). Each given
// pattern must match a topic of the mirror. DryRun (stop and reset only)
// answers a Plan and changes nothing.
type TopicsRequest struct {
	Topics []string `json:"topics"`
	DryRun bool     `json:"dry_run,omitempty"`
}

// StartRequest is the body of start: the topics to (re)start, minus those
// matching Exclude. Topics is required.
type StartRequest struct {
	Topics  []string `json:"topics"`
	Exclude []string `json:"exclude"`
}

// FailoverRequest is the body of failover. Topics empty means every topic of
// the mirror. WaitForCatchUpMs > 0 first waits up to that long for every
// affected partition to have no lag (a planned failover).
type FailoverRequest struct {
	Topics           []string `json:"topics"`
	WaitForCatchUpMs int64    `json:"wait_for_catch_up_ms"`
	// DryRun answers a Plan and changes nothing.
	DryRun bool `json:"dry_run,omitempty"`
}

// FailbackRequest is the body of failback. AllowRecreate lets failback
// delete and recreate, on the old source, a topic whose partitions cannot
// continue offset for offset; SideTopicSuffix names the side topics that
// keep the old source's diverged records (default ".kmirror-diverged").
type FailbackRequest struct {
	AllowRecreate   bool   `json:"allow_recreate"`
	SideTopicSuffix string `json:"side_topic_suffix,omitempty"`
	// DryRun answers a Plan (what would be decided per partition, which
	// topics would be created or deleted on the old source) and changes
	// nothing.
	DryRun bool `json:"dry_run,omitempty"`
}

// MirrorSummary is one mirror in the answer of GET /v1/mirrors.
type MirrorSummary struct {
	Name string `json:"name"`
	// SourceBootstrap is the source cluster's bootstrap.servers from the
	// configuration in force (empty for a mirror the configuration does
	// not declare).
	SourceBootstrap []string `json:"source_bootstrap"`
	// Partitions counts the mirror's partitions per state (MIRRORING,
	// PAUSED, FAILED, ...); states with no partition are left out.
	Partitions map[string]int `json:"partitions"`
	// TotalPartitions is the sum of Partitions.
	TotalPartitions int `json:"total_partitions"`
	// Error is why the mirror as a whole cannot run, if it cannot.
	Error string `json:"error,omitempty"`
}

// MirrorList is the answer of GET /v1/mirrors.
type MirrorList struct {
	Mirrors []MirrorSummary `json:"mirrors"`
}

// ErrorResponse is the body of every answer that is not 2xx (and the
// only shape of one): what failed, a stable code to branch on, and, where
// there is one, what to do about it.
type ErrorResponse struct {
	// Error says what failed, naming the mirror, topic and partition
	// concerned.
	Error string `json:"error"`
	// Code is one of the Code* constants; stable.
	Code string `json:"code"`
	// Hint says what to do, when the message alone does not.
	Hint string `json:"hint,omitempty"`
}

// Codes of ErrorResponse, one per kind of failure; each goes with one
// HTTP status.
const (
	CodeInvalidRequest   = "invalid_request"    // 400: the request is wrong; fix it
	CodeUnauthorized     = "unauthorized"       // 401: token or client certificate
	CodeForbidden        = "forbidden"          // 403: a client certificate whose subject admin.tls.client.subjects does not allow
	CodeTooManyFailures  = "too_many_failures"  // 429: too many failed authentications from the caller's address; see Retry-After
	CodeNoSuchMirror     = "no_such_mirror"     // 404: the mirror does not exist in this daemon
	CodeNoSuchRoute      = "no_such_route"      // 404: no such admin API route
	CodeMethodNotAllowed = "method_not_allowed" // 405: see the Allow header
	CodeConflict         = "conflict"           // 409: the mirror's state does not allow it now
	CodeNoMatchingTopics = "no_matching_topics" // 422: a topic pattern matches no topic of the mirror
	CodeKafkaRefused     = "kafka_refused"      // 502: a Kafka cluster refused a request (not retriable: an authorization failure, ...)
	CodeUnavailable      = "unavailable"        // 503: a cluster or the state store cannot be reached now; retry
	CodeTimeout          = "timeout"            // 504: did not finish in time; may have partly completed
	CodeInternal         = "internal"           // 500: anything else; the daemon's log has details
)

// LagReport is the answer of GET /v1/mirrors/{mirror}/lag: how far the
// mirror's partitions are behind their source, per topic, as a client
// polls it to show a planned failover's catch-up (lag falling, an ETA)
// without holding a request open.
type LagReport struct {
	Mirror string    `json:"mirror"`
	At     time.Time `json:"at"`
	// CaughtUp holds when every selected partition is caught up: STOPPED
	// (failed over already) or MIRRORING with no lag, as a planned
	// failover's wait requires.
	CaughtUp bool `json:"caught_up"`
	// TotalLag sums the lag of every selected partition, in offsets.
	TotalLag int64      `json:"total_lag"`
	Topics   []TopicLag `json:"topics"`
}

// TopicLag is one topic of a LagReport.
type TopicLag struct {
	Topic      string `json:"topic"`
	Partitions int    `json:"partitions"`
	// Lag sums the partitions' lag; MaxLag is the largest.
	Lag    int64 `json:"lag"`
	MaxLag int64 `json:"max_lag"`
	// CaughtUp counts the partitions caught up (see LagReport.CaughtUp).
	CaughtUp int `json:"caught_up"`
	// States counts the partitions per state.
	States map[string]int `json:"states"`
}
