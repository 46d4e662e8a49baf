// Package filterrpc carries a filter.Filter over gRPC (service
// kmirror.plugin.filter.v1.Filter, sdk/proto/kmirror/plugin/filter/v1): the
// plugin side serves a filter, the host side is a filter.Filter that calls
// the plugin with batches of any size in bounded chunks. The filter
// sentinels keep their identity over the wire. sdk/plugin offers it through
// Serve and ClientPlugins; docs/plugins.md describes the protocol.
package filterrpc

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"sync"
	"time"

	goplugin "github.com/hashicorp/go-plugin"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/kmirror/kmirror/sdk/filter"
	"github.com/kmirror/kmirror/sdk/internal/pb/filterv1"
	"github.com/kmirror/kmirror/sdk/internal/rpcerr"
)

// The filter protocol (sdk/proto/kmirror/plugin/filter/v1/filter.proto)
// carries a filter.Filter: Info once at launch, then one bidirectional
// stream per Filter* call. The host sends the batch in chunks of at most
// filterChunkBytes, the plugin side gathers them, calls the filter once with
// the whole batch and answers one flag per input item, one response per
// chunk. Flags rather than items: a plugin cannot invent or change an item,
// and an answer is smaller than the question.

// filterDomain is the protocol's name, the domain of its typed errors.
const filterDomain = "kmirror.plugin.filter.v1"

// filterInfoTimeout bounds the Info call made when the host side is built.
const filterInfoTimeout = 10 * time.Second

// filterChunkBytes bounds the encoded size of one request message: well
// under gRPC's default 4 MiB limit, so that no message of a call is refused
// however large the batch. An item larger than this on its own travels alone
// in its message.
const filterChunkBytes = 1 << 20

// filterSentinels lists every sentinel of package filter with its wire name
// (the reasons filter.proto documents). Never rename or reuse a name.
var filterSentinels = []rpcerr.Sentinel{
	{Name: "INVALID_OUTPUT", Err: filter.ErrInvalidOutput, Code: codes.Internal},
	{Name: "UNAVAILABLE", Err: filter.ErrUnavailable, Code: codes.Unavailable},
	{Name: "INVALID_CONFIG", Err: filter.ErrInvalidConfig, Code: codes.FailedPrecondition},
	{Name: "INCOMPATIBLE", Err: filter.ErrIncompatible, Code: codes.FailedPrecondition},
	{Name: "UNSUPPORTED_KIND", Err: filter.ErrUnsupportedKind, Code: codes.Unimplemented},
}

// filterErrors carries the filter sentinels over the RPC.
var filterErrors = rpcerr.NewTable(filterDomain, filterSentinels...)

// Plugin is the go-plugin Plugin of the filter kind. On the plugin side
// Impl is the filter served; on the host side Impl is unused and GRPCClient
// returns a filter.Filter that calls the plugin.
type Plugin struct {
	goplugin.NetRPCUnsupportedPlugin
	Impl filter.Filter
}

// GRPCServer registers the plugin side of the service, serving p.Impl.
func (p *Plugin) GRPCServer(_ *goplugin.GRPCBroker, s *grpc.Server) error {
	if p.Impl == nil {
		return errors.New("plugin: no filter to serve")
	}
	filterv1.RegisterFilterServer(s, &filterServer{impl: p.Impl})
	return nil
}

// GRPCClient returns the host side: a filter.Filter. It reads the plugin's
// Info once, within filterInfoTimeout, and fails when the Info does not
// Validate (the error wraps filter.ErrIncompatible).
func (p *Plugin) GRPCClient(ctx context.Context, _ *goplugin.GRPCBroker, cc *grpc.ClientConn) (any, error) {
	return newFilterClient(ctx, filterv1.NewFilterClient(cc))
}

// filterCodec is what differs between the three kinds of items: their wire
// types and the methods that carry them. One value per kind (topicCodec,
// groupCodec, aclCodec) serves both sides.
type filterCodec[T filter.Item, PB proto.Message, Req any] struct {
	kind filter.Kind
	// toPB and fromPB convert one item.
	toPB   func(T) PB
	fromPB func(PB) T
	// request builds one request message; parse reads one.
	request func(mirror string, items []PB) *Req
	parse   func(*Req) (mirror string, items []PB)
	// open starts a call (host side).
	open func(context.Context, filterv1.FilterClient) (grpc.BidiStreamingClient[Req, filterv1.FilterResponse], error)
	// decide is the Go method (plugin side).
	decide func(filter.Filter, context.Context, string, []T) ([]T, error)
	// clone returns a copy of an item sharing nothing with it.
	clone func(T) T
}

var topicCodec = filterCodec[filter.Topic, *filterv1.Topic, filterv1.FilterTopicsRequest]{
	kind: filter.Topics,
	toPB: func(t filter.Topic) *filterv1.Topic {
		// Configs is only read, by the marshalling of the message, before
		// the call returns.
		return &filterv1.Topic{Name: t.Name, Partitions: t.Partitions, Internal: t.Internal, Configs: t.Configs}
	},
	fromPB: func(t *filterv1.Topic) filter.Topic {
		return filter.Topic{Name: t.GetName(), Partitions: t.GetPartitions(), Internal: t.GetInternal(), Configs: t.GetConfigs()}
	},
	request: func(mirror string, items []*filterv1.Topic) *filterv1.FilterTopicsRequest {
		return &filterv1.FilterTopicsRequest{Mirror: mirror, Topics: items}
	},
	parse: func(r *filterv1.FilterTopicsRequest) (string, []*filterv1.Topic) { return r.GetMirror(), r.GetTopics() },
	open: func(ctx context.Context, c filterv1.FilterClient) (grpc.BidiStreamingClient[filterv1.FilterTopicsRequest, filterv1.FilterResponse], error) {
		return c.FilterTopics(ctx)
	},
	decide: filter.Filter.FilterTopics,
	clone: func(t filter.Topic) filter.Topic {
		t.Configs = maps.Clone(t.Configs)
		return t
	},
}

var groupCodec = filterCodec[filter.Group, *filterv1.Group, filterv1.FilterGroupsRequest]{
	kind: filter.Groups,
	toPB: func(g filter.Group) *filterv1.Group {
		pb := &filterv1.Group{Id: g.ID, Kind: g.Kind, State: g.State}
		if !g.LastCommit.IsZero() {
			pb.LastCommit = timestamppb.New(g.LastCommit)
		}
		return pb
	},
	fromPB: func(g *filterv1.Group) filter.Group {
		out := filter.Group{ID: g.GetId(), Kind: g.GetKind(), State: g.GetState()}
		if g.LastCommit != nil {
			// Unset (a 1.0 host) stays the zero time: unknown.
			out.LastCommit = g.GetLastCommit().AsTime()
		}
		return out
	},
	request: func(mirror string, items []*filterv1.Group) *filterv1.FilterGroupsRequest {
		return &filterv1.FilterGroupsRequest{Mirror: mirror, Groups: items}
	},
	parse: func(r *filterv1.FilterGroupsRequest) (string, []*filterv1.Group) { return r.GetMirror(), r.GetGroups() },
	open: func(ctx context.Context, c filterv1.FilterClient) (grpc.BidiStreamingClient[filterv1.FilterGroupsRequest, filterv1.FilterResponse], error) {
		return c.FilterGroups(ctx)
	},
	decide: filter.Filter.FilterGroups,
	clone:  func(g filter.Group) filter.Group { return g },
}

var aclCodec = filterCodec[filter.ACLBinding, *filterv1.ACLBinding, filterv1.FilterACLsRequest]{
	kind: filter.ACLs,
	toPB: func(b filter.ACLBinding) *filterv1.ACLBinding {
		return &filterv1.ACLBinding{ResourceType: b.ResourceType, ResourceName: b.ResourceName, PatternType: b.PatternType,
			Principal: b.Principal, Host: b.Host, Operation: b.Operation, Permission: b.Permission}
	},
	fromPB: func(b *filterv1.ACLBinding) filter.ACLBinding {
		return filter.ACLBinding{ResourceType: b.GetResourceType(), ResourceName: b.GetResourceName(), PatternType: b.GetPatternType(),
			Principal: b.GetPrincipal(), Host: b.GetHost(), Operation: b.GetOperation(), Permission: b.GetPermission()}
	},
	request: func(mirror string, items []*filterv1.ACLBinding) *filterv1.FilterACLsRequest {
		return &filterv1.FilterACLsRequest{Mirror: mirror, Bindings: items}
	},
	parse: func(r *filterv1.FilterACLsRequest) (string, []*filterv1.ACLBinding) {
		return r.GetMirror(), r.GetBindings()
	},
	open: func(ctx context.Context, c filterv1.FilterClient) (grpc.BidiStreamingClient[filterv1.FilterACLsRequest, filterv1.FilterResponse], error) {
		return c.FilterACLs(ctx)
	},
	decide: filter.Filter.FilterACLs,
	clone:  func(b filter.ACLBinding) filter.ACLBinding { return b },
}

// Kinds on the wire.
var (
	kindToPB = map[filter.Kind]filterv1.Kind{
		filter.Topics: filterv1.Kind_KIND_TOPICS,
		filter.Groups: filterv1.Kind_KIND_GROUPS,
		filter.ACLs:   filterv1.Kind_KIND_ACLS,
	}
	kindFromPB = map[filterv1.Kind]filter.Kind{
		filterv1.Kind_KIND_TOPICS: filter.Topics,
		filterv1.Kind_KIND_GROUPS: filter.Groups,
		filterv1.Kind_KIND_ACLS:   filter.ACLs,
	}
)

// --- plugin side ---

// filterServer serves a filter.Filter.
type filterServer struct {
	filterv1.UnimplementedFilterServer
	impl filter.Filter
}

// info is impl's Info, read at each call: a filter built by a ServeConfig
// constructor has none until the host configured the plugin.
func (s *filterServer) info() filter.Info { return s.impl.Info() }

// Info implements filterv1.FilterServer: the Info the kinds served are
// checked against.
func (s *filterServer) Info(context.Context, *filterv1.InfoRequest) (*filterv1.InfoResponse, error) {
	info := s.info()
	resp := &filterv1.InfoResponse{Name: info.Name, Version: info.Version,
		ProtocolMajor: int32(info.ProtocolMajor), ProtocolMinor: int32(info.ProtocolMinor)}
	for _, k := range info.Kinds {
		pk, ok := kindToPB[k]
		if !ok {
			// An unknown kind travels as an unknown number, so the host's
			// Validate refuses the filter as it would in process.
			pk = filterv1.Kind(-1)
		}
		resp.Kinds = append(resp.Kinds, pk)
	}
	return resp, nil
}

// FilterTopics implements filterv1.FilterServer.
func (s *filterServer) FilterTopics(stream grpc.BidiStreamingServer[filterv1.FilterTopicsRequest, filterv1.FilterResponse]) error {
	return serveFilter(s, topicCodec, stream)
}

// FilterGroups implements filterv1.FilterServer.
func (s *filterServer) FilterGroups(stream grpc.BidiStreamingServer[filterv1.FilterGroupsRequest, filterv1.FilterResponse]) error {
	return serveFilter(s, groupCodec, stream)
}

// FilterACLs implements filterv1.FilterServer.
func (s *filterServer) FilterACLs(stream grpc.BidiStreamingServer[filterv1.FilterACLsRequest, filterv1.FilterResponse]) error {
	return serveFilter(s, aclCodec, stream)
}

// serveFilter is one call on the plugin side: it gathers every chunk, calls
// the filter once with the whole batch, and answers one response of flags
// per chunk.
func serveFilter[T filter.Item, PB proto.Message, Req any](s *filterServer, c filterCodec[T, PB, Req],
	stream grpc.BidiStreamingServer[Req, filterv1.FilterResponse]) error {
	info := s.info()
	if !info.Handles(c.kind) {
		return filterErrors.ToStatus(fmt.Errorf("%w: filter %q was asked about %s, and its Info lists only %v",
			filter.ErrUnsupportedKind, info.Name, c.kind, info.Kinds))
	}
	var (
		mirror string
		in     []T
		counts []int // items per chunk
	)
	for {
		req, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return err // already a status: the call was canceled or broke
		}
		m, items := c.parse(req)
		if len(counts) == 0 {
			mirror = m
		}
		counts = append(counts, len(items))
		for _, it := range items {
			in = append(in, c.fromPB(it))
		}
	}
	if len(counts) == 0 {
		return nil // nothing asked, nothing to answer
	}
	out, err := c.decide(s.impl, stream.Context(), mirror, in)
	if err != nil {
		return filterErrors.ToStatus(err)
	}
	kept, err := filter.Kept(in, out)
	if err != nil {
		return filterErrors.ToStatus(fmt.Errorf("filter %q on %d %s of mirror %q: %w", info.Name, len(in), c.kind, mirror, err))
	}
	for _, n := range counts {
		if err := stream.Send(&filterv1.FilterResponse{Kept: kept[:n]}); err != nil {
			return err
		}
		kept = kept[n:]
	}
	return nil
}

// --- host side ---

// filterClient is a filter.Filter served by a plugin.
type filterClient struct {
	rpc        filterv1.FilterClient
	info       filter.Info // read once, validated
	chunkBytes int         // filterChunkBytes; smaller in tests
}

// newFilterClient reads and validates the plugin's Info.
func newFilterClient(ctx context.Context, rpc filterv1.FilterClient) (*filterClient, error) {
	ctx, cancel := context.WithTimeout(ctx, filterInfoTimeout)
	defer cancel()
	resp, err := rpc.Info(ctx, &filterv1.InfoRequest{})
	if err != nil {
		return nil, fmt.Errorf("filter plugin: Info: %w", filterErrors.FromStatus(err))
	}
	info := filter.Info{Name: resp.GetName(), Version: resp.GetVersion(),
		ProtocolMajor: int(resp.GetProtocolMajor()), ProtocolMinor: int(resp.GetProtocolMinor())}
	for _, pk := range resp.GetKinds() {
		k, ok := kindFromPB[pk]
		if !ok {
			k = filter.Kind(pk.String()) // unknown: Validate names it and refuses
		}
		info.Kinds = append(info.Kinds, k)
	}
	if err := info.Validate(); err != nil {
		return nil, fmt.Errorf("filter plugin: refused: %w", err)
	}
	return &filterClient{rpc: rpc, info: info, chunkBytes: filterChunkBytes}, nil
}

// Info implements filter.Filter: the Info read at launch (a copy).
func (c *filterClient) Info() filter.Info {
	i := c.info
	i.Kinds = slices.Clone(c.info.Kinds)
	return i
}

// FilterTopics implements filter.Filter.
func (c *filterClient) FilterTopics(ctx context.Context, mirror string, in []filter.Topic) ([]filter.Topic, error) {
	return callFilter(ctx, c, topicCodec, mirror, in)
}

// FilterGroups implements filter.Filter.
func (c *filterClient) FilterGroups(ctx context.Context, mirror string, in []filter.Group) ([]filter.Group, error) {
	return callFilter(ctx, c, groupCodec, mirror, in)
}

// FilterACLs implements filter.Filter.
func (c *filterClient) FilterACLs(ctx context.Context, mirror string, in []filter.ACLBinding) ([]filter.ACLBinding, error) {
	return callFilter(ctx, c, aclCodec, mirror, in)
}

// callFilter is one call on the host side. A kind the plugin does not
// announce passes through without an RPC. Otherwise the batch goes out in
// chunks while the answers come back; the items returned are copies of the
// input items whose flag is set, checked with filter.VerifyOutput.
func callFilter[T filter.Item, PB proto.Message, Req any](ctx context.Context, c *filterClient, codec filterCodec[T, PB, Req],
	mirror string, in []T) ([]T, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("filter plugin %q: %w", c.info.Name, err)
	}
	if !c.info.Handles(codec.kind) {
		out := make([]T, len(in))
		for i, x := range in {
			out[i] = codec.clone(x)
		}
		return out, nil
	}
	reqs, counts := chunk(codec, mirror, in, c.chunkBytes)

	caller := ctx
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stream, err := codec.open(ctx, c.rpc)
	if err != nil {
		return nil, fmt.Errorf("filter plugin %q: %w", c.info.Name, filterErrors.FromCall(caller, err))
	}
	// The sender runs while the answers are read, so that a plugin that
	// answers each chunk as it comes never blocks on flow control. It is
	// waited for before returning. Its errors are not kept: when a Send
	// fails the call has ended, and Recv returns why (the plugin's status,
	// or the client's own error such as a canceled context).
	var wg sync.WaitGroup
	wg.Go(func() {
		for _, r := range reqs {
			if stream.Send(r) != nil {
				return
			}
		}
		_ = stream.CloseSend()
	})
	kept, err := receiveKept(stream, counts)
	if err != nil {
		cancel() // ends the call, so a Send blocked on flow control returns
	}
	wg.Wait()
	if err != nil {
		return nil, fmt.Errorf("filter plugin %q: %w", c.info.Name, filterErrors.FromCall(caller, err))
	}
	var out []T
	for i, k := range kept {
		if k {
			out = append(out, codec.clone(in[i]))
		}
	}
	if err := filter.VerifyOutput(in, out); err != nil {
		return nil, fmt.Errorf("filter plugin %q: %w", c.info.Name, err)
	}
	return out, nil
}

// chunk splits in into request messages of at most limit encoded bytes
// (except for an item larger than that on its own), at least one even for
// an empty batch. counts holds the number of items of each.
func chunk[T filter.Item, PB proto.Message, Req any](codec filterCodec[T, PB, Req], mirror string, in []T, limit int) (reqs []*Req, counts []int) {
	base := 0
	if mirror != "" {
		base = protowire.SizeTag(1) + protowire.SizeBytes(len(mirror))
	}
	var (
		items []PB
		size  = base
	)
	for _, x := range in {
		p := codec.toPB(x)
		n := protowire.SizeTag(2) + protowire.SizeBytes(proto.Size(p))
		if len(items) > 0 && size+n > limit {
			reqs, counts = append(reqs, codec.request(mirror, items)), append(counts, len(items))
			items, size = nil, base
		}
		items, size = append(items, p), size+n
	}
	return append(reqs, codec.request(mirror, items)), append(counts, len(items))
}

// receiveKept reads one response per chunk, checks that each holds one
// flag per item of its chunk and that the call then ends, and returns the
// flags of the whole batch. Errors are the plugin's status or wrap
// filter.ErrInvalidOutput.
func receiveKept(stream grpc.ClientStream, counts []int) ([]bool, error) {
	var kept []bool
	for i, n := range counts {
		resp := new(filterv1.FilterResponse)
		err := stream.RecvMsg(resp)
		if errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("%w: the plugin answered %d of %d request messages", filter.ErrInvalidOutput, i, len(counts))
		}
		if err != nil {
			return nil, err
		}
		if len(resp.GetKept()) != n {
			return nil, fmt.Errorf("%w: the plugin answered %d flags to request message %d of %d, which had %d items",
				filter.ErrInvalidOutput, len(resp.GetKept()), i+1, len(counts), n)
		}
		kept = append(kept, resp.GetKept()...)
	}
	switch err := stream.RecvMsg(new(filterv1.FilterResponse)); {
	case errors.Is(err, io.EOF):
		return kept, nil
	case err != nil:
		return nil, err
	}
	return nil, fmt.Errorf("%w: the plugin answered more than the %d request messages", filter.ErrInvalidOutput, len(counts))
}
