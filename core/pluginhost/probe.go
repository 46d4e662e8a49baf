package pluginhost

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/hashicorp/go-hclog"
	"google.golang.org/grpc"
	reflectionpb "google.golang.org/grpc/reflection/grpc_reflection_v1"

	"github.com/kmirror/kmirror/sdk/auth"
	"github.com/kmirror/kmirror/sdk/filter"
	"github.com/kmirror/kmirror/sdk/plugin"
	"github.com/kmirror/kmirror/sdk/statestore"
)

// Probed is what a plugin says of itself when it is launched and not
// configured (Probe).
type Probed struct {
	// ProtocolMajor is the protocol major version agreed in the handshake.
	ProtocolMajor int
	// InfoKnown says whether the fields below were read: a plugin that
	// builds its implementation from its configuration (ServeConfig's
	// constructors) describes itself only once configured, which a probe
	// never does; InfoError then says why.
	InfoKnown bool
	InfoError string
	// Name, Version and ProtocolMinor are from the kind's Info call.
	Name          string
	Version       string
	ProtocolMinor int
	// Schema is the configuration the plugin declares.
	Schema plugin.Schema
}

// serviceOf is the gRPC service of each kind (sdk/proto).
var serviceOf = map[plugin.Kind]string{
	plugin.KindAuth:       "kmirror.plugin.auth.v1.Provider",
	plugin.KindStateStore: "kmirror.plugin.statestore.v1.StateStore",
	plugin.KindFilter:     "kmirror.plugin.filter.v1.Filter",
}

// Probe launches spec's file once as a plugin of spec.Kind — verified
// against spec.SHA256 first, as every launch — reads what it says of
// itself, and stops it. It never configures the plugin: probing must not
// make it connect to a backend, lock a directory or fetch a token. The
// error says when the file is not a kmirror plugin at all, speaks another
// major version of the kind's protocol (both versions named), or is a
// plugin of another kind. opts.Command (default DefaultCommand),
// opts.StartTimeout and opts.Logger apply; ctx bounds the calls after
// the handshake.
func Probe(ctx context.Context, spec Spec, opts Options) (Probed, error) {
	label := spec.label()
	if spec.Path == "" || spec.SHA256 == "" {
		return Probed{}, fmt.Errorf("%s: Probe needs a path and its SHA-256", label)
	}
	if _, err := plugin.ProtocolMajor(spec.Kind); err != nil {
		return Probed{}, fmt.Errorf("%s: %w", label, err)
	}
	if opts.Command == nil {
		opts.Command = DefaultCommand
	}
	if opts.StartTimeout <= 0 {
		opts.StartTimeout = DefaultStartTimeout
	}
	if opts.Logger == nil {
		opts.Logger = hclog.NewNullLogger()
	}
	cmd, err := opts.Command(spec)
	if err != nil {
		return Probed{}, fmt.Errorf("%s: %w", label, err)
	}
	if err := verify(cmd.Path, spec.SHA256); err != nil {
		return Probed{}, fmt.Errorf("%s: not started: %w", label, err)
	}
	client, major, err := newClient(spec.Kind, cmd, strings.ToLower(spec.SHA256), onlyName{opts.Logger.ResetNamed(label)}, opts.StartTimeout)
	if err != nil {
		return Probed{}, fmt.Errorf("%s: %w", label, err)
	}
	defer client.Kill()
	rpc, err := handshake(client, spec.Kind, major)
	if err != nil {
		if !pluginVersionRE.MatchString(err.Error()) { // another major: handshake's error says so
			err = fmt.Errorf("%s is not a kmirror %s plugin (it did not complete the kmirror plugin handshake: a plugin built with the kmirror SDK's plugin.Serve, or one following docs/plugins.md, does): %w", cmd.Path, spec.Kind, err)
		}
		return Probed{}, fmt.Errorf("%s: %w", label, err)
	}
	p := Probed{ProtocolMajor: client.NegotiatedVersion()}
	ctx, cancel := context.WithTimeout(ctx, opts.StartTimeout)
	defer cancel()
	if services, err := listServices(ctx, rpc.Conn); err == nil && !slices.Contains(services, serviceOf[spec.Kind]) {
		return Probed{}, fmt.Errorf("%s: %s is a plugin but not a %s plugin: it serves %s, not %s", label, cmd.Path, spec.Kind, kmirrorKinds(services), serviceOf[spec.Kind])
	}
	// The host reads the schema at every launch: a plugin without the
	// configuration service would not start, so it is refused here too.
	if p.Schema, err = plugin.NewConfigClient(rpc.Conn).Schema(ctx); err != nil {
		return Probed{}, fmt.Errorf("%s: %w", label, err)
	}
	const notYet = "its Info is available once it is configured"
	raw, err := rpc.Dispense(string(spec.Kind))
	if err != nil {
		p.InfoError = notYet + " (" + err.Error() + ")"
		return p, nil
	}
	p.InfoKnown = true
	switch impl := raw.(type) {
	case auth.Provider:
		i := impl.Info()
		p.Name, p.Version, p.ProtocolMinor = i.Name, i.Version, i.ProtocolMinor
	case filter.Filter:
		i := impl.Info()
		p.Name, p.Version, p.ProtocolMinor = i.Name, i.Version, i.ProtocolMinor
	case statestore.Store:
		i := statestore.InfoOf(impl)
		if i == statestore.DefaultInfo() && len(p.Schema) > 0 {
			// What the SDK answers for a store it builds when configured.
			p.InfoKnown, p.InfoError = false, notYet
			return p, nil
		}
		p.Name, p.Version, p.ProtocolMinor = i.Name, i.Version, i.ProtocolMinor
	default:
		return Probed{}, fmt.Errorf("%s: %w", label, checkImpl(spec.Kind, raw))
	}
	return p, nil
}

// listServices asks the plugin's gRPC reflection service (go-plugin
// registers it) which services it serves; an error when it has none.
func listServices(ctx context.Context, conn grpc.ClientConnInterface) ([]string, error) {
	stream, err := reflectionpb.NewServerReflectionClient(conn).ServerReflectionInfo(ctx)
	if err != nil {
		return nil, err
	}
	defer func() { _ = stream.CloseSend() }()
	if err := stream.Send(&reflectionpb.ServerReflectionRequest{MessageRequest: &reflectionpb.ServerReflectionRequest_ListServices{}}); err != nil {
		return nil, err
	}
	resp, err := stream.Recv()
	if err != nil {
		return nil, err
	}
	list := resp.GetListServicesResponse()
	if list == nil {
		return nil, errors.New("no service list in the reflection answer")
	}
	var out []string
	for _, s := range list.GetService() {
		out = append(out, s.GetName())
	}
	return out, nil
}

// kmirrorKinds names the kmirror plugin services among services.
func kmirrorKinds(services []string) string {
	var out []string
	for _, k := range plugin.Kinds() {
		if slices.Contains(services, serviceOf[k]) {
			out = append(out, "the "+string(k)+" protocol ("+serviceOf[k]+")")
		}
	}
	if len(out) == 0 {
		return "no kmirror plugin protocol"
	}
	return strings.Join(out, " and ")
}
