package authtest_test

import (
	"context"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kmirror/kmirror/sdk/auth"
	"github.com/kmirror/kmirror/sdk/auth/authtest"
)

// brokenEnv names the defect the provider of TestConformance has; the
// parent test runs this test binary once per defect and expects the suite
// to fail.
const brokenEnv = "KMIRROR_AUTHTEST_BROKEN"

// fixed is a provider with fixed credentials: PLAIN and OAUTHBEARER. With a
// defect set it breaks one rule of the contract.
type fixed struct {
	defect string
	closed atomic.Bool
	calls  atomic.Int64
	ext    map[string]string
	expiry time.Time
}

const (
	password = "fixed-password-123"
	token    = "fixed.token.value"
)

func (f *fixed) Info() auth.Info {
	return auth.Info{Name: "fixed", ProtocolMajor: auth.ProtocolMajor, ProtocolMinor: auth.ProtocolMinor,
		Mechanisms: []string{auth.MechanismPlain, auth.MechanismOAuthBearer}}
}

func (f *fixed) Credentials(ctx context.Context, req auth.Request) (auth.Credentials, error) {
	if err := ctx.Err(); err != nil && f.defect != "ignores-context" {
		return auth.Credentials{}, fmt.Errorf("fixed: %v: %w", req, err)
	}
	if f.closed.Load() && f.defect != "ignores-close" {
		return auth.Credentials{}, fmt.Errorf("fixed: %v: %w", req, auth.ErrClosed)
	}
	if err := req.Validate(); err != nil {
		if f.defect == "leaky-error" {
			return auth.Credentials{}, fmt.Errorf("fixed: user alice password %s: %w", password, err)
		}
		return auth.Credentials{}, fmt.Errorf("fixed: %w", err)
	}
	n := f.calls.Add(1)
	switch req.Mechanism {
	case auth.MechanismPlain:
		return auth.Credentials{Username: "alice", Password: auth.NewSecret(password)}, nil
	case auth.MechanismOAuthBearer:
		tok := token
		if f.defect == "uncached" {
			tok = fmt.Sprintf("%s%d", token, n)
		}
		ext := maps.Clone(f.ext)
		if f.defect == "shared-extensions" {
			ext = f.ext
		}
		return auth.Credentials{Token: auth.NewSecret(tok), Expiry: f.expiry, Extensions: ext}, nil
	}
	return auth.Credentials{}, fmt.Errorf("fixed: %s: %w", req.Mechanism, auth.ErrUnsupportedMechanism)
}

func (f *fixed) Close() error {
	f.closed.Store(true)
	return nil
}

// TestConformance proves the suite passes a correct provider (and, run by
// TestSuiteCatchesDefects with a defect set, that it fails a broken one).
func TestConformance(t *testing.T) {
	authtest.Run(t, func(t *testing.T) auth.Provider {
		return &fixed{defect: os.Getenv(brokenEnv), ext: map[string]string{"traceId": "abc"}, expiry: time.Now().Add(time.Hour)}
	})
}

func TestSuiteCatchesDefects(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	defects := map[string]string{
		"leaky-error":       "SecretsNeverPrinted",
		"uncached":          "RepeatedCallsStable",
		"shared-extensions": "ExtensionsAreCopies",
		"ignores-context":   "CanceledContext",
		"ignores-close":     "ClosedProviderErrors",
	}
	for defect, subtest := range defects {
		t.Run(defect, func(t *testing.T) {
			cmd := exec.CommandContext(t.Context(), exe, "-test.run=^TestConformance$", "-test.count=1")
			cmd.Env = append(os.Environ(), brokenEnv+"="+defect)
			out, err := cmd.CombinedOutput()
			if err == nil {
				t.Fatalf("the suite passed a provider with defect %q:\n%s", defect, out)
			}
			if want := "--- FAIL: TestConformance/" + subtest; !strings.Contains(string(out), want) {
				t.Fatalf("defect %q: output lacks %q:\n%s", defect, want, out)
			}
		})
	}
}

func TestLeaks(t *testing.T) {
	type plain struct{ Pass string }
	if leak := authtest.Leaks(plain{Pass: "topsecret-1"}, "topsecret-1"); leak == "" {
		t.Fatal("Leaks missed a secret in a plain string field")
	}
	if leak := authtest.Leaks(fmt.Errorf("wrap: %w", fmt.Errorf("inner topsecret-1")), "topsecret-1"); leak == "" {
		t.Fatal("Leaks missed a secret in a wrapped error")
	}
	if leak := authtest.Leaks(struct{ Pass auth.Secret }{auth.NewSecret("topsecret-1")}, "topsecret-1"); leak != "" {
		t.Fatalf("Leaks reported a Secret field: %s", leak)
	}
	if leak := authtest.Leaks("anything", ""); leak != "" {
		t.Fatalf("an empty secret counted as a leak: %s", leak)
	}
}
