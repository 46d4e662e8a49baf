// Package authrpc carries an auth.Provider over gRPC (service
// kmirror.plugin.auth.v1.Provider, sdk/proto/kmirror/plugin/auth/v1): the
// plugin side serves a provider, the host side is an auth.Provider that
// calls the plugin, checks what it returns and never prints a secret. The
// auth sentinels keep their identity over the wire. sdk/plugin offers it
// through Serve and ClientPlugins; docs/design/plugin-protocols.md and
// docs/plugins.md describe the protocol.
package authrpc

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	goplugin "github.com/hashicorp/go-plugin"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/kmirror/kmirror/sdk/auth"
	"github.com/kmirror/kmirror/sdk/internal/pb/authv1"
	"github.com/kmirror/kmirror/sdk/internal/rpcerr"
)

// authProtocol is the name of the auth plugins' gRPC protocol: the proto
// package of sdk/proto/kmirror/plugin/auth/v1/auth.proto, whose service
// kmirror.plugin.auth.v1.Provider carries an auth.Provider, and the domain
// of the google.rpc.ErrorInfo details its errors carry.
const authProtocol = "kmirror.plugin.auth.v1"

// Timeouts of the host side of the auth protocol.
const (
	// authInfoTimeout bounds the Info call the host makes when it
	// dispenses an auth plugin.
	authInfoTimeout = 10 * time.Second
	// authCloseTimeout bounds the Close call the host makes to an auth
	// plugin.
	authCloseTimeout = 10 * time.Second
)

// authErrors maps every sentinel of package auth to its wire name. The
// names are part of the protocol (auth.proto lists them): never rename or
// reuse one.
var authErrors = rpcerr.NewTable(authProtocol,
	rpcerr.Sentinel{Name: "UNSUPPORTED_MECHANISM", Err: auth.ErrUnsupportedMechanism, Code: codes.InvalidArgument},
	rpcerr.Sentinel{Name: "REJECTED", Err: auth.ErrRejected, Code: codes.PermissionDenied},
	rpcerr.Sentinel{Name: "UNAVAILABLE", Err: auth.ErrUnavailable, Code: codes.Unavailable},
	rpcerr.Sentinel{Name: "INVALID_REQUEST", Err: auth.ErrInvalidRequest, Code: codes.InvalidArgument},
	rpcerr.Sentinel{Name: "CLOSED", Err: auth.ErrClosed, Code: codes.FailedPrecondition},
	rpcerr.Sentinel{Name: "INVALID_CREDENTIALS", Err: auth.ErrInvalidCredentials, Code: codes.Internal},
	rpcerr.Sentinel{Name: "INVALID_CONFIG", Err: auth.ErrInvalidConfig, Code: codes.FailedPrecondition},
	rpcerr.Sentinel{Name: "INCOMPATIBLE", Err: auth.ErrIncompatible, Code: codes.FailedPrecondition},
)

// Plugin is the go-plugin Plugin of the auth kind. On the plugin side Impl
// is the provider served; on the host side Impl is unused and GRPCClient
// returns an auth.Provider that calls the plugin.
type Plugin struct {
	goplugin.NetRPCUnsupportedPlugin
	Impl auth.Provider
	// infoTimeout and closeTimeout override authInfoTimeout and
	// authCloseTimeout when set (tests).
	infoTimeout, closeTimeout time.Duration
}

// GRPCServer registers the plugin side of the service, serving p.Impl.
func (p *Plugin) GRPCServer(_ *goplugin.GRPCBroker, s *grpc.Server) error {
	if p.Impl == nil {
		return errors.New("plugin: auth: no provider to serve")
	}
	authv1.RegisterProviderServer(s, &authServer{impl: p.Impl})
	return nil
}

// GRPCClient returns the host side: an auth.Provider over conn. It reads the
// plugin's Info once (bounded by authInfoTimeout, 10 s) and refuses a plugin whose
// Info does not pass auth.Info.Validate with an error wrapping
// auth.ErrIncompatible.
func (p *Plugin) GRPCClient(ctx context.Context, _ *goplugin.GRPCBroker, conn *grpc.ClientConn) (any, error) {
	timeout := cmp.Or(p.infoTimeout, authInfoTimeout)
	ictx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	client := authv1.NewProviderClient(conn)
	resp, err := client.Info(ictx, &authv1.InfoRequest{})
	if err != nil {
		return nil, fmt.Errorf("plugin: auth plugin: reading its Info (allowed %v): %w", timeout, authErrors.FromStatus(err))
	}
	info := auth.Info{
		Name:          resp.GetName(),
		Version:       resp.GetVersion(),
		ProtocolMajor: int(resp.GetProtocolMajor()),
		ProtocolMinor: int(resp.GetProtocolMinor()),
		Mechanisms:    slices.Clone(resp.GetMechanisms()),
	}
	if err := info.Validate(); err != nil {
		return nil, fmt.Errorf("plugin: auth plugin %q (version %q) refused: %w", info.Name, info.Version, err)
	}
	return &authClient{client: client, info: info, closeTimeout: cmp.Or(p.closeTimeout, authCloseTimeout)}, nil
}

// authServer is the plugin side: it serves impl and turns its errors into
// gRPC statuses that name the sentinels they match.
type authServer struct {
	authv1.UnimplementedProviderServer
	impl auth.Provider
}

func (s *authServer) Info(context.Context, *authv1.InfoRequest) (*authv1.InfoResponse, error) {
	i := s.impl.Info()
	return &authv1.InfoResponse{
		Name: i.Name,
		// Version is free-form; proto strings must be UTF-8.
		Version:       strings.ToValidUTF8(i.Version, "\uFFFD"),
		ProtocolMajor: authInt32(i.ProtocolMajor),
		ProtocolMinor: authInt32(i.ProtocolMinor),
		Mechanisms:    slices.Clone(i.Mechanisms),
	}, nil
}

// authInt32 returns n, or math.MinInt32 when n does not fit: a version the
// host refuses rather than one that wrapped around to a valid one.
func authInt32(n int) int32 {
	if n < math.MinInt32 || n > math.MaxInt32 {
		return math.MinInt32
	}
	return int32(n)
}

func (s *authServer) Credentials(ctx context.Context, in *authv1.CredentialsRequest) (*authv1.CredentialsResponse, error) {
	req := auth.Request{Mirror: in.GetMirror(), Role: in.GetRole(), Mechanism: in.GetMechanism()}
	c, err := s.impl.Credentials(ctx, req)
	if err != nil {
		return nil, authErrors.ToStatus(err)
	}
	// Checked here too, so that a Go provider's mistake is reported as its
	// own (the host checks again: other plugins may not); proto strings
	// must be UTF-8 and Validate does not require it of the user name.
	if err := c.Validate(req.Mechanism); err != nil {
		return nil, authErrors.ToStatus(err)
	}
	if !utf8.ValidString(c.Username) {
		return nil, authErrors.ToStatus(fmt.Errorf("%w for %s: the username is not valid UTF-8", auth.ErrInvalidCredentials, req.Mechanism))
	}
	out := &authv1.CredentialsResponse{Username: c.Username, Extensions: c.Extensions}
	if c.Password.IsSet() {
		out.Password = []byte(c.Password.Reveal())
	}
	if c.Token.IsSet() {
		out.Token = []byte(c.Token.Reveal())
	}
	if !c.Expiry.IsZero() {
		out.Expiry = timestamppb.New(c.Expiry)
	}
	return out, nil
}

func (s *authServer) Close(context.Context, *authv1.CloseRequest) (*authv1.CloseResponse, error) {
	if err := s.impl.Close(); err != nil {
		return nil, authErrors.ToStatus(err)
	}
	return &authv1.CloseResponse{}, nil
}

// authClient is the host side: an auth.Provider whose calls go to a plugin.
// Errors are prefixed with the plugin's name once and match the sentinels the
// plugin's error matched; a plugin that cannot be reached yields
// auth.ErrUnavailable. Credentials are checked with Validate before they are
// returned. Printing it shows the plugin's name and version.
type authClient struct {
	client       authv1.ProviderClient
	info         auth.Info // read once by GRPCClient; copied on every Info call
	closeTimeout time.Duration

	closed    atomic.Bool
	closeOnce sync.Once
	closeErr  error
}

// Info returns the Info the plugin announced when it was dispensed.
func (c *authClient) Info() auth.Info {
	i := c.info
	i.Mechanisms = slices.Clone(i.Mechanisms)
	return i
}

// Credentials asks the plugin; after Close it fails with auth.ErrClosed
// without a call.
func (c *authClient) Credentials(ctx context.Context, req auth.Request) (auth.Credentials, error) {
	if c.closed.Load() {
		return auth.Credentials{}, fmt.Errorf("%v: %v: %w", c, req, auth.ErrClosed)
	}
	resp, err := c.client.Credentials(ctx, &authv1.CredentialsRequest{Mirror: req.Mirror, Role: req.Role, Mechanism: req.Mechanism})
	if err != nil {
		return auth.Credentials{}, c.fromStatus(ctx, req, err)
	}
	creds := auth.Credentials{
		Username:   resp.GetUsername(),
		Password:   auth.NewSecret(string(resp.GetPassword())),
		Token:      auth.NewSecret(string(resp.GetToken())),
		Extensions: resp.GetExtensions(), // freshly decoded: the caller's own
	}
	if resp.GetExpiry() != nil {
		creds.Expiry = resp.GetExpiry().AsTime()
	}
	if len(creds.Extensions) == 0 {
		creds.Extensions = nil
	}
	if err := creds.Validate(req.Mechanism); err != nil {
		return auth.Credentials{}, fmt.Errorf("%v returned unusable credentials for %v: %w", c, req, err)
	}
	return creds, nil
}

// Close asks the plugin to close its provider (bounded by authCloseTimeout, 10 s)
// and closes this side: later Credentials calls fail with auth.ErrClosed
// without calling the plugin. It returns the plugin's error, or the
// transport's when the plugin could not be asked; either way this side is
// closed. Later calls return the same error without calling the plugin
// again. Close does not stop the plugin process: whoever started it (the
// host's go-plugin client) kills it afterwards.
func (c *authClient) Close() error {
	c.closeOnce.Do(func() {
		c.closed.Store(true)
		ctx, cancel := context.WithTimeout(context.Background(), c.closeTimeout)
		defer cancel()
		if _, err := c.client.Close(ctx, &authv1.CloseRequest{}); err != nil {
			c.closeErr = fmt.Errorf("%v: Close: %w", c, authErrors.FromStatus(err))
		}
	})
	return c.closeErr
}

// fromStatus turns the status of a failed Credentials call back into an
// error matching the plugin's sentinels. The plugin's own errors name the
// request already; errors of the host's side (its context ended, the
// transport failed) get it here.
//
// A status that names no sentinel and is UNAVAILABLE (the plugin process is
// gone or unreachable), or CANCELLED while the caller's context is not (the
// host closed the connection to the plugin), comes from the transport: it
// wraps auth.ErrUnavailable, as a retry may work once the plugin is back, and
// not context.Canceled, which would tell the caller its own context ended.
func (c *authClient) fromStatus(ctx context.Context, req auth.Request, err error) error {
	st, _ := status.FromError(err)
	back := authErrors.FromCall(ctx, err)
	ended := rpcerr.CtxErr(ctx) != nil
	if !authTyped(st) && !ended && (st.Code() == codes.Unavailable || st.Code() == codes.Canceled) {
		return fmt.Errorf("%v: %v: the plugin is unreachable (%v): %w", c, req, back, auth.ErrUnavailable)
	}
	if ended {
		return fmt.Errorf("%v: %v: %w", c, req, back)
	}
	return fmt.Errorf("%v: %w", c, back)
}

// authTyped reports whether st names a sentinel of the auth protocol.
func authTyped(st *status.Status) bool {
	for _, d := range st.Details() {
		if info, ok := d.(*errdetails.ErrorInfo); ok && info.GetDomain() == authProtocol {
			return true
		}
	}
	return false
}

// String names the plugin: auth plugin "oauth".
func (c *authClient) String() string { return fmt.Sprintf("auth plugin %q", c.info.Name) }

// GoString keeps %#v short: plugin.authClient("oauth").
func (c *authClient) GoString() string { return fmt.Sprintf("plugin.authClient(%q)", c.info.Name) }

// LogValue logs the plugin's name and version.
func (c *authClient) LogValue() slog.Value {
	return slog.GroupValue(slog.String("kind", "auth"), slog.String("name", c.info.Name), slog.String("version", c.info.Version))
}
