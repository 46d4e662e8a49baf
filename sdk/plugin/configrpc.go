package plugin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/kmirror/kmirror/sdk/internal/pb/configv1"
	"github.com/kmirror/kmirror/sdk/internal/rpcerr"
)

var configErrors = rpcerr.NewTable("kmirror.plugin.config.v1",
	rpcerr.Sentinel{Name: "INVALID_CONFIG", Err: ErrInvalidConfig, Code: codes.InvalidArgument},
	rpcerr.Sentinel{Name: "NOT_CONFIGURED", Err: ErrNotConfigured, Code: codes.FailedPrecondition},
)

// configServer is the plugin side of kmirror.plugin.config.v1.Config.
type configServer struct {
	configv1.UnimplementedConfigServer
	schema Schema
	// build makes the implementation from a valid configuration; nil for
	// a plugin served with a ready implementation (it takes no keys).
	build func(ctx context.Context, name string, cfg Config) error

	mu         sync.Mutex
	configured bool
}

func (s *configServer) Schema(context.Context, *configv1.SchemaRequest) (*configv1.SchemaResponse, error) {
	resp := &configv1.SchemaResponse{}
	for _, f := range s.schema {
		resp.Fields = append(resp.Fields, &configv1.Field{Name: f.Name, Type: string(f.Type), Required: f.Required, Secret: f.Secret, Default: f.Default, Description: f.Description})
	}
	return resp, nil
}

func (s *configServer) Configure(ctx context.Context, req *configv1.ConfigureRequest) (*configv1.ConfigureResponse, error) {
	cfg := Config{}
	if raw := req.GetConfigJson(); len(raw) > 0 {
		if err := json.Unmarshal(raw, &cfg); err != nil {
			return nil, status.Errorf(codes.InvalidArgument, "plugin configuration is not a JSON object: %v", err)
		}
	}
	if err := s.schema.Validate(cfg); err != nil {
		return nil, configStatus(err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.configured && s.build != nil {
		return nil, status.Error(codes.FailedPrecondition, "plugin: already configured (Configure is called once per process)")
	}
	if s.build != nil {
		if err := s.build(ctx, req.GetName(), cfg); err != nil {
			return nil, configStatus(err)
		}
	}
	s.configured = true
	return &configv1.ConfigureResponse{}, nil
}

// configStatus sends a *ConfigError's problems as a google.rpc.BadRequest.
func configStatus(err error) error {
	var ce *ConfigError
	if !errors.As(err, &ce) {
		return configErrors.ToStatus(err)
	}
	st := status.New(codes.InvalidArgument, err.Error())
	br := &errdetails.BadRequest{}
	for _, p := range ce.Problems {
		br.FieldViolations = append(br.FieldViolations, &errdetails.BadRequest_FieldViolation{Field: p.Key, Description: p.Reason})
	}
	if d, derr := st.WithDetails(br, &errdetails.ErrorInfo{Reason: "INVALID_CONFIG", Domain: "kmirror.plugin.config.v1"}); derr == nil {
		st = d
	}
	return st.Err()
}

// ConfigClient is the host side of a plugin's configuration service.
type ConfigClient struct{ c configv1.ConfigClient }

// NewConfigClient returns the configuration client of the plugin behind
// conn (go-plugin's GRPCClient.Conn).
func NewConfigClient(conn grpc.ClientConnInterface) *ConfigClient {
	return &ConfigClient{c: configv1.NewConfigClient(conn)}
}

// Schema returns the configuration keys the plugin declares; an error when
// the plugin declares a schema a host cannot use.
func (c *ConfigClient) Schema(ctx context.Context) (Schema, error) {
	resp, err := c.c.Schema(ctx, &configv1.SchemaRequest{})
	if err != nil {
		return nil, fmt.Errorf("plugin: read configuration schema: %w", configErrors.FromStatus(err))
	}
	var s Schema
	for _, f := range resp.GetFields() {
		s = append(s, Field{Name: f.GetName(), Type: FieldType(f.GetType()), Required: f.GetRequired(), Secret: f.GetSecret(), Default: f.GetDefault(), Description: f.GetDescription()})
	}
	if err := s.Check(); err != nil {
		return nil, err
	}
	return s, nil
}

// Configure hands the plugin its configuration under name. A refused
// configuration comes back as a *ConfigError naming each key.
func (c *ConfigClient) Configure(ctx context.Context, name string, cfg Config) error {
	if cfg == nil {
		cfg = Config{}
	}
	raw, err := json.Marshal(cfg)
	if err != nil {
		return fmt.Errorf("plugin: encode configuration: %w", err)
	}
	_, err = c.c.Configure(ctx, &configv1.ConfigureRequest{Name: name, ConfigJson: raw})
	if err == nil {
		return nil
	}
	if st, ok := status.FromError(err); ok && st.Code() == codes.InvalidArgument {
		for _, d := range st.Details() {
			if br, ok := d.(*errdetails.BadRequest); ok && len(br.GetFieldViolations()) > 0 {
				ce := &ConfigError{}
				for _, v := range br.GetFieldViolations() {
					ce.Problems = append(ce.Problems, Problem{Key: v.GetField(), Reason: v.GetDescription()})
				}
				return ce
			}
		}
	}
	return configErrors.FromStatus(err)
}
