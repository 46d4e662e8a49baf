package plugin

// The auth kind end to end through this package's public surface: a real
// plugin process (this test binary, re-executed) served with Serve and
// reached with Handshake and ClientPlugins. The RPC adaptor's own tests are
// in sdk/internal/authrpc.

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	goplugin "github.com/hashicorp/go-plugin"

	"github.com/kmirror/kmirror/sdk/auth"
)

// refToken is the reference provider's OAUTHBEARER token.
const refToken = "eyJhbGciOiJub25lIn0.eyJzdWIiOiJrbWlycm9yIn0.c2lnLXJlZg"

// authRef is the reference provider the plugin process serves: fixed
// credentials for PLAIN and OAUTHBEARER (sdk/internal/authrpc's tests hold
// the full one, which passes authtest in process and over the RPC).
type authRef struct {
	expiry time.Time
	// errs: Credentials for a mirror named here fails with that error.
	errs map[string]error
}

func newAuthRef() *authRef {
	return &authRef{expiry: time.Now().Add(time.Hour).Truncate(time.Second)}
}

func (p *authRef) Info() auth.Info {
	return auth.Info{Name: "ref", Version: "1.2.3", ProtocolMajor: auth.ProtocolMajor, ProtocolMinor: auth.ProtocolMinor,
		Mechanisms: []string{auth.MechanismPlain, auth.MechanismOAuthBearer}}
}

func (p *authRef) Credentials(ctx context.Context, req auth.Request) (auth.Credentials, error) {
	if err := ctx.Err(); err != nil {
		return auth.Credentials{}, fmt.Errorf("ref: %v: %w", req, err)
	}
	if err, ok := p.errs[req.Mirror]; ok {
		return auth.Credentials{}, err
	}
	if err := req.Validate(); err != nil {
		return auth.Credentials{}, fmt.Errorf("ref: %w", err)
	}
	switch req.Mechanism {
	case auth.MechanismPlain:
		return auth.Credentials{Username: "alice", Password: auth.NewSecret("ref-password-Zq9")}, nil
	case auth.MechanismOAuthBearer:
		return auth.Credentials{Username: "svc", Token: auth.NewSecret(refToken), Expiry: p.expiry}, nil
	}
	return auth.Credentials{}, fmt.Errorf("ref: %v: %w", req, auth.ErrUnsupportedMechanism)
}

func (p *authRef) Close() error { return nil }

// authChildEnv makes this test binary (TestMain) serve the reference provider; it
// is set only in the child processes TestAuthOutOfProcess starts.
const authChildEnv = "KMIRROR_SDK_TEST_AUTH_PLUGIN"

// TestMain makes this test binary, re-executed with authChildEnv set, the
// plugin binary of TestAuthOutOfProcess: it serves the reference provider
// with Serve instead of running tests.
func TestMain(m *testing.M) {
	if os.Getenv(authChildEnv) == "1" {
		ref := newAuthRef()
		ref.errs = map[string]error{"rejected": fmt.Errorf("ref: mirror %q: %w", "rejected", auth.ErrRejected)}
		Serve(ServeConfig{Auth: ref, Logger: hclog.NewNullLogger()})
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// TestAuthOutOfProcess runs the auth protocol between processes as a host
// will: go-plugin's client with ClientPlugins and AutoMTLS, a plugin main of
// one Serve call. Killing the plugin makes calls fail with ErrUnavailable.
func TestAuthOutOfProcess(t *testing.T) {
	t.Parallel()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	hs, err := Handshake(KindAuth)
	if err != nil {
		t.Fatal(err)
	}
	plugins, err := ClientPlugins(KindAuth)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe, "-test.run=^$", "-test.count=1")
	cmd.Env = append(os.Environ(), authChildEnv+"=1")
	client := goplugin.NewClient(&goplugin.ClientConfig{
		HandshakeConfig:  goplugin.HandshakeConfig{MagicCookieKey: hs.MagicCookieKey, MagicCookieValue: hs.MagicCookieValue},
		VersionedPlugins: plugins,
		Cmd:              cmd,
		AllowedProtocols: []goplugin.Protocol{goplugin.ProtocolGRPC},
		AutoMTLS:         true,
		Logger:           hclog.NewNullLogger(),
	})
	t.Cleanup(client.Kill)
	rpc, err := client.Client()
	if err != nil {
		t.Fatalf("starting the plugin: %v", err)
	}
	raw, err := rpc.Dispense(string(KindAuth))
	if err != nil {
		t.Fatalf("Dispense: %v", err)
	}
	p := raw.(auth.Provider)
	if v := client.NegotiatedVersion(); v != auth.ProtocolMajor {
		t.Fatalf("negotiated protocol %d, want %d", v, auth.ProtocolMajor)
	}
	if got := p.Info(); got.Name != "ref" || got.Version != "1.2.3" {
		t.Fatalf("Info = %+v", got)
	}
	req := auth.Request{Mirror: "m", Role: auth.RoleSource, Mechanism: auth.MechanismOAuthBearer}
	c, err := p.Credentials(t.Context(), req)
	if err != nil || c.Token.Reveal() != refToken || c.Expiry.IsZero() {
		t.Fatalf("Credentials(%v) = %+v, %v", req, c, err)
	}
	if _, err := p.Credentials(t.Context(), auth.Request{Mirror: "rejected", Role: auth.RoleSource, Mechanism: auth.MechanismPlain}); !errors.Is(err, auth.ErrRejected) {
		t.Fatalf("Credentials for a rejected mirror = %v, want ErrRejected", err)
	}
	// The plugin process dies: calls fail with ErrUnavailable.
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_, err = p.Credentials(t.Context(), req)
	if !errors.Is(err, auth.ErrUnavailable) || errors.Is(err, context.Canceled) {
		t.Fatalf("Credentials from a dead plugin = %v, want ErrUnavailable", err)
	}
	// The host kills its client (to restart the plugin): calls of the old
	// provider fail with ErrUnavailable too, not with the caller's
	// context.Canceled.
	client.Kill()
	_, err = p.Credentials(t.Context(), req)
	if !errors.Is(err, auth.ErrUnavailable) || errors.Is(err, context.Canceled) {
		t.Fatalf("Credentials after the host killed the client = %v, want ErrUnavailable and not context.Canceled", err)
	}
}
