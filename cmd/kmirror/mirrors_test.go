package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/kmirror/kmirror/core/admin"
	"github.com/kmirror/kmirror/core/admin/admintest"
	"github.com/kmirror/kmirror/core/config"
	"github.com/kmirror/kmirror/core/config/security"
	"github.com/kmirror/kmirror/internal/testpki"
)

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// adminDaemon is an admin API server in the test process, in front of a fake
// controller, and the configuration file a `kmirror` command uses to reach
// it (as the daemon's own file would).
type adminDaemon struct {
	ctl      *admintest.Controller
	logs     *lockedBuffer
	cfg      *config.Config
	cfgPath  string // the configuration file, naming the bound address
	stateDir string
}

// startAdmin serves the admin API for the configuration validBase plus
// extra, whose admin.address is filled in with a free loopback port.
func startAdmin(t *testing.T, extra string) *adminDaemon {
	t.Helper()
	stateDir := t.TempDir()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	yaml := fmt.Sprintf(`
destination:
  bootstrap.servers: 127.0.0.1:9092
state:
  dir: %s
admin.address: %s
mirrors:
  - name: dc1
    bootstrap.servers: src-a:9092,src-b:9092
%s`, stateDir, addr, extra)
	d := &adminDaemon{ctl: &admintest.Controller{}, logs: &lockedBuffer{}, stateDir: stateDir}
	d.cfgPath = writeFile(t, "kmirror.yaml", yaml)
	d.cfg, err = config.Load(config.Source{Path: d.cfgPath})
	if err != nil {
		t.Fatalf("test configuration: %v", err)
	}
	now := time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)
	d.ctl.StatusValue = admin.Status{Mirrors: []admin.MirrorStatus{{
		Name:  "dc1",
		Notes: []string{"metadata sync is done by daemon h/1/x"},
		Partitions: []admin.PartitionStatus{
			{Mirror: "dc1", Topic: "orders", Partition: 0, State: "MIRRORING", Mode: "preserve", SourceHighWatermark: 42, DestinationEndOffset: 42, Lag: 0, LastMirroredOffset: 41, UpdatedAt: now},
			{Mirror: "dc1", Topic: "orders", Partition: 1, State: "PAUSED", Mode: "preserve", SourceHighWatermark: 10, Lag: 3, LastMirroredOffset: 6, UpdatedAt: now},
			{Mirror: "dc1", Topic: "payments", Partition: 0, State: "FAILED", Mode: "map", Retry: "NonRetryable", LastError: "source log truncated below the resume point", UpdatedAt: now,
				Notes: []string{"map mode from source offset 7: compaction gaps"}},
		},
	}}}
	srv, err := admin.New(admin.Options{Controller: d.ctl, Logger: hclog.New(&hclog.LoggerOptions{Output: d.logs, Level: hclog.Info})})
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Start(context.Background(), d.cfg); err != nil {
		t.Fatalf("starting the admin API: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Stop(ctx)
	})
	return d
}

func (d *adminDaemon) token(t *testing.T) string {
	t.Helper()
	tok, err := security.ReadAdminToken(d.cfg.AdminTokenPath())
	if err != nil {
		t.Fatal(err)
	}
	return tok.Reveal()
}

// noSecret fails when the token appears in any output.
func (d *adminDaemon) noSecret(t *testing.T, outputs ...string) {
	t.Helper()
	tok := d.token(t)
	for _, o := range append(outputs, d.logs.String()) {
		if strings.Contains(o, tok) {
			t.Fatalf("the admin token appears in output or logs:\n%s", o)
		}
	}
}

func TestMirrorsListAndDescribeUseTheDaemonsConfig(t *testing.T) {
	t.Parallel()
	d := startAdmin(t, "")
	// The default token in state.dir, created by the daemon, is found
	// through the same file.
	code, out, errOut := kmirror(t, nil, "mirrors", "list", "--config", d.cfgPath)
	if code != exitOK {
		t.Fatalf("mirrors list: exit %d\n%s", code, errOut)
	}
	if !regexp.MustCompile(`dc1\s+src-a:9092,src-b:9092\s+3\s+MIRRORING=1 PAUSED=1 FAILED=1`).MatchString(out) {
		t.Fatalf("mirrors list:\n%s", out)
	}
	code, out, _ = kmirror(t, nil, "mirrors", "list", "--config", d.cfgPath, "--json")
	var list admin.MirrorList
	if code != exitOK || json.Unmarshal([]byte(out), &list) != nil || len(list.Mirrors) != 1 || list.Mirrors[0].Partitions["PAUSED"] != 1 || list.Mirrors[0].TotalPartitions != 3 {
		t.Fatalf("mirrors list --json: exit %d\n%s", code, out)
	}

	code, out, errOut = kmirror(t, nil, "mirrors", "describe", "--config", d.cfgPath)
	if code != exitOK || !regexp.MustCompile(`dc1\s+orders\s+1\s+PAUSED\s+preserve\s+10\s+`).MatchString(out) || !strings.Contains(out, "source log truncated") {
		t.Fatalf("mirrors describe: exit %d\n%s%s", code, out, errOut)
	}
	if !strings.Contains(out, "note: mirror dc1: metadata sync is done by daemon h/1/x") || !strings.Contains(out, "note: dc1 payments/0: map mode from source offset 7: compaction gaps") {
		t.Fatalf("mirrors describe does not print the notes:\n%s", out)
	}
	code, out, _ = kmirror(t, nil, "mirrors", "describe", "--config", d.cfgPath, "--mirror", "dc1", "--failed")
	if code != exitOK || !strings.Contains(out, "NonRetryable") || strings.Contains(out, "PAUSED") {
		t.Fatalf("mirrors describe --failed: exit %d\n%s", code, out)
	}
	code, out, _ = kmirror(t, nil, "mirrors", "describe", "--config", d.cfgPath, "--mirror", "dc1", "--json")
	var desc struct {
		Mirrors    []admin.MirrorStatus    `json:"mirrors"`
		Partitions []admin.PartitionStatus `json:"partitions"`
	}
	if code != exitOK || json.Unmarshal([]byte(out), &desc) != nil || len(desc.Mirrors) != 1 || len(desc.Partitions) != 3 || desc.Partitions[0].LastMirroredOffset != 41 {
		t.Fatalf("mirrors describe --json: exit %d\n%s", code, out)
	}
	code, _, errOut = kmirror(t, nil, "mirrors", "describe", "--config", d.cfgPath, "--mirror", "nope")
	if code != exitNotFound || !strings.Contains(errOut, `"nope"`) || !strings.Contains(errOut, "kmirror mirrors list") {
		t.Fatalf("unknown mirror: exit %d\n%s", code, errOut)
	}
	d.noSecret(t, out, errOut)
	if !strings.Contains(d.logs.String(), "caller=token") {
		t.Errorf("the daemon did not log the caller:\n%s", d.logs)
	}
}

func TestMirrorsActionsSendTheirTopics(t *testing.T) {
	t.Parallel()
	d := startAdmin(t, "")
	d.ctl.Update(func(c *admintest.Controller) {
		c.Result = admin.OpResult{Message: "2 partition(s) paused", Partitions: c.StatusValue.Mirrors[0].Partitions[:2]}
	})
	cases := []struct {
		args []string
		want admintest.Call
	}{
		{[]string{"pause", "--mirror", "dc1", "--topics", "orders.*,pay.*"}, admintest.Call{Op: "pause", Mirror: "dc1", Topics: []string{"orders.*", "pay.*"}}},
		{[]string{"resume", "--mirror", "dc1"}, admintest.Call{Op: "resume", Mirror: "dc1"}},
		{[]string{"stop", "--mirror", "dc1", "--topics", "orders", "--topics", "audit"}, admintest.Call{Op: "stop", Mirror: "dc1", Topics: []string{"orders", "audit"}}},
		{[]string{"start", "--mirror", "dc1", "--topics", "orders.*", "--exclude", "orders-tmp"}, admintest.Call{Op: "start", Mirror: "dc1", Topics: []string{"orders.*"}, Exclude: []string{"orders-tmp"}}},
	}
	for i, tc := range cases {
		code, out, errOut := kmirror(t, nil, append(append([]string{"mirrors"}, tc.args...), "--config", d.cfgPath)...)
		if code != exitOK {
			t.Fatalf("%v: exit %d\n%s", tc.args, code, errOut)
		}
		calls := d.ctl.Calls()
		if len(calls) != i+1 || fmt.Sprint(calls[i]) != fmt.Sprint(tc.want) {
			t.Fatalf("%v: the daemon got %+v, want %+v", tc.args, calls, tc.want)
		}
		if !strings.Contains(out, "mirror dc1: 2 partition(s) paused") || !regexp.MustCompile(`orders\s+1\s+PAUSED\s+preserve\s+3\s+6`).MatchString(out) {
			t.Fatalf("%v output:\n%s", tc.args, out)
		}
	}
	code, out, _ := kmirror(t, nil, "mirrors", "pause", "--mirror", "dc1", "--config", d.cfgPath, "--json")
	var res admin.OpResult
	if code != exitOK || json.Unmarshal([]byte(out), &res) != nil || res.Mirror != "dc1" || len(res.Partitions) != 2 {
		t.Fatalf("pause --json: exit %d\n%s", code, out)
	}

	// Usage errors: nothing is sent.
	before := len(d.ctl.Calls())
	for _, args := range [][]string{
		{"mirrors", "stop", "--mirror", "dc1", "--config", d.cfgPath},
		{"mirrors", "start", "--mirror", "dc1", "--config", d.cfgPath},
		{"mirrors", "pause", "--config", d.cfgPath},
		{"mirrors", "pause", "--mirror", "dc1", "--topics", "a,,b", "--config", d.cfgPath},
		{"mirrors", "pause", "--mirror", "dc1"},
		{"mirrors", "frobnicate"},
		{"mirrors"},
		{"failover", "--config", d.cfgPath},
		{"failover", "--mirror", "dc1", "--wait-for-catch-up", "-1s", "--config", d.cfgPath},
		{"mirrors", "pause", "--mirror", "dc1", "--config", d.cfgPath, "--tls-cert", "x.pem"},
	} {
		if code, _, errOut := kmirror(t, nil, args...); code != exitUsage {
			t.Errorf("%v: exit %d, want %d\n%s", args, code, exitUsage, errOut)
		}
	}
	if n := len(d.ctl.Calls()); n != before {
		t.Fatalf("usage errors reached the daemon: %+v", d.ctl.Calls()[before:])
	}

	// The daemon's refusals are reported with their reason; a conflict
	// exits 4.
	d.ctl.Update(func(c *admintest.Controller) {
		c.Err = fmt.Errorf("%w: topic orders is STOPPED; start it first", admin.ErrConflict)
	})
	code, _, errOut := kmirror(t, nil, "mirrors", "pause", "--mirror", "dc1", "--config", d.cfgPath)
	if code != exitConflict || !strings.Contains(errOut, "409") || !strings.Contains(errOut, "start it first") {
		t.Fatalf("conflict: exit %d\n%s", code, errOut)
	}
	d.noSecret(t, errOut)
}

func TestFailoverPrintsLastMirroredOffsetsAndSyncedGroups(t *testing.T) {
	t.Parallel()
	d := startAdmin(t, "")
	d.ctl.Update(func(c *admintest.Controller) {
		c.FailoverResult = admin.FailoverResult{
			Topics: []admin.TopicFailover{
				{Topic: "orders", Partitions: []admin.PartitionFailover{{Partition: 0, LastMirroredOffset: 41}, {Partition: 1, LastMirroredOffset: 6}}},
				{Topic: "payments", Partitions: []admin.PartitionFailover{{Partition: 0, LastMirroredOffset: -1}}},
			},
			Groups:   []string{"billing", "shipping"},
			Warnings: []string{"last ACL sync skipped: source unreachable"},
		}
	})
	allCaughtUp(d)
	code, out, errOut := kmirror(t, nil, "failover", "--config", d.cfgPath, "--mirror", "dc1", "--topics", "orders,payments", "--wait-for-catch-up", "90s", "--yes")
	if code != exitOK {
		t.Fatalf("failover: exit %d\n%s", code, errOut)
	}
	if !strings.Contains(errOut, "mirror dc1 caught up; failing over.") {
		t.Errorf("the catch-up wait is not shown on stderr:\n%s", errOut)
	}
	// The client waited for the catch-up; the failover call's own wait
	// only covers what was written since.
	calls := d.ctl.Calls()
	if len(calls) != 1 || calls[0].Op != "failover" || calls[0].Wait <= 0 || calls[0].Wait > 30*time.Second || strings.Join(calls[0].Topics, ",") != "orders,payments" {
		t.Fatalf("the daemon got %+v", calls)
	}
	for _, re := range []string{
		`mirror dc1 failed over: 2 topic\(s\), 3 partition\(s\) STOPPED`,
		`orders\s+0\s+41`, `orders\s+1\s+6`, `payments\s+0\s+-`,
		`Consumer groups with synced offsets: billing, shipping`,
		`Warning: last ACL sync skipped: source unreachable`,
	} {
		if !regexp.MustCompile(re).MatchString(out) {
			t.Errorf("failover output lacks %s:\n%s", re, out)
		}
	}
	code, out, _ = kmirror(t, nil, "failover", "--config", d.cfgPath, "--mirror", "dc1", "--json", "-y")
	var res admin.FailoverResult
	if code != exitOK || json.Unmarshal([]byte(out), &res) != nil || res.Topics[0].Partitions[0].LastMirroredOffset != 41 || res.Groups[1] != "shipping" {
		t.Fatalf("failover --json: exit %d\n%s", code, out)
	}
	if !strings.Contains(out, `"last_mirrored_offset": 41`) {
		t.Errorf("JSON field names changed:\n%s", out)
	}
}

func TestAdminCommandsWithoutOrWithAWrongTokenAreRefused(t *testing.T) {
	t.Parallel()
	d := startAdmin(t, "")
	wrong := writeFile(t, "wrong.token", "not-the-token\n")
	code, _, errOut := kmirror(t, nil, "mirrors", "pause", "--mirror", "dc1", "--config", d.cfgPath, "--token-file", wrong)
	if code != exitUnauthorized || !strings.Contains(errOut, "401") || !strings.Contains(errOut, "wrong bearer token") {
		t.Fatalf("wrong token: exit %d\n%s", code, errOut)
	}
	// Without --config no token is known.
	code, _, errOut = kmirror(t, nil, "failover", "--mirror", "dc1", "--admin-address", d.cfg.AdminAddress, "--yes")
	if code != exitUnauthorized || !strings.Contains(errOut, "missing bearer token") {
		t.Fatalf("no token: exit %d\n%s", code, errOut)
	}
	if calls := d.ctl.Calls(); len(calls) != 0 {
		t.Fatalf("refused calls changed something: %+v", calls)
	}
	// --admin-address with the right --token-file works without the config.
	code, _, errOut = kmirror(t, nil, "mirrors", "list", "--admin-address", d.cfg.AdminAddress, "--token-file", d.cfg.AdminTokenPath())
	if code != exitOK {
		t.Fatalf("--admin-address --token-file: exit %d\n%s", code, errOut)
	}
	d.noSecret(t, errOut)
}

func TestAdminCommandsSayWhatToDoWhenTheDaemonIsAway(t *testing.T) {
	t.Parallel()
	stateDir := t.TempDir()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	cfg := writeFile(t, "k.yaml", fmt.Sprintf("destination:\n  bootstrap.servers: h:9092\nstate:\n  dir: %s\nadmin.address: %s\n", stateDir, addr))
	// No token yet: the daemon never started with this state.dir.
	code, _, errOut := kmirror(t, nil, "mirrors", "list", "--config", cfg)
	if code != exitFailure || !strings.Contains(errOut, "is the daemon running with this config?") || !strings.Contains(errOut, filepath.Join(stateDir, "admin.token")) {
		t.Fatalf("no token file: exit %d\n%s", code, errOut)
	}
	// A token but nothing listening.
	if err := os.WriteFile(filepath.Join(stateDir, "admin.token"), []byte("abc\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	code, _, errOut = kmirror(t, nil, "mirrors", "list", "--config", cfg)
	if code != exitFailure || !strings.Contains(errOut, "cannot reach the admin API at http://"+addr+": is `kmirror run` running with this config?") {
		t.Fatalf("nothing listening: exit %d\n%s", code, errOut)
	}
	off := writeFile(t, "off.yaml", fmt.Sprintf("destination:\n  bootstrap.servers: h:9092\nstate:\n  dir: %s\nadmin.address: \"\"\n", stateDir))
	code, _, errOut = kmirror(t, nil, "mirrors", "list", "--config", off)
	if code != exitFailure || !strings.Contains(errOut, "admin.address is empty") {
		t.Fatalf("admin API disabled: exit %d\n%s", code, errOut)
	}
}

func TestAdminCommandsWithMutualTLS(t *testing.T) {
	t.Parallel()
	p := testpki.New(t, "operators CA")
	d := startAdmin(t, fmt.Sprintf("admin.tls.cert.file: %s\nadmin.tls.key.file: %s\nadmin.tls.client.ca.file: %s\n", p.Server.CertFile, p.Server.KeyFile, p.CAFile))
	carol := p.IssueClient(t, "carol-oncall")
	cert, key := carol.CertFile, carol.KeyFile
	// The daemon's certificate file is the default trust anchor; the
	// client certificate comes from the flags.
	code, out, errOut := kmirror(t, nil, "mirrors", "list", "--config", d.cfgPath, "--tls-cert", cert, "--tls-key", key)
	if code != exitOK || !strings.Contains(out, "dc1") {
		t.Fatalf("mTLS: exit %d\n%s%s", code, out, errOut)
	}
	if !strings.Contains(d.logs.String(), "caller=cn=carol-oncall") {
		t.Errorf("the caller's CN is not logged:\n%s", d.logs)
	}
	// --tls-ca and --admin-address, without the config.
	code, _, errOut = kmirror(t, nil, "mirrors", "list", "--admin-address", "https://"+d.cfg.AdminAddress, "--tls-ca", p.CAFile, "--tls-cert", cert, "--tls-key", key)
	if code != exitOK {
		t.Fatalf("--tls-ca: exit %d\n%s", code, errOut)
	}
	// Without a client certificate: refused, with what to do.
	code, _, errOut = kmirror(t, nil, "mirrors", "pause", "--mirror", "dc1", "--config", d.cfgPath)
	if code != exitUnauthorized || !strings.Contains(errOut, "pass --tls-cert and --tls-key") {
		t.Fatalf("no client certificate: exit %d\n%s", code, errOut)
	}
	if n := len(d.ctl.Calls()); n != 0 {
		t.Fatalf("a refused call reached the controller")
	}
}

func TestFailbackPrintsWhatItDidPerPartitionAndFailsWhenAPartitionNeedsAnOperator(t *testing.T) {
	t.Parallel()
	d := startAdmin(t, "")
	d.ctl.Update(func(c *admintest.Controller) {
		c.FailbackResult = admin.FailbackResult{
			Mirror: "dc1-failback",
			Topics: []admin.TopicFailback{{Topic: "orders", Partitions: []admin.PartitionFailback{
				{Partition: 0, Action: admin.FailbackContinue, From: 42},
				{Partition: 1, Action: admin.FailbackFailed, From: -1, Diverged: 3, SideTopic: "orders.kmirror-diverged", Reason: "holds offsets 7 to 9 beyond the last mirrored offset; run with --allow-recreate"},
			}}},
		}
	})
	code, out, errOut := kmirror(t, nil, "failback", "--config", d.cfgPath, "--mirror", "dc1", "--side-topic-suffix", ".lost")
	if code != exitFailure || !strings.Contains(errOut, "1 partition(s) FAILED") {
		t.Fatalf("failback with a FAILED partition: exit %d\n%s", code, errOut)
	}
	calls := d.ctl.Calls()
	if len(calls) != 1 || calls[0].Op != "failback" || calls[0].AllowRecreate || calls[0].SideTopicSuffix != ".lost" {
		t.Fatalf("the daemon got %+v", calls)
	}
	for _, re := range []string{
		`mirror dc1-failback fails dc1 back`,
		`orders\s+0\s+continue\s+42\s+0\s+-`,
		`orders\s+1\s+failed\s+-\s+3\s+orders.kmirror-diverged`,
		`orders/1: holds offsets 7 to 9 .* --allow-recreate`,
	} {
		if !regexp.MustCompile(re).MatchString(out) {
			t.Errorf("failback output lacks %s:\n%s", re, out)
		}
	}
	d.ctl.Update(func(c *admintest.Controller) {
		c.FailbackResult.Topics[0].Partitions[1] = admin.PartitionFailback{Partition: 1, Action: admin.FailbackRecreated}
	})
	code, out, errOut = kmirror(t, nil, "failback", "--config", d.cfgPath, "--mirror", "dc1", "--allow-recreate", "--json", "--yes")
	var res admin.FailbackResult
	if code != exitOK || json.Unmarshal([]byte(out), &res) != nil || res.Topics[0].Partitions[1].Action != "recreated" || res.Of != "dc1" {
		t.Fatalf("failback --allow-recreate --json: exit %d\n%s\n%s", code, out, errOut)
	}
	if calls := d.ctl.Calls(); !calls[1].AllowRecreate {
		t.Fatalf("--allow-recreate not sent: %+v", calls[1])
	}
	if code, _, errOut := kmirror(t, nil, "failback", "--config", d.cfgPath); code != exitUsage || !strings.Contains(errOut, "the mirror is required") {
		t.Fatalf("failback without a mirror: exit %d\n%s", code, errOut)
	}
}

func TestMirrorsCreateSendsTheFileAndDeleteTheName(t *testing.T) {
	t.Parallel()
	d := startAdmin(t, "")
	settings := "bootstrap.servers: a:9092\nmirror.topics.include: \"orders.*\"\n"
	file := writeFile(t, "dc9.yaml", settings)
	code, out, errOut := kmirror(t, nil, "mirrors", "create", "--config", d.cfgPath, "--mirror", "dc9", "--mirror-config", file)
	if code != exitOK || !strings.Contains(out, "mirror dc9:") {
		t.Fatalf("create: exit %d\n%s\n%s", code, out, errOut)
	}
	code, out, errOut = kmirror(t, nil, "mirrors", "delete", "--config", d.cfgPath, "--mirror", "dc9")
	if code != exitOK || !strings.Contains(out, "mirror dc9:") {
		t.Fatalf("delete: exit %d\n%s\n%s", code, out, errOut)
	}
	calls := d.ctl.Calls()
	if len(calls) != 2 || calls[0].Op != "create" || calls[0].Mirror != "dc9" || calls[0].Settings != settings || calls[1].Op != "delete" || calls[1].Mirror != "dc9" {
		t.Fatalf("the daemon got %+v", calls)
	}
	if code, _, errOut := kmirror(t, nil, "mirrors", "create", "--config", d.cfgPath, "--mirror", "dc9"); code != exitUsage || !strings.Contains(errOut, "--mirror-config is required") {
		t.Fatalf("create without --mirror-config: exit %d\n%s", code, errOut)
	}
	if code, _, errOut := kmirror(t, nil, "mirrors", "create", "--config", d.cfgPath, "--mirror", "dc9", "--mirror-config", "/nonexistent.yaml"); code != exitUsage || !strings.Contains(errOut, "reading --mirror-config") {
		t.Fatalf("create with a missing file: exit %d\n%s", code, errOut)
	}
}
