package admin

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"path"
	"regexp"
	"strings"
	"time"

	"github.com/kmirror/kmirror/core/config"
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
	handle(RouteFailover, s.handleFailover)
	handle(RouteFailback, s.handleFailback)
	handle(RouteCreate, s.handleCreate)
	handle(RouteDelete, s.handleDelete)
	handle(RoutePlugins, s.handlePlugins)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		rec := &recorder{ResponseWriter: w}
		caller, auth, err := s.authenticate(r)
		_, route := api.Handler(r)
		switch {
		case err != nil:
			rec.Header().Set("WWW-Authenticate", `Bearer realm="kmirror"`)
			writeError(rec, http.StatusUnauthorized, err.Error())
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
		caller = "cn=" + r.TLS.VerifiedChains[0][0].Subject.CommonName
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
	writeError(w, http.StatusNotFound, fmt.Sprintf("no admin API route %s %s; the routes are listed in docs/operations.md", r.Method, r.URL.Path))
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
	writeError(w, http.StatusNotFound, fmt.Sprintf("%s: %q; `kmirror mirrors list` shows the mirrors this daemon runs", ErrNoMirror, name))
}

// handleTopicsOp serves pause, resume and stop.
func (s *Server) handleTopicsOp(op string, do func(context.Context, string, []string) (OpResult, error)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		var req TopicsRequest
		if !decodeBody(w, r, &req) {
			return
		}
		if op == "stop" && len(req.Topics) == 0 {
			writeError(w, http.StatusBadRequest, `topics is required for stop: give the regexes of the topics to stop (".*" for all)`)
			return
		}
		if !checkRegexes(w, "topics", req.Topics) {
			return
		}
		name := r.PathValue("mirror")
		ctx, cancel := context.WithTimeout(r.Context(), s.opTimeout)
		defer cancel()
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
	name := r.PathValue("mirror")
	ctx, cancel := context.WithTimeout(r.Context(), s.opTimeout)
	defer cancel()
	res, err := s.ctl.DeleteMirror(ctx, name)
	s.answer(w, ctx, name, res, err)
}

// maxWaitForCatchUp bounds a planned failover's wait for zero lag: longer
// is a mistake (and would overflow the operation's deadline).
const maxWaitForCatchUp = 24 * time.Hour

// validSuffix is what a side-topic suffix may hold: Kafka topic name
// characters.
var validSuffix = regexp.MustCompile(`^[A-Za-z0-9._-]{1,100}$`)

// answer writes an operation's result, or its error with the status that
// tells the caller what kind of failure it is.
func (s *Server) answer(w http.ResponseWriter, ctx context.Context, name string, res any, err error) {
	if err == nil {
		writeJSON(w, http.StatusOK, res)
		return
	}
	msg := err.Error()
	switch {
	case errors.Is(err, ErrNoMirror):
		writeError(w, http.StatusNotFound, msg+"; `kmirror mirrors list` shows the mirrors this daemon runs")
	case errors.Is(err, ErrInvalidRequest):
		writeError(w, http.StatusBadRequest, msg)
	case errors.Is(err, ErrConflict):
		writeError(w, http.StatusConflict, msg+"; `kmirror mirrors describe --mirror "+name+"` shows the partitions' states")
	case errors.Is(err, context.DeadlineExceeded) || errors.Is(ctx.Err(), context.DeadlineExceeded):
		writeError(w, http.StatusGatewayTimeout, msg+"; the operation did not finish in time and may have partly completed: check `kmirror mirrors describe --mirror "+name+"` and repeat the command (operations are idempotent)")
	default:
		writeError(w, http.StatusInternalServerError, msg+"; the daemon's log has details")
	}
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

func writeError(w http.ResponseWriter, status int, msg string) {
	if rec, ok := w.(*recorder); ok {
		rec.errMsg = msg
	}
	writeJSON(w, status, ErrorResponse{Error: msg})
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
	case status == http.StatusUnauthorized:
		s.log.Warn("admin call refused", append(args, "outcome", rec.errMsg)...)
	default:
		s.log.Warn("admin call failed", append(args, "outcome", rec.errMsg)...)
	}
}
