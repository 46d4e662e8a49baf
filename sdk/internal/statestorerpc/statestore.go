// Package statestorerpc carries a statestore.Store over gRPC (service
// kmirror.plugin.statestore.v1.StateStore,
// sdk/proto/kmirror/plugin/statestore/v1): the plugin side serves a store,
// the host side is a statestore.Store that calls the plugin. Values travel
// in chunks well under gRPC's message limit, and the statestore sentinels
// keep their identity over the wire. sdk/plugin offers it through Serve and
// ClientPlugins; docs/design/plugin-protocols.md describes the protocol.
package statestorerpc

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"sync/atomic"
	"time"
	"unicode/utf8"

	goplugin "github.com/hashicorp/go-plugin"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/kmirror/kmirror/sdk/internal/pb/statestorev1"
	"github.com/kmirror/kmirror/sdk/internal/rpcerr"
	"github.com/kmirror/kmirror/sdk/statestore"
)

// stateStoreErrors are the statestore sentinels as they travel over the
// wire (kmirror.plugin.statestore.v1). The names are part of the protocol:
// never rename or reuse one.
var stateStoreErrors = rpcerr.NewTable("kmirror.plugin.statestore.v1",
	rpcerr.Sentinel{Name: "NOT_FOUND", Err: statestore.ErrNotFound, Code: codes.NotFound},
	rpcerr.Sentinel{Name: "VERSION_MISMATCH", Err: statestore.ErrVersionMismatch, Code: codes.Aborted},
	rpcerr.Sentinel{Name: "CLOSED", Err: statestore.ErrClosed, Code: codes.FailedPrecondition},
	rpcerr.Sentinel{Name: "LOCKED", Err: statestore.ErrLocked, Code: codes.FailedPrecondition},
	rpcerr.Sentinel{Name: "INVALID_KEY", Err: statestore.ErrInvalidKey, Code: codes.InvalidArgument},
	rpcerr.Sentinel{Name: "INVALID_VERSION", Err: statestore.ErrInvalidVersion, Code: codes.InvalidArgument},
	rpcerr.Sentinel{Name: "INVALID_ARGUMENT", Err: statestore.ErrInvalidArgument, Code: codes.InvalidArgument},
	rpcerr.Sentinel{Name: "LEASE_HELD", Err: statestore.ErrLeaseHeld, Code: codes.FailedPrecondition},
	rpcerr.Sentinel{Name: "LEASE_NOT_HELD", Err: statestore.ErrLeaseNotHeld, Code: codes.FailedPrecondition},
	rpcerr.Sentinel{Name: "INCOMPATIBLE", Err: statestore.ErrIncompatible, Code: codes.FailedPrecondition},
)

const (
	// chunkSize bounds the value bytes of one message, so that no message
	// comes near gRPC's default limit of 4 MiB whatever the values.
	chunkSize = 1 << 20
	// partOverhead is what a part costs beyond its key and value bytes
	// (tags, lengths, version, flag), counted generously.
	partOverhead = 32
	// listPageSize is how many entries the host's List asks for per page.
	listPageSize = 1000
	// infoTimeout bounds the Info call made when the client is created.
	infoTimeout = 10 * time.Second
)

// Plugin is the go-plugin Plugin of the state-store kind. On the plugin
// side Impl is the store served; on the host side Impl is unused and
// GRPCClient returns a statestore.Store that calls the plugin.
type Plugin struct {
	goplugin.NetRPCUnsupportedPlugin
	Impl statestore.Store
}

// GRPCServer registers the plugin side of the service, serving p.Impl.
func (p *Plugin) GRPCServer(_ *goplugin.GRPCBroker, s *grpc.Server) error {
	if p.Impl == nil {
		return errors.New("plugin: statestore: no implementation to serve")
	}
	statestorev1.RegisterStateStoreServer(s, &stateStoreServer{impl: p.Impl, leases: statestore.Leases(p.Impl)})
	return nil
}

// GRPCClient returns the host side: a statestore.Store that also implements
// statestore.Informer, statestore.Pager and statestore.Leaser. It reads the
// plugin's Info once and fails if it does not Validate.
func (p *Plugin) GRPCClient(ctx context.Context, _ *goplugin.GRPCBroker, conn *grpc.ClientConn) (any, error) {
	return newStateStoreClient(ctx, statestorev1.NewStateStoreClient(conn))
}

// stateStoreServer is the plugin side: it serves impl.
type stateStoreServer struct {
	statestorev1.UnimplementedStateStoreServer
	impl   statestore.Store
	leases statestore.Leaser // impl's native leases, or generic ones over it
}

func (s *stateStoreServer) Info(context.Context, *statestorev1.InfoRequest) (*statestorev1.InfoResponse, error) {
	info := statestore.InfoOf(s.impl)
	_, native := s.impl.(statestore.Leaser)
	if l, ok := s.impl.(interface{ LeasesNative() bool }); ok { // a lazy.Store
		native = l.LeasesNative()
	}
	return &statestorev1.InfoResponse{
		Name: info.Name, Version: info.Version,
		ProtocolMajor: int32(info.ProtocolMajor), ProtocolMinor: int32(info.ProtocolMinor),
		Shared: info.Shared, NativeLeases: info.NativeLeases || native,
	}, nil
}

func (s *stateStoreServer) Get(req *statestorev1.GetRequest, stream grpc.ServerStreamingServer[statestorev1.GetResponse]) error {
	e, err := s.impl.Get(stream.Context(), req.GetKey())
	if err != nil {
		return stateStoreErrors.ToStatus(err)
	}
	v := e.Value
	first := true
	for first || len(v) > 0 {
		n := min(len(v), chunkSize)
		msg := &statestorev1.GetResponse{Value: v[:n]}
		if first {
			msg.Version = e.Version
		}
		if err := stream.Send(msg); err != nil {
			return err
		}
		v, first = v[n:], false
	}
	return nil
}

func (s *stateStoreServer) Put(stream grpc.ClientStreamingServer[statestorev1.PutRequest, statestorev1.PutResponse]) error {
	first, err := stream.Recv()
	if errors.Is(err, io.EOF) {
		return status.Error(codes.InvalidArgument, "statestore: Put stream without a request")
	}
	if err != nil {
		return err
	}
	value := first.GetValue()
	for {
		msg, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return err
		}
		value = append(value, msg.GetValue()...)
	}
	v, err := s.impl.Put(stream.Context(), first.GetKey(), value, first.GetExpect())
	if err != nil {
		return stateStoreErrors.ToStatus(err)
	}
	return stream.SendAndClose(&statestorev1.PutResponse{Version: v})
}

func (s *stateStoreServer) Delete(ctx context.Context, req *statestorev1.DeleteRequest) (*statestorev1.DeleteResponse, error) {
	if err := s.impl.Delete(ctx, req.GetKey(), req.GetExpect()); err != nil {
		return nil, stateStoreErrors.ToStatus(err)
	}
	return &statestorev1.DeleteResponse{}, nil
}

func (s *stateStoreServer) ListPage(req *statestorev1.ListPageRequest, stream grpc.ServerStreamingServer[statestorev1.ListPageResponse]) error {
	page, more, err := statestore.ListPage(stream.Context(), s.impl, string(req.GetPrefix()), string(req.GetAfter()), int(req.GetLimit()))
	if err != nil {
		return stateStoreErrors.ToStatus(err)
	}
	msg, size := &statestorev1.ListPageResponse{}, 0
	for _, e := range page {
		v := e.Value
		first := true
		for first || len(v) > 0 {
			keyLen := 0
			if first {
				keyLen = len(e.Key)
			}
			room := chunkSize - size - keyLen - partOverhead
			if room < min(len(v), 1024) && len(msg.Parts) > 0 {
				// Too little room left in this message for the part to be
				// worth it: send it and start the next.
				if err := stream.Send(msg); err != nil {
					return err
				}
				msg, size = &statestorev1.ListPageResponse{}, 0
				room = chunkSize - keyLen - partOverhead
			}
			n := min(len(v), room)
			part := &statestorev1.EntryPart{Value: v[:n], Continued: n < len(v)}
			if first {
				part.Key, part.Version = e.Key, e.Version
			}
			msg.Parts = append(msg.Parts, part)
			size += keyLen + n + partOverhead
			v, first = v[n:], false
		}
	}
	msg.More = more
	return stream.Send(msg)
}

func (s *stateStoreServer) AcquireLease(ctx context.Context, req *statestorev1.AcquireLeaseRequest) (*statestorev1.LeaseResponse, error) {
	l, err := s.leases.AcquireLease(ctx, req.GetKey(), req.GetHolder(), time.Duration(req.GetTtlNanos()))
	return leaseResponse(l, err)
}

func (s *stateStoreServer) RenewLease(ctx context.Context, req *statestorev1.RenewLeaseRequest) (*statestorev1.LeaseResponse, error) {
	l, err := s.leases.RenewLease(ctx, req.GetKey(), req.GetHolder(), time.Duration(req.GetTtlNanos()))
	return leaseResponse(l, err)
}

func (s *stateStoreServer) ReleaseLease(ctx context.Context, req *statestorev1.ReleaseLeaseRequest) (*statestorev1.ReleaseLeaseResponse, error) {
	if err := s.leases.ReleaseLease(ctx, req.GetKey(), req.GetHolder()); err != nil {
		return nil, stateStoreErrors.ToStatus(err)
	}
	return &statestorev1.ReleaseLeaseResponse{}, nil
}

func (s *stateStoreServer) GetLease(ctx context.Context, req *statestorev1.GetLeaseRequest) (*statestorev1.LeaseResponse, error) {
	return leaseResponse(s.leases.GetLease(ctx, req.GetKey()))
}

func (s *stateStoreServer) Close(context.Context, *statestorev1.CloseRequest) (*statestorev1.CloseResponse, error) {
	if err := s.impl.Close(); err != nil {
		return nil, stateStoreErrors.ToStatus(err)
	}
	return &statestorev1.CloseResponse{}, nil
}

func leaseResponse(l statestore.Lease, err error) (*statestorev1.LeaseResponse, error) {
	if err != nil {
		return nil, stateStoreErrors.ToStatus(err)
	}
	return &statestorev1.LeaseResponse{
		Key: l.Key, Holder: l.Holder, Version: l.Version, TtlNanos: int64(l.TTL),
		RenewedAtUnixNanos: unixNanos(l.RenewedAt), ExpiresAtUnixNanos: unixNanos(l.ExpiresAt),
	}, nil
}

func unixNanos(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixNano()
}

func fromUnixNanos(n int64) time.Time {
	if n == 0 {
		return time.Time{}
	}
	return time.Unix(0, n)
}

// stateStoreClient is the host side: a statestore.Store over the gRPC
// client of a plugin.
type stateStoreClient struct {
	rpc    statestorev1.StateStoreClient
	info   statestore.Info // read once, when the client was made
	closed atomic.Bool
}

var (
	_ statestore.Store    = (*stateStoreClient)(nil)
	_ statestore.Informer = (*stateStoreClient)(nil)
	_ statestore.Pager    = (*stateStoreClient)(nil)
	_ statestore.Leaser   = (*stateStoreClient)(nil)
)

// newStateStoreClient reads the plugin's Info (bounded by infoTimeout) and
// returns the client, or an error if Info fails or does not Validate (the
// error then wraps statestore.ErrIncompatible).
func newStateStoreClient(ctx context.Context, rpc statestorev1.StateStoreClient) (*stateStoreClient, error) {
	ctx, cancel := context.WithTimeout(ctx, infoTimeout)
	defer cancel()
	resp, err := rpc.Info(ctx, &statestorev1.InfoRequest{})
	if err != nil {
		return nil, fmt.Errorf("statestore plugin: reading its Info: %w", stateStoreErrors.FromStatus(err))
	}
	info := statestore.Info{
		Name: resp.GetName(), Version: resp.GetVersion(),
		ProtocolMajor: int(resp.GetProtocolMajor()), ProtocolMinor: int(resp.GetProtocolMinor()),
		Shared: resp.GetShared(), NativeLeases: resp.GetNativeLeases(),
	}
	if err := info.Validate(); err != nil {
		return nil, fmt.Errorf("statestore plugin: refused: %w", err)
	}
	return &stateStoreClient{rpc: rpc, info: info}, nil
}

// fail turns an error of an RPC into the host's error: the plugin's text,
// the sentinels it matched, prefixed with the plugin's name.
func (c *stateStoreClient) fail(ctx context.Context, err error) error {
	return fmt.Errorf("statestore plugin %q: %w", c.info.Name, stateStoreErrors.FromCall(ctx, err))
}

// checkOpen fails with ErrClosed once Close was called, without an RPC (the
// plugin process may be gone by then).
func (c *stateStoreClient) checkOpen(op, key string) error {
	if c.closed.Load() {
		return fmt.Errorf("statestore plugin %q: %s %q: %w", c.info.Name, op, key, statestore.ErrClosed)
	}
	return nil
}

// checkKey is checkOpen plus the key's validity: keys travel as protobuf
// strings, which must be UTF-8, so an invalid key is refused here, with the
// error every store returns for it.
func (c *stateStoreClient) checkKey(op, key string) error {
	if err := c.checkOpen(op, key); err != nil {
		return err
	}
	if err := statestore.ValidateKey(key); err != nil {
		return fmt.Errorf("statestore plugin %q: %s: %w", c.info.Name, op, err)
	}
	return nil
}

// checkLease is checkKey plus the holder's validity (protobuf strings,
// again).
func (c *stateStoreClient) checkLease(op, key, holder string) error {
	if err := c.checkKey(op, key); err != nil {
		return err
	}
	if !utf8.ValidString(holder) {
		return fmt.Errorf("statestore plugin %q: %s %q: %w", c.info.Name, op, key, statestore.ValidateLease(holder, 1))
	}
	return nil
}

// Info implements statestore.Informer: the plugin's Info, as read when the
// client was made.
func (c *stateStoreClient) Info() statestore.Info { return c.info }

// Get implements statestore.Store.
func (c *stateStoreClient) Get(ctx context.Context, key string) (statestore.Entry, error) {
	if err := c.checkKey("get", key); err != nil {
		return statestore.Entry{}, err
	}
	stream, err := c.rpc.Get(ctx, &statestorev1.GetRequest{Key: key})
	if err != nil {
		return statestore.Entry{}, c.fail(ctx, err)
	}
	e := statestore.Entry{Key: key}
	for first := true; ; first = false {
		msg, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			if first {
				return statestore.Entry{}, fmt.Errorf("statestore plugin %q: get %q: the plugin sent no entry", c.info.Name, key)
			}
			break
		}
		if err != nil {
			return statestore.Entry{}, c.fail(ctx, err)
		}
		if first {
			e.Version = msg.GetVersion()
			e.Value = msg.GetValue()
			continue
		}
		e.Value = append(e.Value, msg.GetValue()...)
	}
	if e.Value == nil {
		e.Value = []byte{}
	}
	return e, nil
}

// Put implements statestore.Store. The value is sent in chunks of at most
// chunkSize bytes.
func (c *stateStoreClient) Put(ctx context.Context, key string, value []byte, expect int64) (int64, error) {
	if err := c.checkKey("put", key); err != nil {
		return 0, err
	}
	stream, err := c.rpc.Put(ctx)
	if err != nil {
		return 0, c.fail(ctx, err)
	}
	v := value
	for first := true; first || len(v) > 0; first = false {
		n := min(len(v), chunkSize)
		msg := &statestorev1.PutRequest{Value: v[:n]}
		if first {
			msg.Key, msg.Expect = key, expect
		}
		// Send marshals msg before it returns, so the caller's value is
		// not referenced afterwards. io.EOF: the plugin ended the call;
		// CloseAndRecv returns why.
		if err := stream.Send(msg); err != nil {
			if errors.Is(err, io.EOF) {
				break
			}
			return 0, c.fail(ctx, err)
		}
		v = v[n:]
	}
	resp, err := stream.CloseAndRecv()
	if err != nil {
		return 0, c.fail(ctx, err)
	}
	return resp.GetVersion(), nil
}

// Delete implements statestore.Store.
func (c *stateStoreClient) Delete(ctx context.Context, key string, expect int64) error {
	if err := c.checkKey("delete", key); err != nil {
		return err
	}
	if _, err := c.rpc.Delete(ctx, &statestorev1.DeleteRequest{Key: key, Expect: expect}); err != nil {
		return c.fail(ctx, err)
	}
	return nil
}

// List implements statestore.Store: pages of listPageSize entries, so that
// a large state never needs one large message.
func (c *stateStoreClient) List(ctx context.Context, prefix string) ([]statestore.Entry, error) {
	return statestore.ListAll(ctx, c, prefix, listPageSize)
}

// ListPage implements statestore.Pager.
func (c *stateStoreClient) ListPage(ctx context.Context, prefix, after string, limit int) ([]statestore.Entry, bool, error) {
	if err := c.checkOpen("list", prefix); err != nil {
		return nil, false, err
	}
	stream, err := c.rpc.ListPage(ctx, &statestorev1.ListPageRequest{Prefix: []byte(prefix), After: []byte(after), Limit: int32(min(limit, math.MaxInt32))})
	if err != nil {
		return nil, false, c.fail(ctx, err)
	}
	var (
		out       []statestore.Entry
		more      bool
		continued bool // the last part's value continues in the next part
	)
	for {
		msg, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, false, c.fail(ctx, err)
		}
		more = more || msg.GetMore()
		for _, p := range msg.GetParts() {
			switch {
			case continued && p.GetKey() == "":
				last := &out[len(out)-1]
				last.Value = append(last.Value, p.GetValue()...)
			case !continued && p.GetKey() != "":
				value := p.GetValue()
				if value == nil {
					value = []byte{}
				}
				out = append(out, statestore.Entry{Key: p.GetKey(), Value: value, Version: p.GetVersion()})
			default:
				return nil, false, fmt.Errorf("statestore plugin %q: list %q: malformed page: a part with key %q where a continuation was %v", c.info.Name, prefix, p.GetKey(), continued)
			}
			continued = p.GetContinued()
		}
	}
	if continued {
		return nil, false, fmt.Errorf("statestore plugin %q: list %q: page ended inside an entry's value", c.info.Name, prefix)
	}
	return out, more, nil
}

// AcquireLease implements statestore.Leaser.
func (c *stateStoreClient) AcquireLease(ctx context.Context, key, holder string, ttl time.Duration) (statestore.Lease, error) {
	if err := c.checkLease("acquire lease", key, holder); err != nil {
		return statestore.Lease{}, err
	}
	resp, err := c.rpc.AcquireLease(ctx, &statestorev1.AcquireLeaseRequest{Key: key, Holder: holder, TtlNanos: int64(ttl)})
	return c.lease(ctx, resp, err)
}

// RenewLease implements statestore.Leaser.
func (c *stateStoreClient) RenewLease(ctx context.Context, key, holder string, ttl time.Duration) (statestore.Lease, error) {
	if err := c.checkLease("renew lease", key, holder); err != nil {
		return statestore.Lease{}, err
	}
	resp, err := c.rpc.RenewLease(ctx, &statestorev1.RenewLeaseRequest{Key: key, Holder: holder, TtlNanos: int64(ttl)})
	return c.lease(ctx, resp, err)
}

// ReleaseLease implements statestore.Leaser.
func (c *stateStoreClient) ReleaseLease(ctx context.Context, key, holder string) error {
	if err := c.checkLease("release lease", key, holder); err != nil {
		return err
	}
	if _, err := c.rpc.ReleaseLease(ctx, &statestorev1.ReleaseLeaseRequest{Key: key, Holder: holder}); err != nil {
		return c.fail(ctx, err)
	}
	return nil
}

// GetLease implements statestore.Leaser.
func (c *stateStoreClient) GetLease(ctx context.Context, key string) (statestore.Lease, error) {
	if err := c.checkKey("get lease", key); err != nil {
		return statestore.Lease{}, err
	}
	resp, err := c.rpc.GetLease(ctx, &statestorev1.GetLeaseRequest{Key: key})
	return c.lease(ctx, resp, err)
}

func (c *stateStoreClient) lease(ctx context.Context, resp *statestorev1.LeaseResponse, err error) (statestore.Lease, error) {
	if err != nil {
		return statestore.Lease{}, c.fail(ctx, err)
	}
	return statestore.Lease{
		Key: resp.GetKey(), Holder: resp.GetHolder(), Version: resp.GetVersion(), TTL: time.Duration(resp.GetTtlNanos()),
		RenewedAt: fromUnixNanos(resp.GetRenewedAtUnixNanos()), ExpiresAt: fromUnixNanos(resp.GetExpiresAtUnixNanos()),
	}, nil
}

// Close implements statestore.Store: it closes the plugin's store once;
// later calls return nil, and every other method fails with ErrClosed
// without calling the plugin.
func (c *stateStoreClient) Close() error {
	if c.closed.Swap(true) {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), infoTimeout)
	defer cancel()
	if _, err := c.rpc.Close(ctx, &statestorev1.CloseRequest{}); err != nil {
		return c.fail(ctx, err)
	}
	return nil
}
