package pluginhost

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"reflect"
	"regexp"
	"sort"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/kmirror/kmirror/core/backoff"
	"github.com/kmirror/kmirror/sdk/auth"
	"github.com/kmirror/kmirror/sdk/filter"
	"github.com/kmirror/kmirror/sdk/plugin"
)

// Spec is one plugin to run: an entry of the configuration's plugins map
// (cmd builds it from config.Plugin).
type Spec struct {
	// Name is the plugin's name ([a-z0-9][a-z0-9_-]*).
	Name string
	// Kind is what it serves.
	Kind plugin.Kind
	// Path is the executable, resolved against the plugin directory; ""
	// for a built-in.
	Path string
	// SHA256 is the expected checksum of Path in hex; required with Path.
	SHA256 string
	// Builtin names a plugin shipped inside the kmirror binary.
	Builtin string
	// Config is the plugin's config block, checked against its schema.
	Config plugin.Config
}

// label is how logs and errors name the plugin: plugin.<kind>.<name>.
func (s Spec) label() string { return "plugin." + string(s.Kind) + "." + s.Name }

// Defaults of Options.
const (
	DefaultRestartInitial = 500 * time.Millisecond
	DefaultRestartMax     = 30 * time.Second
	DefaultStartTimeout   = time.Minute
	DefaultWatchInterval  = 250 * time.Millisecond
)

// Options configure a Host. The zero value of each field is its default.
type Options struct {
	// Logger is the root logger; plugin lines are logged through
	// Logger.ResetNamed("plugin.<kind>.<name>"). Default: discard.
	Logger hclog.Logger
	// Command builds the command that runs a plugin. Default: Spec.Path
	// for a plugin given by path; for a built-in, the running binary
	// (os.Executable) with the arguments plugin serve <kind> <builtin>.
	// Tests inject their own.
	Command func(Spec) (*exec.Cmd, error)
	// InProcess runs built-ins inside the daemon, through Builtins,
	// instead of out of process (plugin.builtin.in.process). Default:
	// out of process.
	InProcess bool
	// Builtins returns the ServeConfig of a built-in (what `kmirror plugin
	// serve` serves). Required for a built-in with InProcess; when set, a
	// built-in it does not know is refused before anything is launched.
	Builtins func(kind plugin.Kind, name string) (plugin.ServeConfig, bool)
	// Restart is the wait between restarts of a crashed plugin. Default:
	// backoff.Exponential(DefaultRestartInitial, DefaultRestartMax).
	Restart backoff.Policy
	// StartTimeout bounds one launch: the handshake, and then Schema and
	// Configure. Default: DefaultStartTimeout.
	StartTimeout time.Duration
	// WatchInterval is how often a supervisor checks whether its process
	// is still alive. Default: DefaultWatchInterval.
	WatchInterval time.Duration
}

// Host launches and supervises plugins. Create it with New, launch with
// Start, and stop with Close; the handles (StateStore, Auth, Filter) are
// valid from New on and fail with ErrUnavailable while their plugin is
// not running.
type Host struct {
	opts Options
	log  hclog.Logger

	pmu     sync.RWMutex // guards plugins: Ensure adds to it while handles read it
	plugins map[string]*supervised
	// ensureMu makes Ensure and Drop calls one at a time.
	ensureMu sync.Mutex

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu      sync.Mutex
	started bool
	closed  bool
}

var nameRE = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]*$`)

// New checks the specs and returns a Host that has launched nothing yet.
func New(specs []Spec, opts Options) (*Host, error) {
	if opts.Logger == nil {
		opts.Logger = hclog.NewNullLogger()
	}
	if opts.Command == nil {
		opts.Command = DefaultCommand
	}
	if opts.Restart == (backoff.Policy{}) {
		opts.Restart = backoff.Exponential(DefaultRestartInitial, DefaultRestartMax)
	}
	if err := opts.Restart.Validate(); err != nil {
		return nil, fmt.Errorf("pluginhost: restart policy: %w", err)
	}
	if opts.StartTimeout <= 0 {
		opts.StartTimeout = DefaultStartTimeout
	}
	if opts.WatchInterval <= 0 {
		opts.WatchInterval = DefaultWatchInterval
	}
	h := &Host{opts: opts, log: opts.Logger, plugins: map[string]*supervised{}}
	h.ctx, h.cancel = context.WithCancel(context.Background())
	var errs []error
	for _, s := range specs {
		if err := h.check(s); err != nil {
			errs = append(errs, err)
			continue
		}
		h.plugins[s.Name] = h.newSupervised(s)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return h, nil
}

func (h *Host) newSupervised(s Spec) *supervised {
	sv := &supervised{
		spec: s,
		log:  onlyName{h.opts.Logger.ResetNamed(s.label())},
		down: &UnavailableError{Kind: s.Kind, Name: s.Name, Reason: "not started"},

		storeCalls: make(chan struct{}, MaxStoreCalls),
	}
	sv.ctx, sv.cancel = context.WithCancel(h.ctx)
	return sv
}

// plugin returns the supervised plugin named name, or nil.
func (h *Host) plugin(name string) *supervised {
	h.pmu.RLock()
	defer h.pmu.RUnlock()
	return h.plugins[name]
}

func (h *Host) check(s Spec) error {
	prefix := "plugins." + s.Name
	switch {
	case !nameRE.MatchString(s.Name):
		return fmt.Errorf("%s: invalid plugin name: use [a-z0-9][a-z0-9_-]*", prefix)
	case h.plugin(s.Name) != nil:
		return fmt.Errorf("%s: configured twice", prefix)
	}
	if _, err := plugin.ProtocolMajor(s.Kind); err != nil {
		return fmt.Errorf("%s.kind: %w", prefix, err)
	}
	switch {
	case (s.Path == "") == (s.Builtin == ""):
		return fmt.Errorf("%s: set exactly one of path and builtin", prefix)
	case s.Path != "" && s.SHA256 == "":
		return fmt.Errorf("%s.sha256: required with path: a plugin is never started unverified", prefix)
	case s.Builtin != "" && h.opts.InProcess && h.opts.Builtins == nil:
		return fmt.Errorf("%s.builtin: plugin.builtin.in.process is true, but this kmirror cannot run built-ins in process; set it to false", prefix)
	case s.Builtin != "" && h.opts.Builtins != nil:
		if _, ok := h.opts.Builtins(s.Kind, s.Builtin); !ok {
			return fmt.Errorf("%s.builtin: this kmirror has no built-in %s plugin %q", prefix, s.Kind, s.Builtin)
		}
	}
	return nil
}

// DefaultCommand is Options.Command's default: the plugin's file, or for a
// built-in the running kmirror binary re-executed as
// `kmirror plugin serve <kind> <builtin>`.
func DefaultCommand(s Spec) (*exec.Cmd, error) {
	if s.Path != "" {
		return exec.Command(s.Path), nil
	}
	exe, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("find the kmirror binary to run built-in plugin %s: %w", s.Builtin, err)
	}
	return exec.Command(exe, "plugin", "serve", string(s.Kind), s.Builtin), nil
}

// Start launches every plugin and starts supervising it. It returns once
// each is configured and dispensed; when one cannot be (a bad checksum, a
// missing file, an unsupported protocol version, a configuration its
// schema refuses), it stops those it launched and returns every failure,
// each naming its plugin. Start may be called once.
func (h *Host) Start(ctx context.Context) error {
	h.mu.Lock()
	if h.started || h.closed {
		h.mu.Unlock()
		return errors.New("pluginhost: Start called twice, or after Close")
	}
	h.started = true
	h.mu.Unlock()

	var errs []error
	for _, name := range h.names() {
		s := h.plugin(name)
		if err := s.pin(h.opts); err != nil {
			errs = append(errs, err)
			continue
		}
		inst, err := h.launch(ctx, s)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		s.up(inst)
		s.log.Info("plugin started", "pid", inst.pid(), "in_process", inst.client == nil)
	}
	if err := errors.Join(errs...); err != nil {
		h.Close()
		return err
	}
	// Supervisors are added under mu, so that Close, which sets closed
	// under mu before it waits, either waits for them or is seen here.
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		h.stopAll()
		return errors.New("pluginhost: closed while starting")
	}
	for _, name := range h.names() {
		h.watchLocked(h.plugin(name))
	}
	return nil
}

// watchLocked starts the supervisor of an out-of-process plugin. h.mu held.
func (h *Host) watchLocked(s *supervised) {
	if inst := s.current(); inst == nil || inst.client == nil {
		return // in process: nothing to watch
	}
	h.wg.Add(1)
	go func() { // owned by the Host: ends at Close or Drop
		defer h.wg.Done()
		h.supervise(s)
	}()
}

// Ensure runs the plugin spec describes, alongside those New was given:
// for plugins the daemon derives from its configuration, such as a
// cluster's credential provider, which a mirror created at run time needs
// too. A plugin of that name running with the very same spec is left as it
// is; one with another spec (its configuration changed) is stopped and
// replaced. Ensure returns once the plugin serves, or why it cannot.
func (h *Host) Ensure(ctx context.Context, spec Spec) error {
	h.ensureMu.Lock()
	defer h.ensureMu.Unlock()
	if old := h.plugin(spec.Name); old != nil {
		if reflect.DeepEqual(old.spec, spec) {
			return nil
		}
		h.drop(old)
	}
	if err := h.check(spec); err != nil {
		return err
	}
	h.mu.Lock()
	if !h.started || h.closed {
		h.mu.Unlock()
		return fmt.Errorf("%s: the plugin host is not running", spec.label())
	}
	h.mu.Unlock()
	s := h.newSupervised(spec)
	if err := s.pin(h.opts); err != nil {
		return err
	}
	inst, err := h.launch(ctx, s)
	if err != nil {
		return err
	}
	s.up(inst)
	s.log.Info("plugin started", "pid", inst.pid(), "in_process", inst.client == nil)
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		s.cancel()
		if inst := s.stop(&UnavailableError{Kind: spec.Kind, Name: spec.Name, Reason: "the plugin host is closed"}); inst != nil {
			_ = inst.close()
		}
		return fmt.Errorf("%s: the plugin host closed while it started", spec.label())
	}
	h.pmu.Lock()
	h.plugins[spec.Name] = s
	h.pmu.Unlock()
	h.watchLocked(s)
	return nil
}

// Drop stops the plugin named name and forgets it; its handles fail from
// then on. It is for plugins added with Ensure that nothing uses any more.
func (h *Host) Drop(name string) {
	h.ensureMu.Lock()
	defer h.ensureMu.Unlock()
	if s := h.plugin(name); s != nil {
		h.drop(s)
	}
}

// drop stops s, ends its supervisor and removes it. h.ensureMu held.
func (h *Host) drop(s *supervised) {
	h.pmu.Lock()
	delete(h.plugins, s.spec.Name)
	h.pmu.Unlock()
	s.cancel()
	if inst := s.stop(&UnavailableError{Kind: s.spec.Kind, Name: s.spec.Name, Reason: "the plugin was removed"}); inst != nil {
		if err := inst.close(); err != nil {
			s.log.Warn("plugin did not stop cleanly", "error", err)
		}
	}
	s.log.Info("plugin stopped: no longer used")
}

func (h *Host) names() []string {
	h.pmu.RLock()
	defer h.pmu.RUnlock()
	names := make([]string, 0, len(h.plugins))
	for n := range h.plugins {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// Close stops every plugin and waits for the supervisors. Each process is
// asked to exit (go-plugin closes its connection and waits two seconds) and
// is then killed. Close is idempotent.
func (h *Host) Close() error {
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		return nil
	}
	h.closed = true
	h.mu.Unlock()
	h.cancel()
	h.wg.Wait()
	return h.stopAll()
}

// stopAll takes every plugin out of service and stops its instance.
func (h *Host) stopAll() error {
	var errs []error
	for _, name := range h.names() {
		s := h.plugin(name)
		if s == nil {
			continue
		}
		if inst := s.stop(&UnavailableError{Kind: s.spec.Kind, Name: s.spec.Name, Reason: "the plugin host is closed"}); inst != nil {
			if err := inst.close(); err != nil {
				errs = append(errs, fmt.Errorf("%s: close: %w", s.spec.label(), err))
			}
		}
	}
	return errors.Join(errs...)
}

// supervise watches one out-of-process plugin and launches it again after
// it exits, until Close or Drop.
func (h *Host) supervise(s *supervised) {
	retry := h.opts.Restart.Start()
	for {
		inst := s.current()
		if inst != nil {
			reason, ok := h.watch(s.ctx, inst)
			if !ok {
				return // closing or dropped: Close or Drop stops the process
			}
			if time.Since(inst.started) > h.opts.Restart.Cap(1<<20) {
				retry.Reset() // it ran long enough: a new failure starts from the first wait
			}
			s.stop(&UnavailableError{Kind: s.spec.Kind, Name: s.spec.Name, Reason: reason + "; the host restarts it"})
			inst.client.Kill()
			s.log.Error("plugin stopped; restarting it", "reason", reason)
		}
		if err := retry.Sleep(s.ctx); err != nil {
			return
		}
		next, err := h.launch(s.ctx, s)
		if err != nil {
			if s.ctx.Err() != nil {
				return
			}
			s.setDown(&UnavailableError{Kind: s.spec.Kind, Name: s.spec.Name, Reason: "restart failed (the host tries again): " + err.Error(), err: err})
			s.log.Error("plugin restart failed; trying again", "error", err, "attempt", retry.Retries())
			continue
		}
		s.up(next)
		if s.ctx.Err() != nil { // dropped or closed while it launched
			if inst := s.stop(&UnavailableError{Kind: s.spec.Kind, Name: s.spec.Name, Reason: "the plugin was stopped"}); inst != nil {
				_ = inst.close()
			}
			return
		}
		s.log.Info("plugin restarted", "pid", next.pid(), "attempt", retry.Retries())
	}
}

// watch waits until inst's process exits (it returns why) or ctx ends
// (ok false).
func (h *Host) watch(ctx context.Context, inst *instance) (reason string, ok bool) {
	t := time.NewTicker(h.opts.WatchInterval)
	defer t.Stop()
	for {
		if inst.client.Exited() {
			return inst.exitReason(), true
		}
		select {
		case <-ctx.Done():
			return "", false
		case <-t.C:
		}
	}
}

// Status is what the host knows of one plugin.
type Status struct {
	Name    string
	Kind    plugin.Kind
	Builtin string // "" for a plugin given by path
	// Running: a process is up and configured (or, in process, the
	// plugin was built).
	Running   bool
	InProcess bool
	Pid       int // 0 when not running or in process
	// Reason says why the plugin is not running.
	Reason string
	// Restarts counts launches after the first.
	Restarts int
}

// Status reports the plugin named name.
func (h *Host) Status(name string) (Status, bool) {
	s := h.plugin(name)
	if s == nil {
		return Status{}, false
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	st := Status{Name: s.spec.Name, Kind: s.spec.Kind, Builtin: s.spec.Builtin, Restarts: max(s.launches-1, 0)}
	if s.cur != nil {
		st.Running, st.InProcess, st.Pid = true, s.cur.client == nil, s.cur.pid()
	} else if s.down != nil {
		st.Reason = s.down.Reason
	}
	return st, true
}

// Names lists the configured plugins, sorted.
func (h *Host) Names() []string { return h.names() }

// lookup finds the plugin a handle is asked for.
func (h *Host) lookup(name string, kind plugin.Kind) (*supervised, error) {
	s := h.plugin(name)
	if s == nil {
		return nil, fmt.Errorf("no plugin named %q is configured (known: %v)", name, h.names())
	}
	if s.spec.Kind != kind {
		return nil, fmt.Errorf("plugin %q is a %s plugin, not %s", name, s.spec.Kind, kind)
	}
	return s, nil
}

// UnavailableError is returned by a handle while its plugin is not running.
// It matches ErrUnavailable and, for an auth or filter plugin, that kind's
// ErrUnavailable, so callers retry as they would for a backend outage.
type UnavailableError struct {
	Kind   plugin.Kind
	Name   string
	Reason string // what happened: the exit status, a failed restart
	err    error
}

// ErrUnavailable is matched by every *UnavailableError: a plugin is not
// running (it crashed and is being restarted, or a restart failed).
var ErrUnavailable = errors.New("plugin unavailable")

func (e *UnavailableError) Error() string {
	return fmt.Sprintf("plugin.%s.%s is unavailable: %s", e.Kind, e.Name, e.Reason)
}

// Is matches ErrUnavailable and the kind's own unavailability sentinel.
func (e *UnavailableError) Is(target error) bool {
	switch target {
	case ErrUnavailable:
		return true
	case auth.ErrUnavailable:
		return e.Kind == plugin.KindAuth
	case filter.ErrUnavailable:
		return e.Kind == plugin.KindFilter
	}
	return false
}

// Unwrap returns the error of a failed restart, if any.
func (e *UnavailableError) Unwrap() error { return e.err }

// onlyName keeps a logger's name when go-plugin derives sub-loggers from it
// (it appends the executable's base name for the plugin's stderr), so that
// every line of a plugin is under plugin.<kind>.<name>. A plugin's own
// logger name, which go-plugin passes on as an "@module" field that would
// replace ours in JSON output, is kept as "module" instead.
type onlyName struct{ hclog.Logger }

// Named returns the logger itself.
func (l onlyName) Named(string) hclog.Logger { return l }

// Log logs at level with the plugin's "@module" renamed.
func (l onlyName) Log(level hclog.Level, msg string, args ...any) {
	l.Logger.Log(level, msg, renameModule(args)...)
}

// Trace logs at trace level with the plugin's "@module" renamed.
func (l onlyName) Trace(msg string, args ...any) { l.Log(hclog.Trace, msg, args...) }

// Debug logs at debug level with the plugin's "@module" renamed.
func (l onlyName) Debug(msg string, args ...any) { l.Log(hclog.Debug, msg, args...) }

// Info logs at info level with the plugin's "@module" renamed.
func (l onlyName) Info(msg string, args ...any) { l.Log(hclog.Info, msg, args...) }

// Warn logs at warn level with the plugin's "@module" renamed.
func (l onlyName) Warn(msg string, args ...any) { l.Log(hclog.Warn, msg, args...) }

// Error logs at error level with the plugin's "@module" renamed.
func (l onlyName) Error(msg string, args ...any) { l.Log(hclog.Error, msg, args...) }

func renameModule(args []any) []any {
	for i := 0; i+1 < len(args); i += 2 {
		if args[i] == "@module" {
			out := append([]any(nil), args...)
			out[i] = "module"
			return out
		}
	}
	return args
}
