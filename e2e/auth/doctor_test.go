package auth

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// doctorReport is the part of `kmirror doctor -o json` the test reads
// (cmd/kmirror/internal/doctor.Report).
type doctorReport struct {
	Clusters []struct {
		Name   string `json:"name"`
		Checks []struct {
			Step   string `json:"step"`
			Result string `json:"result"`
			Detail string `json:"detail"`
			Fix    string `json:"fix"`
		} `json:"checks"`
	} `json:"clusters"`
	Failed int `json:"failed"`
}

// `kmirror doctor` logs in over GSSAPI as the daemon does: the destination,
// with kmirror's keytab, passes the SASL step naming the principal; the
// source, with the stale keytab, fails it with the KDC's answer and a fix
// that names the keytab key. No key of either keytab is in its output.
func TestDoctorChecksTheGSSAPILogin(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cfg := "destination:\n" + gssapiKeys(destination, clientKeytab, false, "  ") +
		"state:\n  dir: " + filepath.Join(dir, "state") + "\n" +
		"mirrors:\n  - name: doctor\n" + gssapiKeys(source, staleKeytab, false, "    ") + "    mirror.topics.include: krb-none\n"
	path := filepath.Join(dir, "kmirror.yaml")
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, kmirrorBinary(t), "doctor", "--config", path, "-o", "json")
	var out, errOut strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errOut
	var ee *exec.ExitError
	if err := cmd.Run(); err == nil || !errors.As(err, &ee) {
		t.Fatalf("kmirror doctor with a stale keytab: %v; want a failing exit code\n%s%s", err, out.String(), errOut.String())
	}
	var rep doctorReport
	if err := json.Unmarshal([]byte(out.String()), &rep); err != nil {
		t.Fatalf("kmirror doctor -o json: %v\n%s%s", err, out.String(), errOut.String())
	}
	sasl := map[string]string{}
	for _, c := range rep.Clusters {
		for _, ch := range c.Checks {
			if ch.Step == "sasl" {
				sasl[c.Name] = ch.Result + ": " + ch.Detail + " | " + ch.Fix
			}
		}
	}
	if got := sasl["destination"]; !strings.HasPrefix(got, "pass: ") || !strings.Contains(got, "Kerberos principal "+clientPrincipal) {
		t.Errorf("destination's SASL check: %q; want a pass naming the principal", got)
	}
	if got := sasl["mirror doctor source"]; !strings.HasPrefix(got, "fail: ") || !strings.Contains(got, "PREAUTH_FAILED") || !strings.Contains(got, "sasl.kerberos.keytab") {
		t.Errorf("source's SASL check: %q; want a failure with the KDC's answer and a fix naming sasl.kerberos.keytab", got)
	}
	checkNoSecret(t, out.String()+errOut.String())
}
