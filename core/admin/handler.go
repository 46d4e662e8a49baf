package admin

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"path"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/kmirror/kmirror/core/config"
	"github.com/kmirror/kmirror/core/control"
	"github.com/kmirror/kmirror/core/failover"
	"github.com/kmirror/kmirror/sdk/statestore"
)

// maxBody bounds request bodies; a topic list never comes near it.
const maxBody = 1 << 20

// Handler returns the admin API: authentication, then the routes. Every
// request is logged once, with its caller and outcome.
func (s *Server) Handler() http.Handler {
	api := http.NewServeMux()
	handle := func(pattern string, h http.HandlerFunc) { api.HandleFunc(pattern, checkPathParams(pattern, h)) }
	handle(RouteList, s.handleList)
	handle(RouteMirror, s.handleMirror)
	handle(RoutePause, s.handleTopicsOp("pause", s.ctl.Pause))
	handle(RouteResume, s.handleTopicsOp("resume", s.ctl.Resume))
	handle(RouteStop, s.handleTopicsOp("stop", s.ctl.StopTopics))
	handle(RouteStart, s.handleStart)
	handle(RouteReset, s.handleTopicsOp(OpReset, s.ctl.ResetTopics))
	handle(RouteFailover, s.handleFailover)
	handle(RouteFailback, s.handleFailback)
	handle(RouteCreate, s.handleCreate)
	handle(RouteDelete, s.handleDelete)
	handle(RouteLag, s.handleLag)
	handle(RoutePlugins, s.handlePlugins)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		rec := &recorder{ResponseWriter: w}
		var caller, auth string
		var err error
		limited, retry := s.limit.blocked(r.RemoteAddr)
		if !limited {
			caller, auth, err = s.authenticate(r)
		}
		_, route := api.Handler(r)
		var forbidden *forbiddenError
		switch {
		case limited:
			caller = "anonymous"
			rec.Header().Set("Retry-After", strconv.Itoa(int(retry.Seconds())+1))
			writeProblem(rec, http.StatusTooManyRequests, CodeTooManyFailures,
				fmt.Sprintf("too many failed authentications from %s (%d within %s); nothing was checked", host(r.RemoteAddr), s.limit.max, AuthFailureWindow),
				fmt.Sprintf("wait %s, then call again with the right credentials", retry.Round(time.Second)))
		case errors.As(err, &forbidden):
			s.limit.failed(r.RemoteAddr)
			writeProblem(rec, http.StatusForbidden, CodeForbidden, err.Error(), "add a pattern matching the certificate's subject to admin.tls.client.subjects, or use a certificate whose subject it allows")
		case err != nil:
			s.limit.failed(r.RemoteAddr)
			rec.Header().Set("WWW-Authenticate", `Bearer realm="kmirror"`)
			writeProblem(rec, http.StatusUnauthorized, CodeUnauthorized, err.Error(), "")
		case !canonicalPath(r.URL.Path):
			// ServeMux would redirect to the cleaned path: an API call
			// with '.', '..' or empty segments (escaped or not) is a
			// mistake, not something to guess at.
			writeError(rec, http.StatusBadRequest, fmt.Sprintf("path %q is not canonical: no empty, '.' or '..' segments (escaped or not) and no trailing '/'; nothing was changed", r.URL.EscapedPath()))
		default:
			if route != "" {
				api.ServeHTTP(rec, r)
			} else {
				notRouted(api, rec, r)
			}
		}
		took := time.Since(start)
		s.logRequest(r, rec, caller, auth, took)
		if s.observe != nil {
			status := rec.status
			if status == 0 {
				status = http.StatusOK
			}
			s.observe(route, status, took)
		}
	})
}

// authenticate checks the client certificate and the bearer token, as
// configured. caller names who called ("token", "cn=<CN>", or "anonymous"
// when authentication failed before identifying anyone); auth says how.
func (s *Server) authenticate(r *http.Request) (caller, auth string, err error) {
	c := s.creds.Load()
	if c == nil {
		return "anonymous", "", errors.New("the admin API is not started")
	}
	caller = "anonymous"
	var how []string
	if c.clientCerts {
		if r.TLS == nil || len(r.TLS.VerifiedChains) == 0 || len(r.TLS.VerifiedChains[0]) == 0 {
			return caller, "", errors.New("a client certificate is required: pass --tls-cert and --tls-key with a certificate signed by a CA in the daemon's admin.tls.client.ca.file")
		}
		subject := r.TLS.VerifiedChains[0][0].Subject
		caller = "cn=" + subject.CommonName
		if c.subjects.Len() > 0 && !c.subjects.Match(subject.String()) && !c.subjects.Match(subject.CommonName) {
			return caller, "", &forbiddenError{subject: subject.String()}
		}
		how = append(how, "mtls")
	}
	if c.token {
		given, ok := bearerToken(r)
		if !ok {
			return caller, "", errors.New("missing bearer token: send `Authorization: Bearer <token>`; the kmirror CLI reads it from the configuration's admin.token.file (or <state.dir>/admin.token), or pass --token-file")
		}
		// Comparing digests keeps the comparison constant-time in the
		// token's length too.
		h := sha256.Sum256([]byte(given))
		if subtle.ConstantTimeCompare(h[:], c.tokenHash[:]) != 1 {
			return caller, "", errors.New("wrong bearer token: use the token in the daemon's admin.token.file (or <state.dir>/admin.token); a rotated token takes effect on reload (SIGHUP)")
		}
		if caller == "anonymous" {
			caller = "token"
		}
		how = append(how, "token")
	}
	return caller, strings.Join(how, "+"), nil
}

// pathParams holds the check of every path parameter the routes name;
// checkPathParams refuses to register a route with a parameter missing
// here, so none reaches a handler unchecked.
var pathParams = map[string]func(string) error{
	"mirror": config.CheckMirrorName,
}

// checkPathParams wraps the handler of route pattern so that a request
// whose path parameters fail their check gets 400 before h runs. A
// parameter is checked after unescaping: dc1%2Fpartitions is the name
// "dc1/partitions", which is not a mirror name (and would otherwise name
// part of mirror dc1's state).
func checkPathParams(pattern string, h http.HandlerFunc) http.HandlerFunc {
	var names []string
	for _, seg := range strings.Split(pattern, "/") {
		if n, ok := strings.CutPrefix(seg, "{"); ok {
			n = strings.TrimSuffix(strings.TrimSuffix(n, "}"), "...")
			if pathParams[n] == nil {
				panic(fmt.Sprintf("admin: route %q: path parameter {%s} has no check in pathParams", pattern, n))
			}
			names = append(names, n)
		}
	}
	if len(names) == 0 {
		return h
	}
	return func(w http.ResponseWriter, r *http.Request) {
		for _, n := range names {
			if err := pathParams[n](r.PathValue(n)); err != nil {
				writeError(w, http.StatusBadRequest, fmt.Sprintf("path parameter {%s} in %q: %v (an escaped '/' (%%2F) or any other character outside the grammar is refused); nothing was changed", n, r.URL.EscapedPath(), err))
				return
			}
		}
		h(w, r)
	}
}

// canonicalPath says whether p is its own path.Clean form (which ServeMux
// would otherwise redirect to).
func canonicalPath(p string) bool {
	return p != "" && p[0] == '/' && path.Clean(p) == p
}

func bearerToken(r *http.Request) (string, bool) {
	h := r.Header.Get("Authorization")
	const prefix = "bearer "
	if len(h) <= len(prefix) || !strings.EqualFold(h[:len(prefix)], prefix) {
		return "", false
	}
	tok := strings.TrimSpace(h[len(prefix):])
	return tok, tok != ""
}

// notRouted answers a request no route matches: 405 with Allow when the
// path exists for another method, 404 otherwise.
func notRouted(api *http.ServeMux, w http.ResponseWriter, r *http.Request) {
	var allow []string
	for _, m := range []string{http.MethodGet, http.MethodPost} {
		r2 := r.Clone(r.Context())
		r2.Method = m
		if _, p := api.Handler(r2); p != "" {
			allow = append(allow, m)
		}
	}
	if len(allow) > 0 {
		w.Header().Set("Allow", strings.Join(allow, ", "))
		writeError(w, http.StatusMethodNotAllowed, fmt.Sprintf("%s %s is not supported; use %s", r.Method, r.URL.Path, strings.Join(allow, " or ")))
		return
	}
	writeProblem(w, http.StatusNotFound, CodeNoSuchRoute, fmt.Sprintf("no admin API route %s %s", r.Method, r.URL.Path), "the routes are listed in docs/operations.md")
}

func (s *Server) handleList(w http.ResponseWriter, _ *http.Request) {
	st := s.ctl.Status()
	cfg := s.cfg.Load()
	out := MirrorList{Mirrors: []MirrorSummary{}}
	seen := map[string]bool{}
	bootstrap := func(name string) []string {
		if cfg != nil {
			if m, ok := cfg.Mirror(name); ok {
				return append([]string{}, m.Source.BootstrapServers...)
			}
		}
		return []string{}
	}
	for _, m := range st.Mirrors {
		seen[m.Name] = true
		sum := MirrorSummary{Name: m.Name, SourceBootstrap: bootstrap(m.Name), Partitions: map[string]int{}, Error: m.Error}
		for _, p := range m.Partitions {
			sum.Partitions[p.State]++
			sum.TotalPartitions++
		}
		out.Mirrors = append(out.Mirrors, sum)
	}
	if cfg != nil {
		// A configured mirror the engine does not report yet (still
		// connecting) is listed with no partitions.
		for _, m := range cfg.Mirrors {
			if !seen[m.Name] {
				out.Mirrors = append(out.Mirrors, MirrorSummary{Name: m.Name, SourceBootstrap: bootstrap(m.Name), Partitions: map[string]int{}})
			}
		}
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) handleMirror(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("mirror")
	for _, m := range s.ctl.Status().Mirrors {
		if m.Name == name {
			if m.Partitions == nil {
				m.Partitions = []PartitionStatus{}
			}
			writeJSON(w, http.StatusOK, m)
			return
		}
	}
	writeNoMirror(w, fmt.Sprintf("%s: %q in this daemon", ErrNoMirror, name))
}

// writeNoMirror answers 404 for a mirror that does not exist.
func writeNoMirror(w http.ResponseWriter, msg string) {
	writeProblem(w, http.StatusNotFound, CodeNoSuchMirror, msg, "`kmirror mirrors list` shows the mirrors this daemon runs")
}

// handleTopicsOp serves pause, resume, stop and reset.
func (s *Server) handleTopicsOp(op string, do func(context.Context, string, []string) (OpResult, error)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		var req TopicsRequest
		if !decodeBody(w, r, &req) {
			return
		}
		if (op == OpStop || op == OpReset) && len(req.Topics) == 0 {
			writeError(w, http.StatusBadRequest, fmt.Sprintf(`topics is required for %s: give the regexes of the topics to %s (".*" for all)`, op, op))
			return
		}
		if req.DryRun && op != OpStop && op != OpReset {
			writeError(w, http.StatusBadRequest, fmt.Sprintf("dry_run is not supported by %s (only by stop, reset, delete, failover and failback); %s changes nothing that resume or pause cannot undo", op, op))
			return
		}
		if !checkRegexes(w, "topics", req.Topics) {
			return
		}
		name := r.PathValue("mirror")
		ctx, cancel := context.WithTimeout(r.Context(), s.opTimeout)
		defer cancel()
		if req.DryRun {
			s.plan(w, ctx, PlanOrder{Op: op, Mirror: name, Topics: req.Topics})
			return
		}
		res, err := do(ctx, name, req.Topics)
		s.answer(w, ctx, name, res, err)
	}
}

func (s *Server) handleStart(w http.ResponseWriter, r *http.Request) {
	var req StartRequest
	if !decodeBody(w, r, &req) {
		return
	}
	if len(req.Topics) == 0 {
		writeError(w, http.StatusBadRequest, `topics is required for start: give the regexes of the topics to start (".*" for all)`)
		return
	}
	if !checkRegexes(w, "topics", req.Topics) || !checkRegexes(w, "exclude", req.Exclude) {
		return
	}
	name := r.PathValue("mirror")
	ctx, cancel := context.WithTimeout(r.Context(), s.opTimeout)
	defer cancel()
	res, err := s.ctl.StartTopics(ctx, name, req.Topics, req.Exclude)
	s.answer(w, ctx, name, res, err)
}

func (s *Server) handleFailover(w http.ResponseWriter, r *http.Request) {
	var req FailoverRequest
	if !decodeBody(w, r, &req) {
		return
	}
	if req.WaitForCatchUpMs < 0 {
		writeError(w, http.StatusBadRequest, fmt.Sprintf("wait_for_catch_up_ms is %d: give 0 (no wait) or a positive number of milliseconds", req.WaitForCatchUpMs))
		return
	}
	if req.WaitForCatchUpMs > maxWaitForCatchUp.Milliseconds() {
		writeError(w, http.StatusBadRequest, fmt.Sprintf("wait_for_catch_up_ms is %d: at most %d (%v)", req.WaitForCatchUpMs, maxWaitForCatchUp.Milliseconds(), maxWaitForCatchUp))
		return
	}
	if !checkRegexes(w, "topics", req.Topics) {
		return
	}
	name := r.PathValue("mirror")
	wait := time.Duration(req.WaitForCatchUpMs) * time.Millisecond
	if req.DryRun {
		ctx, cancel := context.WithTimeout(r.Context(), s.opTimeout)
		defer cancel()
		s.plan(w, ctx, PlanOrder{Op: OpFailover, Mirror: name, Topics: req.Topics, WaitForCatchUp: wait})
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), s.opTimeout+wait)
	defer cancel()
	res, err := s.ctl.Failover(ctx, FailoverOrder{Mirror: name, Topics: req.Topics, WaitForCatchUp: wait})
	s.answer(w, ctx, name, res, err)
}

func (s *Server) handleFailback(w http.ResponseWriter, r *http.Request) {
	var req FailbackRequest
	if !decodeBody(w, r, &req) {
		return
	}
	if req.SideTopicSuffix != "" && !validSuffix.MatchString(req.SideTopicSuffix) {
		writeError(w, http.StatusBadRequest, fmt.Sprintf("side_topic_suffix %q: use letters, digits, '.', '_' and '-' only (topic name characters)", req.SideTopicSuffix))
		return
	}
	name := r.PathValue("mirror")
	ctx, cancel := context.WithTimeout(r.Context(), s.opTimeout)
	defer cancel()
	if req.DryRun {
		s.plan(w, ctx, PlanOrder{Op: OpFailback, Mirror: name, AllowRecreate: req.AllowRecreate, SideTopicSuffix: req.SideTopicSuffix})
		return
	}
	res, err := s.ctl.Failback(ctx, FailbackOrder{Mirror: name, AllowRecreate: req.AllowRecreate, SideTopicSuffix: req.SideTopicSuffix})
	s.answer(w, ctx, name, res, err)
}

func (s *Server) handleCreate(w http.ResponseWriter, r *http.Request) {
	var req CreateRequest
	if !decodeBody(w, r, &req) {
		return
	}
	if req.Name == "" || strings.TrimSpace(req.Config) == "" {
		writeError(w, http.StatusBadRequest, "name and config are required: the mirror's name and its settings (YAML, the keys of one entry of mirrors:)")
		return
	}
	if err := config.CheckMirrorName(req.Name); err != nil {
		writeError(w, http.StatusBadRequest, fmt.Sprintf("name: %v", err))
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), s.opTimeout)
	defer cancel()
	res, err := s.ctl.CreateMirror(ctx, req.Name, []byte(req.Config))
	s.answer(w, ctx, req.Name, res, err)
}

func (s *Server) handleDelete(w http.ResponseWriter, r *http.Request) {
	q, ok := query(w, r, "dry_run")
	if !ok {
		return
	}
	dryRun, ok := boolParam(w, q, "dry_run")
	if !ok {
		return
	}
	name := r.PathValue("mirror")
	ctx, cancel := context.WithTimeout(r.Context(), s.opTimeout)
	defer cancel()
	if dryRun {
		s.plan(w, ctx, PlanOrder{Op: OpDelete, Mirror: name})
		return
	}
	res, err := s.ctl.DeleteMirror(ctx, name)
	s.answer(w, ctx, name, res, err)
}

// plan answers a dry run.
func (s *Server) plan(w http.ResponseWriter, ctx context.Context, order PlanOrder) {
	p, err := s.ctl.Plan(ctx, order)
	if err == nil {
		p.DryRun, p.Op, p.Mirror = true, order.Op, order.Mirror
		if p.Steps == nil {
			p.Steps = []string{}
		}
		if p.Topics == nil {
			p.Topics = []TopicPlan{}
		}
	}
	s.answer(w, ctx, order.Mirror, p, err)
}

// handleLag answers the lag of a mirror's partitions per topic, from its
// status: GET /v1/mirrors/{mirror}/lag[?topic=REGEX...]. It only reads,
// so a client may poll it as often as it likes (the CLI's catch-up
// progress).
func (s *Server) handleLag(w http.ResponseWriter, r *http.Request) {
	q, ok := query(w, r, "topic")
	if !ok {
		return
	}
	pats := q["topic"]
	if !checkRegexes(w, "topic", pats) {
		return
	}
	_, res, err := control.Patterns(pats)
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	name := r.PathValue("mirror")
	for _, m := range s.ctl.Status().Mirrors {
		if m.Name != name {
			continue
		}
		out := LagReport{Mirror: name, At: time.Now().UTC(), CaughtUp: true, Topics: []TopicLag{}}
		index := map[string]int{}
		matched := make([]bool, len(res))
		for _, p := range m.Partitions {
			hit := false
			for i, re := range res {
				if re.MatchString(p.Topic) {
					hit, matched[i] = true, true
				}
			}
			if !hit {
				continue
			}
			i, ok := index[p.Topic]
			if !ok {
				i = len(out.Topics)
				index[p.Topic] = i
				out.Topics = append(out.Topics, TopicLag{Topic: p.Topic, States: map[string]int{}})
			}
			t := &out.Topics[i]
			t.Partitions++
			t.States[p.State]++
			if p.Lag > 0 {
				t.Lag += p.Lag
				t.MaxLag = max(t.MaxLag, p.Lag)
				out.TotalLag += p.Lag
			}
			if failover.CaughtUp(p) {
				t.CaughtUp++
			} else {
				out.CaughtUp = false
			}
		}
		if len(pats) > 0 {
			var none []string
			for i, ok := range matched {
				if !ok {
					none = append(none, fmt.Sprintf("%q", pats[i]))
				}
			}
			if len(none) > 0 {
				writeProblem(w, http.StatusUnprocessableEntity, CodeNoMatchingTopics,
					fmt.Sprintf("mirror %s: topic pattern %s matches no partition of the mirror", name, strings.Join(none, ", ")),
					"patterns are regexes matched against whole topic names; `kmirror mirrors describe --mirror "+name+"` lists the mirror's partitions")
				return
			}
		}
		writeJSON(w, http.StatusOK, out)
		return
	}
	writeNoMirror(w, fmt.Sprintf("%s: %q in this daemon", ErrNoMirror, name))
}

// query returns the request's query parameters, refusing (400) any not in
// allowed: a misspelt parameter is not silently ignored.
func query(w http.ResponseWriter, r *http.Request, allowed ...string) (url.Values, bool) {
	q, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil {
		writeError(w, http.StatusBadRequest, fmt.Sprintf("query %q is not valid: %v", r.URL.RawQuery, err))
		return nil, false
	}
	for k := range q {
		if !slices.Contains(allowed, k) {
			writeError(w, http.StatusBadRequest, fmt.Sprintf("unknown query parameter %q (this route takes: %s)", k, strings.Join(allowed, ", ")))
			return nil, false
		}
	}
	return q, true
}

// boolParam reads an optional boolean query parameter.
func boolParam(w http.ResponseWriter, q url.Values, name string) (bool, bool) {
	vs := q[name]
	if len(vs) == 0 {
		return false, true
	}
	if len(vs) > 1 {
		writeError(w, http.StatusBadRequest, fmt.Sprintf("query parameter %s is given %d times; give it once", name, len(vs)))
		return false, false
	}
	switch vs[0] {
	case "true", "1", "":
		return true, true
	case "false", "0":
		return false, true
	}
	writeError(w, http.StatusBadRequest, fmt.Sprintf("query parameter %s=%q: use true or false", name, vs[0]))
	return false, false
}

// maxWaitForCatchUp bounds a planned failover's wait for zero lag: longer
// is a mistake (and would overflow the operation's deadline).
const maxWaitForCatchUp = 24 * time.Hour

// validSuffix is what a side-topic suffix may hold: Kafka topic name
// characters.
var validSuffix = regexp.MustCompile(`^[A-Za-z0-9._-]{1,100}$`)

// answer writes an operation's result, or its error with the status and
// code that tell the caller what kind of failure it is, and a hint saying
// what to do.
func (s *Server) answer(w http.ResponseWriter, ctx context.Context, name string, res any, err error) {
	if err == nil {
		writeJSON(w, http.StatusOK, res)
		return
	}
	status, code, hint := classify(ctx, name, err)
	msg := err.Error()
	switch {
	case status == http.StatusServiceUnavailable:
		w.Header().Set("Retry-After", "5")
	case code == CodeTimeout && !errors.Is(err, ErrNotCaughtUp):
		msg = "mirror " + name + ": the operation did not finish in time: " + msg
	}
	writeProblem(w, status, code, msg, hint)
}

// classify maps an operation's error to its HTTP status, code and hint.
func classify(ctx context.Context, name string, err error) (status int, code, hint string) {
	describe := "`kmirror mirrors describe --mirror " + name + "`"
	switch {
	case errors.Is(err, ErrNoMirror):
		return http.StatusNotFound, CodeNoSuchMirror, "`kmirror mirrors list` shows the mirrors this daemon runs"
	case errors.Is(err, ErrNoMatch):
		return http.StatusUnprocessableEntity, CodeNoMatchingTopics, describe + " lists the mirror's topics; fix the pattern and repeat the command"
	case errors.Is(err, ErrInvalidRequest):
		return http.StatusBadRequest, CodeInvalidRequest, ""
	case errors.Is(err, ErrConflict):
		return http.StatusConflict, CodeConflict, describe + " shows the partitions' states"
	case errors.Is(err, statestore.ErrVersionMismatch):
		return http.StatusConflict, CodeConflict, "another request changed the same record at the same time; repeat the command (operations are idempotent)"
	case errors.Is(err, ErrNotCaughtUp):
		return http.StatusGatewayTimeout, CodeTimeout, "nothing was changed and the topics keep mirroring; watch the lag (GET /v1/mirrors/" + name + "/lag, or " + describe + ") and repeat the failover with a longer wait, or without a wait for an unplanned failover"
	case errors.Is(err, ErrLastSyncFailed):
		return http.StatusServiceUnavailable, CodeUnavailable, "nothing was changed and the topics keep mirroring; repeat the failover once the clusters are reachable (" + describe + " shows them), or fail over without a wait (an unplanned failover goes on without the last sync and reports it in warnings)"
	case errors.Is(err, ErrUnavailable), errors.Is(err, statestore.ErrClosed):
		return http.StatusServiceUnavailable, CodeUnavailable, "repeat the command once the cause is fixed (operations are idempotent); " + describe + " shows whether the clusters are reachable"
	case errors.Is(err, context.DeadlineExceeded) || errors.Is(ctx.Err(), context.DeadlineExceeded):
		return http.StatusGatewayTimeout, CodeTimeout, "the operation did not finish in time and may have partly completed: check " + describe + " and repeat the command (operations are idempotent)"
	case isUnreachable(err):
		return http.StatusServiceUnavailable, CodeUnavailable, "a cluster could not be reached or answered that it is busy; repeat the command once it is reachable (operations are idempotent); " + describe + " shows the clusters' reachability"
	case isKafkaRefusal(err):
		return http.StatusBadGateway, CodeKafkaRefused, "a Kafka cluster refused a request the operation needs: the message names the error (an authorization error names the permission to grant); repeat the command once it is fixed (operations are idempotent)"
	case errors.Is(err, context.Canceled):
		return http.StatusServiceUnavailable, CodeUnavailable, "the daemon is shutting down or the call was cancelled; the operation may have partly completed: check " + describe + " once the daemon runs, and repeat the command (operations are idempotent)"
	}
	return http.StatusInternalServerError, CodeInternal, "the daemon's log (kmirror.admin and the mirror's lines) has details; operations are idempotent: repeat the command once the cause is fixed"
}

// isUnreachable reports whether err is a network failure or a retriable
// Kafka error (a leader moving, a coordinator loading): worth repeating.
func isUnreachable(err error) bool {
	var ne net.Error
	var ke *kerr.Error
	return errors.As(err, &ne) || errors.Is(err, syscall.ECONNREFUSED) || (errors.As(err, &ke) && ke.Retriable)
}

// isKafkaRefusal reports whether err is an error a Kafka cluster answered
// (not retriable: an authorization failure, an invalid request).
func isKafkaRefusal(err error) bool {
	var ke *kerr.Error
	return errors.As(err, &ke) && !ke.Retriable
}

// decodeBody decodes a JSON body into v; an empty body leaves v zero.
// Unknown fields are refused, so a misspelt field is not silently ignored.
func decodeBody(w http.ResponseWriter, r *http.Request, v any) bool {
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxBody))
	dec.DisallowUnknownFields()
	err := dec.Decode(v)
	if err == nil {
		// dec.More would miss a stray '}' or ']' after the value.
		if _, tokErr := dec.Token(); !errors.Is(tokErr, io.EOF) {
			err = errors.New("more than one JSON value")
		}
	}
	if err != nil && !errors.Is(err, io.EOF) {
		writeError(w, http.StatusBadRequest, fmt.Sprintf("request body is not valid: %v (see docs/operations.md for the fields)", err))
		return false
	}
	return true
}

// checkRegexes refuses an empty or invalid regex, naming it.
func checkRegexes(w http.ResponseWriter, field string, list []string) bool {
	for i, p := range list {
		if strings.TrimSpace(p) == "" {
			writeError(w, http.StatusBadRequest, fmt.Sprintf("%s[%d] is empty: give a regex, or leave the entry out", field, i))
			return false
		}
		if _, err := regexp.Compile(p); err != nil {
			writeError(w, http.StatusBadRequest, fmt.Sprintf("%s[%d] %q is not a valid regex: %v", field, i, p, err))
			return false
		}
	}
	return true
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}

// writeError answers an error whose message says what to do, with the
// code of its status.
func writeError(w http.ResponseWriter, status int, msg string) {
	writeProblem(w, status, codeOf(status), msg, "")
}

// writeProblem answers an error: ErrorResponse, the one shape of every
// answer that is not 2xx.
func writeProblem(w http.ResponseWriter, status int, code, msg, hint string) {
	if rec, ok := w.(*recorder); ok {
		rec.errMsg = msg
	}
	writeJSON(w, status, ErrorResponse{Error: msg, Code: code, Hint: hint})
}

// codeOf is the code of an error status.
func codeOf(status int) string {
	switch status {
	case http.StatusBadRequest:
		return CodeInvalidRequest
	case http.StatusUnauthorized:
		return CodeUnauthorized
	case http.StatusForbidden:
		return CodeForbidden
	case http.StatusTooManyRequests:
		return CodeTooManyFailures
	case http.StatusNotFound:
		return CodeNoSuchRoute
	case http.StatusMethodNotAllowed:
		return CodeMethodNotAllowed
	case http.StatusConflict:
		return CodeConflict
	case http.StatusUnprocessableEntity:
		return CodeNoMatchingTopics
	case http.StatusServiceUnavailable:
		return CodeUnavailable
	case http.StatusBadGateway:
		return CodeKafkaRefused
	case http.StatusGatewayTimeout:
		return CodeTimeout
	}
	return CodeInternal
}

// recorder remembers the status and error of a response for the log line.
type recorder struct {
	http.ResponseWriter
	status int
	errMsg string
}

func (r *recorder) WriteHeader(status int) {
	if r.status == 0 {
		r.status = status
	}
	r.ResponseWriter.WriteHeader(status)
}

func (r *recorder) Write(b []byte) (int, error) {
	if r.status == 0 {
		r.status = http.StatusOK
	}
	return r.ResponseWriter.Write(b)
}

func (r *recorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }

// logRequest logs one request. Headers are never logged, so neither is the
// token.
func (s *Server) logRequest(r *http.Request, rec *recorder, caller, auth string, took time.Duration) {
	status := rec.status
	if status == 0 {
		status = http.StatusOK
	}
	args := []any{"caller", caller, "remote", r.RemoteAddr, "method", r.Method, "path", r.URL.Path, "status", status}
	if auth != "" {
		args = append(args, "auth", auth)
	}
	args = append(args, "took", took.Round(time.Millisecond))
	switch {
	case status < 300:
		s.log.Info("admin call", append(args, "outcome", "ok")...)
	case status == http.StatusUnauthorized || status == http.StatusForbidden:
		s.log.Warn("admin call refused", append(args, "outcome", rec.errMsg)...)
	case status == http.StatusTooManyRequests:
		s.limitedLog(args, rec.errMsg)
	default:
		s.log.Warn("admin call failed", append(args, "outcome", rec.errMsg)...)
	}
}
