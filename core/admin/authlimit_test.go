package admin_test

import (
	"context"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/kmirror/kmirror/core/admin"
	"github.com/kmirror/kmirror/core/config"
	"github.com/kmirror/kmirror/internal/testlog"
	"github.com/kmirror/kmirror/internal/testpki"
)

// from is an HTTP client whose connections come from the loopback address
// ip (127.0.0.0/8 all reach the listener).
func from(ip string) *http.Client {
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}, Timeout: 5 * time.Second}
	return &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DialContext: d.DialContext}}
}

// TestFailedAuthenticationsAreLimitedPerAddress: after AuthFailuresMax
// failed authentications from one address, that address is answered 429
// with Retry-After, even with the right token, and nothing reaches the
// controller; another address still gets in; the refusals are logged at a
// bounded rate.
func TestFailedAuthenticationsAreLimitedPerAddress(t *testing.T) {
	t.Parallel()
	h := start(t, nil)
	logs := &testlog.Buffer{}
	srv, err := admin.New(admin.Options{Controller: h.ctl, Logger: hclog.New(&hclog.LoggerOptions{Output: logs}), OpTimeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Start(context.Background(), h.cfg); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Stop(context.Background()) })
	url := "http://" + srv.Addr() + "/v1/mirrors"
	call := func(cl *http.Client, token string) (*http.Response, string) {
		req, _ := http.NewRequest("GET", url, nil)
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := cl.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var b strings.Builder
		buf := make([]byte, 4096)
		for {
			n, err := resp.Body.Read(buf)
			b.Write(buf[:n])
			if err != nil {
				break
			}
		}
		return resp, b.String()
	}
	guesser := from("127.0.0.7")
	for i := range admin.AuthFailuresMax {
		if resp, body := call(guesser, "guess"); resp.StatusCode != http.StatusUnauthorized {
			t.Fatalf("failure %d: %d %s", i+1, resp.StatusCode, body)
		}
	}
	for range 3 {
		resp, body := call(guesser, testToken)
		if resp.StatusCode != http.StatusTooManyRequests || !strings.Contains(body, `"code": "too_many_failures"`) || resp.Header.Get("Retry-After") == "" {
			t.Fatalf("after %d failures, the right token: %d %q %s", admin.AuthFailuresMax, resp.StatusCode, resp.Header.Get("Retry-After"), body)
		}
	}
	if calls := h.ctl.Calls(); len(calls) != 0 {
		t.Fatalf("a limited address reached the controller: %+v", calls)
	}
	if resp, body := call(from("127.0.0.8"), testToken); resp.StatusCode != http.StatusOK {
		t.Fatalf("another address with the right token: %d %s", resp.StatusCode, body)
	}
	if n := strings.Count(logs.String(), "too many failed authentications"); n != 1 {
		t.Errorf("%d log lines for 3 limited calls; want 1:\n%s", n, logs)
	}
}

// TestClientCertificateSubjectsAllowList: with admin.tls.client.subjects, a
// certificate the CA signed whose subject matches no pattern is refused
// with 403 and the subject named; one that matches (by CN or by the whole
// subject) gets in.
func TestClientCertificateSubjectsAllowList(t *testing.T) {
	t.Parallel()
	p := testpki.New(t, "operators CA")
	subjects, err := config.CompileRegexList([]string{"ops-.*", "CN=deploy,O=.*"})
	if err != nil {
		t.Fatal(err)
	}
	h := start(t, func(cfg *config.Config) {
		cfg.AdminTokenFile = ""
		cfg.AdminTLSCertFile, cfg.AdminTLSKeyFile, cfg.AdminTLSClientCAFile = p.Server.CertFile, p.Server.KeyFile, p.CAFile
		cfg.AdminTLSClientSubjects = subjects
	})
	for _, c := range []struct {
		cn   string
		code int
	}{{"ops-alice", http.StatusOK}, {"mallory", http.StatusForbidden}, {"ops", http.StatusForbidden}} {
		cert := p.IssueClient(t, c.cn)
		h.http = tlsClient(t, p, cert.CertFile, cert.KeyFile)
		code, body := h.do("GET", "/v1/mirrors", "", "")
		if code != c.code {
			t.Errorf("CN %s: %d %s; want %d", c.cn, code, body, c.code)
		}
		if c.code == http.StatusForbidden && (!strings.Contains(body, `"code": "forbidden"`) || !strings.Contains(body, "CN="+c.cn) || !strings.Contains(body, "admin.tls.client.subjects")) {
			t.Errorf("CN %s refused without naming the subject and the key: %s", c.cn, body)
		}
	}
	if !strings.Contains(h.logs.String(), "admin call refused") || !strings.Contains(h.logs.String(), "caller=cn=mallory") {
		t.Errorf("the refusal is not logged with the caller:\n%s", h.logs)
	}
}
