package pluginhost

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"regexp"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	goplugin "github.com/hashicorp/go-plugin"

	"github.com/kmirror/kmirror/sdk/auth"
	"github.com/kmirror/kmirror/sdk/filter"
	"github.com/kmirror/kmirror/sdk/plugin"
	"github.com/kmirror/kmirror/sdk/statestore"
)

// supervised is one configured plugin and the instance currently serving
// it, if any.
type supervised struct {
	spec Spec
	log  hclog.Logger
	// ctx ends when the host closes or the plugin is dropped (Drop); its
	// supervisor stops then.
	ctx    context.Context
	cancel context.CancelFunc

	// sum is the checksum every launch verifies: Spec.SHA256, or for a
	// built-in the command's file as it was at Start (set by pin).
	sum string

	mu       sync.RWMutex
	cur      *instance         // nil while down
	down     *UnavailableError // why cur is nil
	launches int
	authInfo auth.Info   // last Info of an auth plugin, served while down
	filtInfo filter.Info // same for a filter

	// storeCalls holds a token for each state-store read or write in
	// flight to the plugin (at most MaxStoreCalls); see storeHandle.
	storeCalls chan struct{}
}

// instance is one running plugin: a process (client set), or a built-in
// in process (client nil).
type instance struct {
	client  *goplugin.Client
	cmd     *exec.Cmd
	impl    any // statestore.Store, auth.Provider or filter.Filter
	started time.Time
}

func (i *instance) pid() int {
	if i.client == nil {
		return 0
	}
	if rc := i.client.ReattachConfig(); rc != nil {
		return rc.Pid
	}
	return 0
}

// exitReason says how the process ended. Call it once client.Exited() is
// true: go-plugin has then waited for the process, so cmd.ProcessState is
// set and no longer written.
func (i *instance) exitReason() string {
	if ps := i.cmd.ProcessState; ps != nil {
		return "process " + fmt.Sprint(ps.Pid()) + " exited (" + ps.String() + ")"
	}
	return "process exited"
}

// close stops the instance: the implementation is closed (over RPC, so the
// plugin can release what it holds), then the process is stopped. A
// process that had exited already cannot have failed to close.
func (i *instance) close() error {
	exited := i.client != nil && i.client.Exited()
	var err error
	if c, ok := i.impl.(io.Closer); ok && !exited {
		err = c.Close()
	}
	if i.client != nil {
		i.client.Kill()
	}
	return err
}

func (s *supervised) current() *instance {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.cur
}

// get returns the serving instance, or why there is none.
func (s *supervised) get() (*instance, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.cur == nil {
		return nil, s.down
	}
	return s.cur, nil
}

func (s *supervised) up(inst *instance) {
	var ai auth.Info
	var fi filter.Info
	switch impl := inst.impl.(type) {
	case auth.Provider:
		ai = impl.Info()
	case filter.Filter:
		fi = impl.Info()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.cur, s.down = inst, nil
	s.authInfo, s.filtInfo = ai, fi
}

// stop takes the current instance out of service with a reason and returns
// it (nil when none was serving).
func (s *supervised) stop(why *UnavailableError) *instance {
	s.mu.Lock()
	defer s.mu.Unlock()
	inst := s.cur
	s.cur, s.down = nil, why
	return inst
}

func (s *supervised) setDown(why *UnavailableError) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.down = why
}

// failed words the error of a call to inst: when inst's process has
// exited under the call, an *UnavailableError naming the plugin and the
// exit (wrapping the call's error too), else err unchanged.
func (s *supervised) failed(inst *instance, err error) error {
	if err == nil || inst.client == nil || !inst.client.Exited() {
		return err
	}
	down := &UnavailableError{Kind: s.spec.Kind, Name: s.spec.Name, Reason: inst.exitReason() + "; the host restarts it"}
	return fmt.Errorf("%w (the call failed: %w)", down, err)
}

// pin fixes the checksum every launch of s verifies.
func (s *supervised) pin(opts Options) error {
	if s.spec.Builtin == "" {
		s.sum = strings.ToLower(s.spec.SHA256)
		return nil
	}
	if opts.InProcess {
		return nil
	}
	cmd, err := opts.Command(s.spec)
	if err != nil {
		return fmt.Errorf("%s: %w", s.spec.label(), err)
	}
	sum, err := fileSHA256(cmd.Path)
	if err != nil {
		return fmt.Errorf("%s: built-in: %w", s.spec.label(), err)
	}
	s.sum = sum
	return nil
}

// launch runs one instance of s to the point where it serves: verified,
// started, configured and dispensed (or built in process).
func (h *Host) launch(ctx context.Context, s *supervised) (*instance, error) {
	s.mu.Lock()
	s.launches++
	s.mu.Unlock()
	if s.spec.Builtin != "" && h.opts.InProcess {
		return h.launchInProcess(ctx, s)
	}
	label := s.spec.label()
	cmd, err := h.opts.Command(s.spec)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", label, err)
	}
	orphanProof(cmd)
	if err := verify(cmd.Path, s.sum); err != nil {
		return nil, fmt.Errorf("%s: not started: %w", label, err)
	}
	client, major, err := newClient(s.spec.Kind, cmd, s.sum, s.log, h.opts.StartTimeout)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", label, err)
	}
	inst := &instance{client: client, cmd: cmd, started: time.Now()}
	impl, err := h.connect(ctx, s, client, major)
	if err != nil {
		client.Kill()
		return nil, fmt.Errorf("%s: %w", label, err)
	}
	inst.impl = impl
	return inst, nil
}

// newClient returns the go-plugin client that runs cmd as a plugin of
// kind: the kind's handshake and protocol version, gRPC only, AutoMTLS,
// the file checked against sum (hex) as it is launched. major is the
// protocol major version it asks for.
func newClient(kind plugin.Kind, cmd *exec.Cmd, sum string, log hclog.Logger, timeout time.Duration) (client *goplugin.Client, major uint, err error) {
	hs, err := plugin.Handshake(kind)
	if err != nil {
		return nil, 0, err
	}
	versions, err := plugin.ClientPlugins(kind)
	if err != nil {
		return nil, 0, err
	}
	raw, _ := hex.DecodeString(sum)
	return goplugin.NewClient(&goplugin.ClientConfig{
		HandshakeConfig:  goplugin.HandshakeConfig{MagicCookieKey: hs.MagicCookieKey, MagicCookieValue: hs.MagicCookieValue},
		VersionedPlugins: versions,
		Cmd:              cmd,
		SecureConfig:     &goplugin.SecureConfig{Checksum: raw, Hash: sha256.New()},
		AllowedProtocols: []goplugin.Protocol{goplugin.ProtocolGRPC},
		AutoMTLS:         true,
		Logger:           log,
		StartTimeout:     timeout,
	}), hs.ProtocolVersion, nil
}

var pluginVersionRE = regexp.MustCompile(`Plugin version: (\d+)`)

// handshake starts the process of client and returns its gRPC client; a
// plugin speaking another major version of kind's protocol is refused
// with both versions named.
func handshake(client *goplugin.Client, kind plugin.Kind, major uint) (*goplugin.GRPCClient, error) {
	rpc, err := client.Client()
	if err != nil {
		if m := pluginVersionRE.FindStringSubmatch(err.Error()); m != nil {
			return nil, fmt.Errorf("refused: it speaks %s protocol version %s and this kmirror speaks version %d; use a build of the plugin for version %d (go-plugin: %v)",
				kind, m[1], major, major, err)
		}
		if errors.Is(err, goplugin.ErrChecksumsDoNotMatch) {
			return nil, fmt.Errorf("not started: the file changed after it was verified: %w", err)
		}
		return nil, fmt.Errorf("start: %w", err)
	}
	grpcClient, ok := rpc.(*goplugin.GRPCClient)
	if !ok {
		return nil, fmt.Errorf("start: the plugin did not negotiate gRPC (got %T)", rpc)
	}
	return grpcClient, nil
}

// connect starts the process, configures the plugin and dispenses its kind.
func (h *Host) connect(ctx context.Context, s *supervised, client *goplugin.Client, major uint) (any, error) {
	grpcClient, err := handshake(client, s.spec.Kind, major)
	if err != nil {
		return nil, err
	}
	cctx, cancel := context.WithTimeout(ctx, h.opts.StartTimeout)
	defer cancel()
	cc := plugin.NewConfigClient(grpcClient.Conn)
	schema, err := cc.Schema(cctx)
	if err != nil {
		return nil, err
	}
	if err := configure(cctx, s.spec, schema, func(ctx context.Context, cfg plugin.Config) error {
		return cc.Configure(ctx, s.spec.Name, cfg)
	}); err != nil {
		return nil, err
	}
	s.log.Info("plugin configured", "keys", configKeys(s.spec.Config))
	raw, err := grpcClient.Dispense(string(s.spec.Kind))
	if err != nil {
		return nil, fmt.Errorf("dispense %s: %w", s.spec.Kind, err)
	}
	if err := checkImpl(s.spec.Kind, raw); err != nil {
		return nil, err
	}
	return raw, nil
}

// configure checks the spec's config block against schema and hands it
// to the plugin; a refusal names plugins.<name>.config.<key>.
func configure(ctx context.Context, spec Spec, schema plugin.Schema, apply func(context.Context, plugin.Config) error) error {
	prefix := "plugins." + spec.Name + ".config"
	if err := schema.Validate(spec.Config); err != nil {
		var ce *plugin.ConfigError
		if errors.As(err, &ce) {
			return ce.WithPrefix(prefix)
		}
		return err
	}
	if err := apply(ctx, spec.Config); err != nil {
		var ce *plugin.ConfigError
		if errors.As(err, &ce) {
			return ce.WithPrefix(prefix)
		}
		return fmt.Errorf("configure: %w", err)
	}
	return nil
}

// configKeys lists the keys of a config block: its values may be secrets
// and are never logged.
func configKeys(c plugin.Config) []string {
	keys := make([]string, 0, len(c))
	for k := range c {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func checkImpl(kind plugin.Kind, raw any) error {
	var ok bool
	switch kind {
	case plugin.KindStateStore:
		_, ok = raw.(statestore.Store)
	case plugin.KindAuth:
		_, ok = raw.(auth.Provider)
	case plugin.KindFilter:
		_, ok = raw.(filter.Filter)
	}
	if !ok {
		return fmt.Errorf("dispense %s: got %T, which does not implement the %s interface", kind, raw, kind)
	}
	return nil
}

// launchInProcess builds a built-in inside the daemon from its ServeConfig,
// with the same schema check as out of process.
func (h *Host) launchInProcess(ctx context.Context, s *supervised) (*instance, error) {
	label := s.spec.label()
	sc, ok := h.opts.Builtins(s.spec.Kind, s.spec.Builtin)
	if !ok {
		return nil, fmt.Errorf("%s: this kmirror has no built-in %s plugin %q", label, s.spec.Kind, s.spec.Builtin)
	}
	if k, err := sc.Kind(); err != nil || k != s.spec.Kind {
		return nil, fmt.Errorf("%s: built-in %q does not serve %s (%v)", label, s.spec.Builtin, s.spec.Kind, err)
	}
	var impl any
	err := configure(ctx, s.spec, sc.Schema, func(ctx context.Context, cfg plugin.Config) error {
		var err error
		switch {
		case sc.NewStateStore != nil:
			impl, err = sc.NewStateStore(ctx, s.spec.Name, cfg)
		case sc.NewAuth != nil:
			impl, err = sc.NewAuth(ctx, s.spec.Name, cfg)
		case sc.NewFilter != nil:
			impl, err = sc.NewFilter(ctx, s.spec.Name, cfg)
		case sc.StateStore != nil:
			impl = sc.StateStore
		case sc.Auth != nil:
			impl = sc.Auth
		default:
			impl = sc.Filter
		}
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("%s: %w", label, err)
	}
	return &instance{impl: impl, started: time.Now()}, nil
}

// verify checks file against the expected SHA-256 (hex).
func verify(file, want string) error {
	got, err := fileSHA256(file)
	if err != nil {
		return err
	}
	if got != strings.ToLower(want) {
		return fmt.Errorf("checksum mismatch: %s has SHA-256 %s, the configuration says %s", file, got, want)
	}
	return nil
}

func fileSHA256(file string) (string, error) {
	f, err := os.Open(file)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return "", fmt.Errorf("plugin file %s does not exist: %w", file, fs.ErrNotExist)
		}
		return "", fmt.Errorf("plugin file %s: %w", file, err)
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", fmt.Errorf("plugin file %s: %w", file, err)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}
