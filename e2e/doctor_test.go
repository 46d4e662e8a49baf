package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/kmirror/kmirror/e2e/kafkatest"
	"github.com/kmirror/kmirror/internal/testpki"
)

// doctorReport is `kmirror doctor -o json` (cmd/kmirror/internal/doctor.Report).
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

// doctorCluster is the YAML of a connection to the secured cluster's
// SASL_SSL listener as user with password, trusting the CA in caFile.
func doctorCluster(indent, user, password, caFile string) string {
	return strings.Join([]string{
		"bootstrap.servers: " + secured.BootstrapServers(kafkatest.SASLSSL),
		"security.protocol: SASL_SSL",
		"sasl.mechanism: SCRAM-SHA-512",
		"sasl.username: " + user,
		"sasl.password: " + password,
		"ssl.truststore.location: " + caFile,
	}, "\n"+indent) + "\n"
}

// runDoctor runs `kmirror doctor -o json` on a configuration whose
// destination and mirror source are the secured cluster, with the given
// connection keys, and the topics matching topics in the mirror's scope.
func runDoctor(t *testing.T, dst, src, topics string) (int, doctorReport, string) {
	t.Helper()
	dir := t.TempDir()
	cfg := "destination:\n  " + dst + "state:\n  dir: " + filepath.Join(dir, "state") +
		"\nmirrors:\n  - name: doctor\n    " + src + "    mirror.topics.include: \"" + topics + "\"\n"
	path := filepath.Join(dir, "kmirror.yaml")
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, kmirrorBinary(t), "doctor", "--config", path, "-o", "json")
	var out, errOut strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	code := 0
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		code = ee.ExitCode()
	case err != nil:
		t.Fatalf("kmirror doctor: %v", err)
	}
	var rep doctorReport
	if err := json.Unmarshal([]byte(out.String()), &rep); err != nil {
		t.Fatalf("kmirror doctor -o json: %v\n%s%s", err, out.String(), errOut.String())
	}
	for _, pw := range securedUsers {
		if strings.Contains(out.String(), pw) || strings.Contains(errOut.String(), pw) {
			t.Fatalf("a password appears in doctor's output:\n%s", out.String())
		}
	}
	return code, rep, out.String()
}

// result returns cluster i's result of step.
func (r doctorReport) result(t *testing.T, i int, step string) (string, string) {
	t.Helper()
	for _, c := range r.Clusters[i].Checks {
		if c.Step == step {
			return c.Result, c.Detail + " / fix: " + c.Fix
		}
	}
	return "", ""
}

// TestDoctorOnARealSecuredCluster: with a super user's credentials over
// SASL_SSL every step passes; a wrong password fails SASL, an untrusted CA
// fails the TLS chain, a missing ACL fails the source's ACL step and a user
// that is not a super user fails the destination's super-user step, each
// with its fix.
func TestDoctorOnARealSecuredCluster(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	topic := topicName(t, "doctor")
	sadm := superAdmin(t, secured)
	createTopic(t, ctx, sadm, topic, 1, 1, nil)
	ca := secured.CAFile()
	alice := securedUsers["alice"]
	scope := regexp.QuoteMeta(topic)

	// Good credentials: nothing fails (the test certificates may be close
	// to their end: a warning, not a failure).
	good := doctorCluster("  ", "alice", alice, ca)
	code, rep, out := runDoctor(t, good, doctorCluster("    ", "alice", alice, ca), scope)
	if code != 0 || rep.Failed != 0 {
		t.Fatalf("good credentials: exit %d\n%s", code, out)
	}
	for i, steps := range [][]string{
		{"dns", "tcp", "tls-chain", "tls-hostname", "sasl", "api-versions", "acls", "super-user", "idempotence", "transactions"},
		{"dns", "tcp", "tls-chain", "tls-hostname", "sasl", "api-versions", "acls", "max-message-bytes"},
	} {
		for _, step := range steps {
			if res, detail := rep.result(t, i, step); res != "pass" {
				t.Errorf("%s %s: %s %s", rep.Clusters[i].Name, step, res, detail)
			}
		}
	}

	// A wrong password: SASL fails on the destination.
	code, rep, out = runDoctor(t, doctorCluster("  ", "alice", "not-"+alice, ca), doctorCluster("    ", "alice", alice, ca), scope)
	if res, detail := rep.result(t, 0, "sasl"); code != 1 || res != "fail" || !strings.Contains(detail, "destination.sasl.username") {
		t.Errorf("wrong password: exit %d, sasl %s %s\n%s", code, res, detail, out)
	}

	// An untrusted CA: the chain fails on the source.
	other := testpki.New(t, "doctor-other-ca")
	code, rep, out = runDoctor(t, good, doctorCluster("    ", "alice", alice, other.CAFile), scope)
	if res, detail := rep.result(t, 1, "tls-chain"); code != 1 || res != "fail" || !strings.Contains(detail, "mirrors.doctor.ssl.truststore.location") {
		t.Errorf("untrusted CA: exit %d, tls-chain %s %s\n%s", code, res, detail, out)
	}

	// A missing ACL: bob may describe the topic but not read it.
	acl := kadm.NewACLs().Allow("User:bob").Topics(topic).Operations(kadm.OpDescribe).ResourcePatternType(kadm.ACLPatternLiteral)
	if res, err := sadm.CreateACLs(ctx, acl); err != nil || res[0].Err != nil {
		t.Fatalf("granting bob DESCRIBE on %s: %v %v", topic, err, res)
	}
	t.Cleanup(func() {
		cctx, ccancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer ccancel()
		_, _ = sadm.DeleteACLs(cctx, kadm.NewACLs().Allow("User:bob").Topics(topic).Operations(kadm.OpDescribe).ResourcePatternType(kadm.ACLPatternLiteral))
	})
	code, rep, out = runDoctor(t, good, doctorCluster("    ", "bob", securedUsers["bob"], ca), scope)
	if res, detail := rep.result(t, 1, "acls"); code != 1 || res != "fail" || !strings.Contains(detail, "READ") || !strings.Contains(detail, "--allow-principal User:bob") {
		t.Errorf("missing READ: exit %d, acls %s %s\n%s", code, res, detail, out)
	}

	// Not a super user on the destination.
	code, rep, out = runDoctor(t, doctorCluster("  ", "carol", securedUsers["carol"], ca), doctorCluster("    ", "alice", alice, ca), scope)
	if res, detail := rep.result(t, 0, "super-user"); code != 1 || res != "fail" || !strings.Contains(detail, "super.users") {
		t.Errorf("not a super user: exit %d, super-user %s %s\n%s", code, res, detail, out)
	}
}
