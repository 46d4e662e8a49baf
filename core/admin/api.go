package admin

import "context"

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
	Failover(ctx context.Context, req FailoverOrder) (FailoverResult, error)
	Failback(ctx context.Context, req FailbackOrder) (FailbackResult, error)
	CreateMirror(ctx context.Context, mirrorName string, settings []byte) (OpResult, error)
	DeleteMirror(ctx context.Context, mirrorName string) (OpResult, error)
}

// Routes of the admin API, as ServeMux patterns.
const (
	RouteList     = "GET /v1/mirrors"
	RouteMirror   = "GET /v1/mirrors/{mirror}"
	RoutePause    = "POST /v1/mirrors/{mirror}/pause"
	RouteResume   = "POST /v1/mirrors/{mirror}/resume"
	RouteStop     = "POST /v1/mirrors/{mirror}/stop"
	RouteStart    = "POST /v1/mirrors/{mirror}/start"
	RouteFailover = "POST /v1/mirrors/{mirror}/failover"
	RouteFailback = "POST /v1/mirrors/{mirror}/failback"
	RouteCreate   = "POST /v1/mirrors"
	RouteDelete   = "DELETE /v1/mirrors/{mirror}"
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

// TopicsRequest is the body of pause, resume and stop: regexes of the topics
// to act on. Empty means every topic of the mirror for pause and resume; stop
// requires at least one (".*" for all).
type TopicsRequest struct {
	Topics []string `json:"topics"`
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
}

// FailbackRequest is the body of failback. AllowRecreate lets failback
// delete and recreate, on the old source, a topic whose partitions cannot
// continue offset for offset; SideTopicSuffix names the side topics that
// keep the old source's diverged records (default ".kmirror-diverged").
type FailbackRequest struct {
	AllowRecreate   bool   `json:"allow_recreate"`
	SideTopicSuffix string `json:"side_topic_suffix,omitempty"`
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

// ErrorResponse is the body of every answer that is not 2xx.
type ErrorResponse struct {
	Error string `json:"error"`
}
