package authrpc

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"log/slog"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	goplugin "github.com/hashicorp/go-plugin"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/kmirror/kmirror/sdk/auth"
	"github.com/kmirror/kmirror/sdk/auth/authtest"
	"github.com/kmirror/kmirror/sdk/internal/pb/authv1"
)

// Secrets of the providers below: long enough that authtest.Leaks cannot
// find them by coincidence.
const (
	refPassword = "ref-password-Zq9"
	refToken    = "eyJhbGciOiJub25lIn0.eyJzdWIiOiJrbWlycm9yIn0.c2lnLXJlZg"
)

// authRef is the reference provider these tests serve: fixed credentials
// for PLAIN, SCRAM-SHA-512 (a delegation token: tokenauth and an expiry) and
// OAUTHBEARER. It passes authtest in process; over the RPC it must pass the
// same way.
type authRef struct {
	expiry time.Time
	ext    map[string]string
	// errs: Credentials for a mirror named here fails with that error.
	errs map[string]error
	// closeErr is what Close returns.
	closeErr error

	calls, closes atomic.Int64
	closed        atomic.Bool
	mu            sync.Mutex
	last          auth.Request
}

func newAuthRef() *authRef {
	return &authRef{expiry: time.Now().Add(time.Hour).Truncate(time.Second), ext: map[string]string{"traceId": "abc 123"}}
}

func (p *authRef) Info() auth.Info {
	return auth.Info{Name: "ref", Version: "1.2.3", ProtocolMajor: auth.ProtocolMajor, ProtocolMinor: auth.ProtocolMinor,
		Mechanisms: []string{auth.MechanismPlain, auth.MechanismSCRAMSHA512, auth.MechanismOAuthBearer}}
}

func (p *authRef) Credentials(ctx context.Context, req auth.Request) (auth.Credentials, error) {
	p.calls.Add(1)
	p.mu.Lock()
	p.last = req
	p.mu.Unlock()
	if err := ctx.Err(); err != nil {
		return auth.Credentials{}, fmt.Errorf("ref: %v: %w", req, err)
	}
	if p.closed.Load() {
		return auth.Credentials{}, fmt.Errorf("ref: %v: %w", req, auth.ErrClosed)
	}
	if err, ok := p.errs[req.Mirror]; ok {
		return auth.Credentials{}, err
	}
	if err := req.Validate(); err != nil {
		return auth.Credentials{}, fmt.Errorf("ref: %w", err)
	}
	switch req.Mechanism {
	case auth.MechanismPlain:
		return auth.Credentials{Username: "alice", Password: auth.NewSecret(refPassword)}, nil
	case auth.MechanismSCRAMSHA512:
		return auth.Credentials{Username: "token-id-1", Password: auth.NewSecret(refPassword), Expiry: p.expiry,
			Extensions: map[string]string{"tokenauth": "true"}}, nil
	case auth.MechanismOAuthBearer:
		return auth.Credentials{Username: "svc", Token: auth.NewSecret(refToken), Expiry: p.expiry, Extensions: maps.Clone(p.ext)}, nil
	}
	return auth.Credentials{}, fmt.Errorf("ref: %v: %w", req, auth.ErrUnsupportedMechanism)
}

func (p *authRef) Close() error {
	p.closes.Add(1)
	p.closed.Store(true)
	return p.closeErr
}

func (p *authRef) lastRequest() auth.Request {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.last
}

// kind is the name the tests dispense the provider under.
const kind = "auth"

// dispenseAuth serves pl over an in-memory go-plugin gRPC connection and
// dispenses the host side. The returned server can be stopped to play a
// plugin process that went away.
func dispenseAuth(t *testing.T, pl goplugin.Plugin) (any, *goplugin.GRPCServer, error) {
	t.Helper()
	client, server := goplugin.TestPluginGRPCConn(t, false, map[string]goplugin.Plugin{kind: pl})
	// Closing the client stops the server too (go-plugin's Shutdown rpc);
	// stopping it here as well would race with that.
	t.Cleanup(func() { _ = client.Close() })
	raw, err := client.Dispense(kind)
	return raw, server, err
}

// authOverRPC is dispenseAuth for a plugin that must be accepted.
func authOverRPC(t *testing.T, pl goplugin.Plugin) (auth.Provider, *goplugin.GRPCServer) {
	t.Helper()
	raw, server, err := dispenseAuth(t, pl)
	if err != nil {
		t.Fatalf("Dispense: %v", err)
	}
	p, ok := raw.(auth.Provider)
	if !ok {
		t.Fatalf("Dispense returned %T, not an auth.Provider", raw)
	}
	return p, server
}

// rawAuthPlugin serves a hand-written authv1.ProviderServer (nil: no
// service at all), standing for a plugin written without this SDK; its host
// side is the real one.
type rawAuthPlugin struct {
	goplugin.NetRPCUnsupportedPlugin
	srv authv1.ProviderServer
}

func (p *rawAuthPlugin) GRPCServer(_ *goplugin.GRPCBroker, s *grpc.Server) error {
	if p.srv != nil {
		authv1.RegisterProviderServer(s, p.srv)
	}
	return nil
}

func (p *rawAuthPlugin) GRPCClient(ctx context.Context, b *goplugin.GRPCBroker, c *grpc.ClientConn) (any, error) {
	return (&Plugin{}).GRPCClient(ctx, b, c)
}

// rawAuthServer answers Info and Credentials with fixed messages.
type rawAuthServer struct {
	authv1.UnimplementedProviderServer
	info  *authv1.InfoResponse
	creds map[string]*authv1.CredentialsResponse // by mechanism
}

func (s *rawAuthServer) Info(context.Context, *authv1.InfoRequest) (*authv1.InfoResponse, error) {
	return s.info, nil
}

func (s *rawAuthServer) Credentials(_ context.Context, in *authv1.CredentialsRequest) (*authv1.CredentialsResponse, error) {
	return s.creds[in.GetMechanism()], nil
}

func TestAuthConformanceInProcessAndOverRPC(t *testing.T) {
	t.Parallel()
	t.Run("InProcess", func(t *testing.T) {
		authtest.Run(t, func(t *testing.T) auth.Provider { return newAuthRef() })
	})
	t.Run("OverRPC", func(t *testing.T) {
		authtest.Run(t, func(t *testing.T) auth.Provider {
			p, _ := authOverRPC(t, &Plugin{Impl: newAuthRef()})
			return p
		})
	})
}

// authSentinels are the sentinels of package auth by name;
// TestAuthSentinelsSurviveTheRPC checks that the package declares no other.
var authSentinels = map[string]error{
	"ErrUnsupportedMechanism": auth.ErrUnsupportedMechanism,
	"ErrRejected":             auth.ErrRejected,
	"ErrUnavailable":          auth.ErrUnavailable,
	"ErrInvalidRequest":       auth.ErrInvalidRequest,
	"ErrClosed":               auth.ErrClosed,
	"ErrInvalidCredentials":   auth.ErrInvalidCredentials,
	"ErrInvalidConfig":        auth.ErrInvalidConfig,
	"ErrIncompatible":         auth.ErrIncompatible,
}

// declaredErrors returns the exported package-level variables named Err*
// of the Go package in dir.
func declaredErrors(t *testing.T, dir string) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	fset := token.NewFileSet()
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		file, err := parser.ParseFile(fset, f, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range file.Decls {
			gd, ok := d.(*ast.GenDecl)
			if !ok || gd.Tok != token.VAR {
				continue
			}
			for _, spec := range gd.Specs {
				for _, n := range spec.(*ast.ValueSpec).Names {
					if strings.HasPrefix(n.Name, "Err") && n.IsExported() {
						names = append(names, n.Name)
					}
				}
			}
		}
	}
	slices.Sort(names)
	return names
}

func TestAuthSentinelsSurviveTheRPC(t *testing.T) {
	t.Parallel()
	declared := declaredErrors(t, "../../auth")
	if want := slices.Sorted(maps.Keys(authSentinels)); !slices.Equal(declared, want) {
		t.Fatalf("package auth declares the sentinels %v, this test (and authErrors) covers %v", declared, want)
	}
	ref := newAuthRef()
	ref.errs = map[string]error{}
	for name, s := range authSentinels {
		ref.errs["m-"+name] = fmt.Errorf("ref: mirror %q: %s went wrong: %w", "m-"+name, name, s)
	}
	p, _ := authOverRPC(t, &Plugin{Impl: ref})
	for name, s := range authSentinels {
		req := auth.Request{Mirror: "m-" + name, Role: auth.RoleSource, Mechanism: auth.MechanismPlain}
		_, err := p.Credentials(t.Context(), req)
		if !errors.Is(err, s) {
			t.Errorf("%s: host error %v does not match it", name, err)
			continue
		}
		for other, o := range authSentinels {
			if other != name && errors.Is(err, o) {
				t.Errorf("%s: host error %v also matches %s", name, err, other)
			}
		}
		if want := fmt.Sprintf(`auth plugin "ref": %v`, ref.errs[req.Mirror]); err.Error() != want {
			t.Errorf("%s: host error text %q, want %q", name, err, want)
		}
	}

	// Close's error travels the same way.
	ref = newAuthRef()
	ref.closeErr = fmt.Errorf("ref: closing the token client: %w", auth.ErrUnavailable)
	p, _ = authOverRPC(t, &Plugin{Impl: ref})
	if err := p.Close(); !errors.Is(err, auth.ErrUnavailable) || !strings.Contains(err.Error(), "closing the token client") {
		t.Fatalf("Close = %v, want the plugin's error wrapping ErrUnavailable", err)
	}
}

// blockingAuth blocks every Credentials call until its context ends and
// reports what it saw.
type blockingAuth struct {
	authRef
	entered chan struct{}
	seen    chan blockedCall
}

type blockedCall struct {
	err         error
	hasDeadline bool
	deadline    time.Time
}

func (p *blockingAuth) Credentials(ctx context.Context, req auth.Request) (auth.Credentials, error) {
	p.entered <- struct{}{}
	<-ctx.Done()
	dl, ok := ctx.Deadline()
	p.seen <- blockedCall{err: ctx.Err(), hasDeadline: ok, deadline: dl}
	return auth.Credentials{}, fmt.Errorf("blocking: %v: %w", req, ctx.Err())
}

func TestAuthContextReachesThePlugin(t *testing.T) {
	t.Parallel()
	req := auth.Request{Mirror: "m", Role: auth.RoleSource, Mechanism: auth.MechanismPlain}
	newBlocking := func(t *testing.T) (*blockingAuth, auth.Provider) {
		b := &blockingAuth{authRef: *newAuthRef(), entered: make(chan struct{}, 1), seen: make(chan blockedCall, 1)}
		p, _ := authOverRPC(t, &Plugin{Impl: b})
		return b, p
	}
	t.Run("Deadline", func(t *testing.T) {
		t.Parallel()
		b, p := newBlocking(t)
		deadline := time.Now().Add(300 * time.Millisecond)
		ctx, cancel := context.WithDeadline(t.Context(), deadline)
		defer cancel()
		_, err := p.Credentials(ctx, req)
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("host error %v, want one wrapping context.DeadlineExceeded", err)
		}
		if want := fmt.Sprintf(`auth plugin "ref": %v: `, req); !strings.HasPrefix(err.Error(), want) {
			t.Fatalf("host error %q does not start with %q", err, want)
		}
		seen := <-b.seen
		// gRPC sends the time left, so the plugin's deadline is the host's
		// give or take the time on the wire.
		if d := seen.deadline.Sub(deadline).Abs(); !seen.hasDeadline || d > time.Second {
			t.Fatalf("the plugin's context had deadline %v (set: %v), want the host's %v", seen.deadline, seen.hasDeadline, deadline)
		}
		if !errors.Is(seen.err, context.DeadlineExceeded) && !errors.Is(seen.err, context.Canceled) {
			t.Fatalf("the plugin's context ended with %v", seen.err)
		}
	})
	t.Run("Cancel", func(t *testing.T) {
		t.Parallel()
		b, p := newBlocking(t)
		ctx, cancel := context.WithCancel(t.Context())
		errc := make(chan error, 1)
		go func() {
			_, err := p.Credentials(ctx, req)
			errc <- err
		}()
		<-b.entered // the call reached the plugin
		cancel()
		if err := <-errc; !errors.Is(err, context.Canceled) {
			t.Fatalf("host error %v, want one wrapping context.Canceled", err)
		}
		if seen := <-b.seen; !errors.Is(seen.err, context.Canceled) {
			t.Fatalf("the plugin's context ended with %v, want context.Canceled", seen.err)
		}
	})
}

// infoAuth is authRef with another Info.
type infoAuth struct {
	*authRef
	info  auth.Info
	block chan struct{} // when set, Info waits until it is closed
}

func (p *infoAuth) Info() auth.Info {
	if p.block != nil {
		<-p.block
	}
	return p.info
}

func TestAuthInfoIsCheckedWhenDispensed(t *testing.T) {
	t.Parallel()
	good := newAuthRef().Info()
	with := func(f func(*auth.Info)) auth.Info {
		i := good
		i.Mechanisms = slices.Clone(good.Mechanisms)
		f(&i)
		return i
	}
	refused := map[string]auth.Info{
		"major too new":     with(func(i *auth.Info) { i.ProtocolMajor = auth.ProtocolMajor + 1 }),
		"major too old":     with(func(i *auth.Info) { i.ProtocolMajor = auth.ProtocolMajor - 1 }),
		"negative minor":    with(func(i *auth.Info) { i.ProtocolMinor = -1 }),
		"bad name":          with(func(i *auth.Info) { i.Name = "Ref Provider" }),
		"no mechanisms":     with(func(i *auth.Info) { i.Mechanisms = nil }),
		"unknown mechanism": with(func(i *auth.Info) { i.Mechanisms = append(i.Mechanisms, "GSSAPI") }),
	}
	for name, info := range refused {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			raw, _, err := dispenseAuth(t, &Plugin{Impl: &infoAuth{authRef: newAuthRef(), info: info}})
			if !errors.Is(err, auth.ErrIncompatible) {
				t.Fatalf("Dispense = %v, %v; want an error wrapping auth.ErrIncompatible", raw, err)
			}
			if !strings.Contains(err.Error(), "auth plugin") {
				t.Fatalf("error %q does not say which kind of plugin was refused", err)
			}
		})
	}
	t.Run("a newer minor is accepted", func(t *testing.T) {
		t.Parallel()
		info := with(func(i *auth.Info) { i.ProtocolMinor = auth.ProtocolMinor + 7 })
		p, _ := authOverRPC(t, &Plugin{Impl: &infoAuth{authRef: newAuthRef(), info: info}})
		if got := p.Info(); got.ProtocolMinor != info.ProtocolMinor || got.Version != "1.2.3" || !slices.Equal(got.Mechanisms, info.Mechanisms) {
			t.Fatalf("Info = %+v, want %+v", got, info)
		}
	})
	t.Run("Info is read once", func(t *testing.T) {
		t.Parallel()
		ref := newAuthRef()
		counting := &countingInfo{authRef: ref}
		p, _ := authOverRPC(t, &Plugin{Impl: counting})
		for range 3 {
			_ = p.Info()
		}
		if _, err := p.Credentials(t.Context(), auth.Request{Role: auth.RoleDestination, Mechanism: auth.MechanismPlain}); err != nil {
			t.Fatal(err)
		}
		if n := counting.infos.Load(); n != 1 {
			t.Fatalf("the plugin's Info was called %d times, want once", n)
		}
	})
	t.Run("Info that does not answer in time", func(t *testing.T) {
		t.Parallel()
		block := make(chan struct{})
		pl := &Plugin{Impl: &infoAuth{authRef: newAuthRef(), info: good, block: block}, infoTimeout: 200 * time.Millisecond}
		raw, _, err := dispenseAuth(t, pl)
		t.Cleanup(func() { close(block) }) // before the server stops (cleanups run last first)
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Dispense = %v, %v; want an error wrapping context.DeadlineExceeded", raw, err)
		}
	})
	t.Run("no auth service", func(t *testing.T) {
		t.Parallel()
		raw, _, err := dispenseAuth(t, &rawAuthPlugin{})
		if err == nil || !strings.Contains(err.Error(), "reading its Info") {
			t.Fatalf("Dispense = %v, %v; want an error about reading Info", raw, err)
		}
	})
}

type countingInfo struct {
	*authRef
	infos atomic.Int64
}

func (p *countingInfo) Info() auth.Info {
	p.infos.Add(1)
	return p.authRef.Info()
}

// fixedAuth returns the credentials set for a mechanism, sharing its own
// Extensions map with every caller (which the RPC must make harmless).
type fixedAuth struct {
	*authRef
	creds map[string]auth.Credentials
}

func (p *fixedAuth) Credentials(ctx context.Context, req auth.Request) (auth.Credentials, error) {
	if _, err := p.authRef.Credentials(ctx, req); err != nil {
		return auth.Credentials{}, err
	}
	return p.creds[req.Mechanism], nil
}

func TestAuthValuesCrossTheRPCExactly(t *testing.T) {
	t.Parallel()
	zones := []*time.Location{time.UTC, time.FixedZone("UTC+05:45", 5*3600+45*60), time.FixedZone("UTC-09:30", -(9*3600 + 30*60))}
	expiries := []time.Time{
		time.Date(2031, 3, 4, 5, 6, 7, 123456789, zones[1]),
		time.Date(2026, 12, 1, 23, 59, 59, 999999999, zones[2]),
		time.Date(1969, 12, 31, 23, 59, 59, 1, zones[0]), // before the Unix epoch: negative seconds
		time.Date(9999, 12, 31, 23, 59, 59, 999999999, zones[0]),
		time.Now(), // with a monotonic clock reading
	}
	for _, exp := range expiries {
		ext := map[string]string{"traceId": "abc 123", "tokenauth": "true", "z": "\t\r\n~"}
		ref := newAuthRef()
		plugin := &fixedAuth{authRef: ref, creds: map[string]auth.Credentials{
			auth.MechanismOAuthBearer: {Username: "svc-ü", Token: auth.NewSecret(refToken), Expiry: exp, Extensions: ext},
			auth.MechanismSCRAMSHA512: {Username: "Jörg", Password: auth.NewSecret("päss-wörd-\u2603"), Expiry: exp, Extensions: map[string]string{}},
			auth.MechanismPlain:       {Username: "alice", Password: auth.NewSecret(refPassword)},
		}}
		p, _ := authOverRPC(t, &Plugin{Impl: plugin})
		for _, req := range []auth.Request{
			{Mirror: "dc1_to-DC2", Role: auth.RoleSource, Mechanism: auth.MechanismOAuthBearer},
			{Role: auth.RoleDestination, Mechanism: auth.MechanismSCRAMSHA512},
			{Mirror: "m", Role: auth.RoleDestination, Mechanism: auth.MechanismPlain},
		} {
			got, err := p.Credentials(t.Context(), req)
			if err != nil {
				t.Fatalf("Credentials(%v): %v", req, err)
			}
			if last := ref.lastRequest(); last != req {
				t.Fatalf("the plugin got request %#v, the host sent %#v", last, req)
			}
			want := plugin.creds[req.Mechanism]
			if got.Username != want.Username || got.Password != want.Password || got.Token != want.Token {
				t.Fatalf("Credentials(%v): user %q, password and token equal: %v %v; want user %q", req, got.Username,
					got.Password == want.Password, got.Token == want.Token, want.Username)
			}
			if !got.Expiry.Equal(want.Expiry) || got.Expiry.UnixNano() != want.Expiry.UnixNano() || got.Expiry.IsZero() != want.Expiry.IsZero() {
				t.Fatalf("Credentials(%v): expiry %v, want %v", req, got.Expiry, want.Expiry)
			}
			if len(want.Extensions) == 0 && got.Extensions != nil {
				t.Fatalf("Credentials(%v): extensions %v, want nil", req, got.Extensions)
			}
			if !maps.Equal(got.Extensions, want.Extensions) {
				t.Fatalf("Credentials(%v): extensions %v, want %v", req, got.Extensions, want.Extensions)
			}
			// The host's copy is its own.
			for k := range got.Extensions {
				got.Extensions[k] = "changed on the host"
			}
		}
		if ext["traceId"] != "abc 123" {
			t.Fatalf("changing the host's extensions changed the plugin's: %v", ext)
		}
		// The plugin's map, changed after a call, does not reach the
		// host's earlier result either.
		first, _ := p.Credentials(t.Context(), auth.Request{Role: auth.RoleSource, Mechanism: auth.MechanismOAuthBearer})
		ext["traceId"] = "changed in the plugin"
		if first.Extensions["traceId"] != "abc 123" {
			t.Fatalf("the host's extensions alias the plugin's: %v", first.Extensions)
		}
	}
}

func TestAuthHostChecksWhatAPluginReturns(t *testing.T) {
	t.Parallel()
	exp := timestamppb.New(time.Now().Add(time.Hour))
	srv := &rawAuthServer{
		info: &authv1.InfoResponse{Name: "foreign", Version: "0.1", ProtocolMajor: auth.ProtocolMajor,
			Mechanisms: []string{auth.MechanismPlain, auth.MechanismSCRAMSHA256, auth.MechanismOAuthBearer}},
		creds: map[string]*authv1.CredentialsResponse{
			// A password and a token for PLAIN: not usable.
			auth.MechanismPlain: {Username: "alice", Password: []byte(refPassword), Token: []byte(refToken)},
			// No password.
			auth.MechanismSCRAMSHA256: {Username: "alice", Expiry: exp},
			// A token without an expiry.
			auth.MechanismOAuthBearer: {Token: []byte(refToken)},
		},
	}
	p, _ := authOverRPC(t, &rawAuthPlugin{srv: srv})
	for mech := range srv.creds {
		req := auth.Request{Mirror: "m", Role: auth.RoleSource, Mechanism: mech}
		c, err := p.Credentials(t.Context(), req)
		if !errors.Is(err, auth.ErrInvalidCredentials) {
			t.Fatalf("Credentials(%v) = %+v, %v; want an error wrapping auth.ErrInvalidCredentials", req, c, err)
		}
		if want := fmt.Sprintf(`auth plugin "foreign" returned unusable credentials for %v`, req); !strings.HasPrefix(err.Error(), want) {
			t.Fatalf("error %q does not start with %q", err, want)
		}
		if leak := authtest.Leaks(err, refPassword, refToken); leak != "" {
			t.Fatalf("Credentials(%v): %s", req, leak)
		}
	}
	// The Go plugin side checks too, so a Go provider's mistake comes back
	// as its own error.
	bad := &fixedAuth{authRef: newAuthRef(), creds: map[string]auth.Credentials{
		auth.MechanismPlain: {Username: "alice"},
	}}
	p, _ = authOverRPC(t, &Plugin{Impl: bad})
	_, err := p.Credentials(t.Context(), auth.Request{Role: auth.RoleDestination, Mechanism: auth.MechanismPlain})
	if !errors.Is(err, auth.ErrInvalidCredentials) || !strings.Contains(err.Error(), "no password") {
		t.Fatalf("Credentials = %v, want ErrInvalidCredentials saying there is no password", err)
	}
}

func TestAuthCloseReachesThePlugin(t *testing.T) {
	t.Parallel()
	ref := newAuthRef()
	p, _ := authOverRPC(t, &Plugin{Impl: ref})
	req := auth.Request{Mirror: "m", Role: auth.RoleSource, Mechanism: auth.MechanismPlain}
	if _, err := p.Credentials(t.Context(), req); err != nil {
		t.Fatal(err)
	}
	if err := p.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if !ref.closed.Load() {
		t.Fatal("Close on the host did not close the plugin's provider")
	}
	calls := ref.calls.Load()
	_, err := p.Credentials(t.Context(), req)
	if !errors.Is(err, auth.ErrClosed) || !strings.HasPrefix(err.Error(), `auth plugin "ref": `) {
		t.Fatalf("Credentials after Close = %v, want ErrClosed naming the plugin", err)
	}
	if ref.calls.Load() != calls {
		t.Fatal("Credentials after Close called the plugin")
	}
	if err := p.Close(); err != nil || ref.closes.Load() != 1 {
		t.Fatalf("second Close = %v, plugin closed %d times; want nil and once", err, ref.closes.Load())
	}
	if err := p.Info().Validate(); err != nil {
		t.Fatalf("Info after Close: %v", err)
	}
}

func TestAuthUnreachablePluginIsUnavailable(t *testing.T) {
	t.Parallel()
	ref := newAuthRef()
	p, server := authOverRPC(t, &Plugin{Impl: ref, closeTimeout: 2 * time.Second})
	req := auth.Request{Mirror: "m", Role: auth.RoleSource, Mechanism: auth.MechanismPlain}
	if _, err := p.Credentials(t.Context(), req); err != nil {
		t.Fatal(err)
	}
	server.Stop() // the plugin process is gone
	_, err := p.Credentials(t.Context(), req)
	if !errors.Is(err, auth.ErrUnavailable) {
		t.Fatalf("Credentials from a stopped plugin = %v, want an error wrapping auth.ErrUnavailable", err)
	}
	if want := fmt.Sprintf(`auth plugin "ref": %v: the plugin is unreachable`, req); !strings.HasPrefix(err.Error(), want) {
		t.Fatalf("error %q does not start with %q", err, want)
	}
	if err := p.Close(); err == nil {
		t.Fatal("Close of a stopped plugin reported nothing")
	}
	if _, err := p.Credentials(t.Context(), req); !errors.Is(err, auth.ErrClosed) {
		t.Fatalf("Credentials after a failed Close = %v, want ErrClosed", err)
	}
}

// TestAuthHostSideNeverPrintsSecrets formats everything a host holds of an
// auth plugin (the provider, its Info, requests, credentials, and the errors
// of every path through the host side) every way a host might log it.
func TestAuthHostSideNeverPrintsSecrets(t *testing.T) {
	t.Parallel()
	secrets := []string{refPassword, refToken}
	var logged []any
	ref := newAuthRef()
	ref.errs = map[string]error{"rejected": fmt.Errorf("ref: %w", auth.ErrRejected)}
	p, server := authOverRPC(t, &Plugin{Impl: ref, closeTimeout: 2 * time.Second})
	logged = append(logged, p, p.Info())
	for _, m := range p.Info().Mechanisms {
		req := auth.Request{Mirror: "m", Role: auth.RoleSource, Mechanism: m}
		c, err := p.Credentials(t.Context(), req)
		if err != nil {
			t.Fatal(err)
		}
		if !c.Password.IsSet() && !c.Token.IsSet() {
			t.Fatalf("Credentials(%v) carry no secret to look for", req)
		}
		logged = append(logged, req, c, &c)
	}
	fails := []auth.Request{
		{Mirror: "m", Role: auth.RoleSource, Mechanism: "GSSAPI"},
		{Mirror: "m", Role: "sideways", Mechanism: auth.MechanismPlain},
		{Mirror: "rejected", Role: auth.RoleSource, Mechanism: auth.MechanismPlain},
	}
	canceled, cancel := context.WithCancel(t.Context())
	cancel()
	_, err := p.Credentials(canceled, auth.Request{Role: auth.RoleSource, Mechanism: auth.MechanismPlain})
	logged = append(logged, err)
	for _, req := range fails {
		_, err := p.Credentials(t.Context(), req)
		logged = append(logged, err)
	}
	// Unusable credentials from a plugin, which the host refuses.
	foreign, _ := authOverRPC(t, &rawAuthPlugin{srv: &rawAuthServer{
		info: &authv1.InfoResponse{Name: "foreign", ProtocolMajor: auth.ProtocolMajor, Mechanisms: []string{auth.MechanismPlain}},
		creds: map[string]*authv1.CredentialsResponse{
			auth.MechanismPlain: {Username: "alice", Password: []byte(refPassword + "\x00"), Token: []byte(refToken)},
		},
	}})
	_, err = foreign.Credentials(t.Context(), auth.Request{Role: auth.RoleSource, Mechanism: auth.MechanismPlain})
	logged = append(logged, foreign, err)
	// A plugin gone, then closed.
	server.Stop()
	_, err = p.Credentials(t.Context(), auth.Request{Role: auth.RoleSource, Mechanism: auth.MechanismPlain})
	logged = append(logged, err, p.Close())
	_, err = p.Credentials(t.Context(), auth.Request{Role: auth.RoleSource, Mechanism: auth.MechanismPlain})
	logged = append(logged, err)

	for i, v := range logged {
		if v == nil {
			t.Fatalf("value %d is nil: every path above should fail or return a value", i)
		}
		if leak := authtest.Leaks(v, secrets...); leak != "" {
			t.Errorf("value %d (%T): %s", i, v, leak)
		}
		var text bytes.Buffer
		slog.New(slog.NewTextHandler(&text, nil)).Info("x", "v", v, "err", v)
		for _, s := range secrets {
			if strings.Contains(text.String(), s) {
				t.Errorf("value %d (%T): a secret appears in a log/slog text record", i, v)
			}
		}
	}
}
