// Package authtest is the conformance suite of auth.Provider. Every
// implementation runs it from its own tests:
//
//	func TestConformance(t *testing.T) {
//		authtest.Run(t, func(t *testing.T) auth.Provider {
//			p, err := myprovider.New(myprovider.Config{...})
//			if err != nil {
//				t.Fatal(err)
//			}
//			return p
//		})
//	}
//
// open must return a new provider, configured so that Credentials succeeds
// for every mechanism its Info announces, with secrets (passwords, tokens)
// of at least MinSecretLen bytes so that the leak checks are meaningful.
// The suite closes it.
//
// Leaks is exported for implementation-specific tests: it reports whether
// any printed or encoded form of a value contains a secret.
package authtest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kmirror/kmirror/sdk/auth"
)

// MinSecretLen is the shortest secret the suite accepts from a provider
// under test: a shorter one could appear in output by coincidence.
const MinSecretLen = 8

// Run runs the conformance suite against providers made by open, one fresh
// provider per subtest.
func Run(t *testing.T, open func(t *testing.T) auth.Provider) {
	t.Helper()
	tests := []struct {
		name string
		fn   func(t *testing.T, p auth.Provider)
	}{
		{"InfoValid", testInfo},
		{"ServesAnnouncedMechanisms", testServes},
		{"RefusesOtherMechanisms", testRefuses},
		{"RejectsInvalidRequests", testInvalidRequests},
		{"RepeatedCallsStable", testStable},
		{"ExtensionsAreCopies", testExtensionCopies},
		{"SecretsNeverPrinted", testNoLeaks},
		{"ConcurrentCalls", testConcurrent},
		{"CanceledContext", testCanceled},
		{"ClosedProviderErrors", testClosed},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := open(t)
			t.Cleanup(func() {
				if err := p.Close(); err != nil {
					t.Errorf("Close: %v", err)
				}
			})
			tc.fn(t, p)
		})
	}
}

func info(t *testing.T, p auth.Provider) auth.Info {
	t.Helper()
	i := p.Info()
	if err := i.Validate(); err != nil {
		t.Fatalf("Info: %v", err)
	}
	return i
}

// requests returns a request for every announced mechanism, for both roles
// and for a named and the shared (unnamed) mirror.
func requests(t *testing.T, p auth.Provider) []auth.Request {
	var out []auth.Request
	for _, m := range info(t, p).Mechanisms {
		out = append(out,
			auth.Request{Mirror: "dc1-to-dc2", Role: auth.RoleSource, Mechanism: m},
			auth.Request{Mirror: "dc1-to-dc2", Role: auth.RoleDestination, Mechanism: m},
			auth.Request{Role: auth.RoleDestination, Mechanism: m},
		)
	}
	return out
}

func mustCredentials(t *testing.T, p auth.Provider, req auth.Request) auth.Credentials {
	t.Helper()
	c, err := p.Credentials(t.Context(), req)
	if err != nil {
		t.Fatalf("Credentials(%v): %v", req, err)
	}
	if err := c.Validate(req.Mechanism); err != nil {
		t.Fatalf("Credentials(%v) returned unusable credentials: %v", req, err)
	}
	if !c.Expiry.IsZero() && !c.Expiry.After(time.Now()) {
		t.Fatalf("Credentials(%v) returned credentials that expired at %v", req, c.Expiry)
	}
	return c
}

func wantErr(t *testing.T, what string, err, target error) {
	t.Helper()
	if !errors.Is(err, target) {
		t.Fatalf("%s: got error %v, want one wrapping %v", what, err, target)
	}
}

func testInfo(t *testing.T, p auth.Provider) {
	i := info(t, p)
	if i.ProtocolMinor > auth.ProtocolMinor {
		t.Fatalf("Info announces protocol %d.%d, newer than this SDK's %d.%d", i.ProtocolMajor, i.ProtocolMinor, auth.ProtocolMajor, auth.ProtocolMinor)
	}
	// Info must describe, not expose: mutating the returned slice must
	// not change the provider.
	i.Mechanisms[0] = "MUTATED"
	if again := p.Info(); slices.Contains(again.Mechanisms, "MUTATED") {
		t.Fatalf("modifying the slice returned by Info changed the provider's Info: %v", again.Mechanisms)
	}
}

func testServes(t *testing.T, p auth.Provider) {
	for _, req := range requests(t, p) {
		mustCredentials(t, p, req)
	}
}

func testRefuses(t *testing.T, p auth.Provider) {
	i := info(t, p)
	others := []string{"GSSAPI", "plain", "SCRAM-SHA-1", "AWS_MSK_IAM"}
	for _, m := range auth.Mechanisms() {
		if !i.Supports(m) {
			others = append(others, m)
		}
	}
	for _, m := range others {
		for _, role := range []string{auth.RoleSource, auth.RoleDestination} {
			req := auth.Request{Mirror: "m", Role: role, Mechanism: m}
			_, err := p.Credentials(t.Context(), req)
			wantErr(t, fmt.Sprintf("Credentials(%v), a mechanism the provider does not announce", req), err, auth.ErrUnsupportedMechanism)
			if !strings.Contains(err.Error(), m) {
				t.Fatalf("Credentials(%v): error %q does not name the mechanism", req, err)
			}
		}
	}
}

func testInvalidRequests(t *testing.T, p auth.Provider) {
	m := info(t, p).Mechanisms[0]
	bad := []auth.Request{
		{Mirror: "m", Role: "", Mechanism: m},
		{Mirror: "m", Role: "sideways", Mechanism: m},
		{Mirror: "m", Role: "SOURCE", Mechanism: m},
		{Mirror: "a/b", Role: auth.RoleSource, Mechanism: m},
		{Mirror: "m", Role: auth.RoleSource, Mechanism: ""},
	}
	for _, req := range bad {
		_, err := p.Credentials(t.Context(), req)
		wantErr(t, fmt.Sprintf("Credentials(%#v)", req), err, auth.ErrInvalidRequest)
	}
}

func equal(a, b auth.Credentials) bool {
	return a.Username == b.Username && a.Password == b.Password && a.Token == b.Token &&
		a.Expiry.Equal(b.Expiry) && maps.Equal(a.Extensions, b.Extensions)
}

func testStable(t *testing.T, p auth.Provider) {
	for _, req := range requests(t, p) {
		a := mustCredentials(t, p, req)
		b := mustCredentials(t, p, req)
		if !equal(a, b) {
			t.Fatalf("Credentials(%v) changed between two immediate calls (user %q → %q, expiry %v → %v): a provider must cache what it fetched", req, a.Username, b.Username, a.Expiry, b.Expiry)
		}
	}
}

func testExtensionCopies(t *testing.T, p auth.Provider) {
	const key = "kmirrorSuiteMutation"
	for _, req := range requests(t, p) {
		c := mustCredentials(t, p, req)
		if c.Extensions == nil {
			continue
		}
		for k := range c.Extensions {
			c.Extensions[k] = "mutated value"
		}
		c.Extensions[key] = "x"
		again := mustCredentials(t, p, req)
		if _, ok := again.Extensions[key]; ok {
			t.Fatalf("Credentials(%v): modifying the returned Extensions changed the provider's", req)
		}
		for k, v := range again.Extensions {
			if v == "mutated value" {
				t.Fatalf("Credentials(%v): modifying extension %q changed the provider's", req, k)
			}
		}
	}
}

func testNoLeaks(t *testing.T, p auth.Provider) {
	var secrets []string
	for _, req := range requests(t, p) {
		c := mustCredentials(t, p, req)
		for _, s := range []auth.Secret{c.Password, c.Token} {
			if !s.IsSet() {
				continue
			}
			if len(s.Reveal()) < MinSecretLen {
				t.Fatalf("Credentials(%v) returned a secret of %d bytes; configure the provider under test with secrets of at least %d bytes", req, len(s.Reveal()), MinSecretLen)
			}
			secrets = append(secrets, s.Reveal())
		}
		if leak := Leaks(c, secrets...); leak != "" {
			t.Fatalf("Credentials(%v): %s", req, leak)
		}
	}
	if len(secrets) == 0 {
		t.Fatalf("no announced mechanism returned a secret")
	}
	// Nor the provider itself: hosts log it.
	if leak := Leaks(p, secrets...); leak != "" {
		t.Fatalf("the provider (%T): %s", p, leak)
	}
	// Errors must not carry secrets either.
	m := info(t, p).Mechanisms[0]
	canceled, cancel := context.WithCancel(t.Context())
	cancel()
	errReqs := []struct {
		ctx context.Context
		req auth.Request
	}{
		{t.Context(), auth.Request{Mirror: "m", Role: auth.RoleSource, Mechanism: "GSSAPI"}},
		{t.Context(), auth.Request{Mirror: "m", Role: "sideways", Mechanism: m}},
		{canceled, auth.Request{Mirror: "m", Role: auth.RoleSource, Mechanism: m}},
	}
	for _, e := range errReqs {
		_, err := p.Credentials(e.ctx, e.req)
		if err == nil {
			t.Fatalf("Credentials(%#v) succeeded, want an error", e.req)
		}
		if leak := Leaks(err, secrets...); leak != "" {
			t.Fatalf("error of Credentials(%#v): %s", e.req, leak)
		}
	}
}

func testConcurrent(t *testing.T, p auth.Provider) {
	reqs := requests(t, p)
	want := make([]auth.Credentials, len(reqs))
	for i, req := range reqs {
		want[i] = mustCredentials(t, p, req)
	}
	const workers, calls = 16, 20
	errs := make(chan error, workers)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for n := range calls {
				i := (w + n) % len(reqs)
				c, err := p.Credentials(t.Context(), reqs[i])
				if err != nil {
					errs <- fmt.Errorf("worker %d call %d: Credentials(%v): %w", w, n, reqs[i], err)
					return
				}
				if !equal(c, want[i]) {
					errs <- fmt.Errorf("worker %d call %d: Credentials(%v) differ from a sequential call", w, n, reqs[i])
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

func testCanceled(t *testing.T, p auth.Provider) {
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	for _, req := range requests(t, p) {
		_, err := p.Credentials(ctx, req)
		wantErr(t, fmt.Sprintf("Credentials(%v) with a canceled context", req), err, context.Canceled)
	}
	// The provider still works afterwards.
	testServes(t, p)
}

func testClosed(t *testing.T, p auth.Provider) {
	reqs := requests(t, p)
	mustCredentials(t, p, reqs[0])
	if err := p.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	for _, req := range reqs {
		_, err := p.Credentials(t.Context(), req)
		wantErr(t, fmt.Sprintf("Credentials(%v) after Close", req), err, auth.ErrClosed)
	}
	if err := p.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if err := p.Info().Validate(); err != nil {
		t.Fatalf("Info after Close: %v", err)
	}
}

// Leaks renders v every way kmirror might print or encode it (fmt verbs
// %v %+v %#v %s %q, JSON, a log/slog JSON record, and Error() for errors)
// and returns a description of the first rendering that contains one of
// secrets, or "" if none does. Empty secrets are ignored.
func Leaks(v any, secrets ...string) string {
	renders := map[string]string{
		"%v":  fmt.Sprintf("%v", v),
		"%+v": fmt.Sprintf("%+v", v),
		"%#v": fmt.Sprintf("%#v", v),
		"%s":  fmt.Sprintf("%s", v),
		"%q":  fmt.Sprintf("%q", v),
	}
	if err, ok := v.(error); ok {
		renders["Error()"] = err.Error()
		for u := errors.Unwrap(err); u != nil; u = errors.Unwrap(u) {
			renders["Error() of a wrapped error"] += u.Error() + "\n"
		}
	} else if b, err := json.Marshal(v); err == nil {
		renders["JSON"] = string(b)
	}
	var buf bytes.Buffer
	slog.New(slog.NewJSONHandler(&buf, nil)).Info("value", "v", v)
	renders["slog JSON"] = buf.String()
	for _, how := range slices.Sorted(maps.Keys(renders)) {
		for _, s := range secrets {
			if s != "" && strings.Contains(renders[how], s) {
				return fmt.Sprintf("a secret appears in the %s rendering", how)
			}
		}
	}
	return ""
}
