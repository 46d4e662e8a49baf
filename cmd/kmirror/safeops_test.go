package main

import (
	"encoding/json"
	"regexp"
	"strings"
	"testing"

	"github.com/kmirror/kmirror/core/admin"
	"github.com/kmirror/kmirror/core/admin/admintest"
)

// allCaughtUp makes every partition of d's mirror MIRRORING with no lag.
func allCaughtUp(d *adminDaemon) {
	d.ctl.Update(func(c *admintest.Controller) {
		for i := range c.StatusValue.Mirrors[0].Partitions {
			p := &c.StatusValue.Mirrors[0].Partitions[i]
			p.State, p.Lag, p.LastError, p.Retry = "MIRRORING", 0, "", ""
		}
	})
}

// samplePlan is a failback plan with a topic to delete on the old source.
var samplePlan = admin.Plan{
	DryRun: true,
	Steps:  []string{"stop the reverse mirror's partitions", "delete orders on the old source"},
	Topics: []admin.TopicPlan{{Topic: "orders", Partitions: []admin.PartitionPlan{
		{Partition: 0, State: "STOPPED", Lag: 0, LastMirroredOffset: 41, Action: admin.FailbackRecreated, Detail: "diverged: 3 records beyond the last mirrored offset"},
		{Partition: 1, State: "STOPPED", Lag: -1, LastMirroredOffset: 6, Action: admin.FailbackContinue},
	}}},
	DeleteOnOldSource: []string{"orders"},
	Warnings:          []string{"source unreachable now"},
}

// TestDryRunPrintsThePlanAndChangesNothing: --dry-run on failover,
// failback, stop and delete asks the API for a plan (never the
// operation), prints it per partition (text) or as the plan document
// (-o json), and exits 0, without --yes off a terminal.
func TestDryRunPrintsThePlanAndChangesNothing(t *testing.T) {
	t.Parallel()
	d := startAdmin(t, "")
	d.ctl.Update(func(c *admintest.Controller) { c.PlanResult = samplePlan })
	for _, args := range [][]string{
		{"failover", "dc1", "--topics", "orders", "--dry-run"},
		{"failback", "dc1", "--allow-recreate", "--dry-run"},
		{"mirrors", "stop", "dc1", "--topics", ".*", "--dry-run"},
		{"mirrors", "delete", "dc1", "--dry-run"},
	} {
		code, out, errOut := kmirror(t, nil, append(args, "--config", d.cfgPath)...)
		if code != exitOK {
			t.Fatalf("%v: exit %d\n%s", args, code, errOut)
		}
		for _, re := range []string{
			`of mirror dc1 would act on 1 topic\(s\), 2 partition\(s\):`,
			`  2\. delete orders on the old source`,
			`orders\s+0\s+STOPPED\s+0\s+41\s+recreated\s+diverged: 3 records`,
			`orders\s+1\s+STOPPED\s+-\s+6\s+continue\s+-`,
			`Would DELETE on the old source \(and mirror back from scratch\): orders`,
			`Warning: source unreachable now`,
			`Dry run: nothing was changed.`,
		} {
			if !regexp.MustCompile(re).MatchString(out) {
				t.Errorf("%v: the plan lacks %s:\n%s", args, re, out)
			}
		}
		code, out, errOut = kmirror(t, nil, append(args, "--config", d.cfgPath, "-o", "json")...)
		var plan admin.Plan
		if code != exitOK || json.Unmarshal([]byte(out), &plan) != nil || !plan.DryRun || plan.Mirror != "dc1" || plan.DeleteOnOldSource[0] != "orders" {
			t.Fatalf("%v -o json: exit %d\n%s%s", args, code, out, errOut)
		}
	}
	// The plan's text and structured forms, as golden files.
	for _, format := range []string{"text", "json", "yaml"} {
		code, out, errOut := kmirror(t, nil, "failback", "dc1", "--allow-recreate", "--dry-run", "--config", d.cfgPath, "-o", format)
		if code != exitOK {
			t.Fatalf("failback --dry-run -o %s: exit %d\n%s", format, code, errOut)
		}
		golden(t, "dry-run/failback."+format, out)
	}
	for _, c := range d.ctl.Calls() {
		if !c.DryRun {
			t.Fatalf("a dry run ran the operation: %+v", c)
		}
	}
	if calls := d.ctl.Calls(); len(calls) != 11 || calls[0].Op != "failover" || calls[2].Op != "failback" || !calls[2].AllowRecreate || calls[4].Op != "stop" || calls[6].Op != "delete" {
		t.Fatalf("the daemon got %+v", calls)
	}
}

// TestConfirmedOperationsNeedYesOffATerminal: failover and failback
// --allow-recreate refuse to run unattended without --yes (exit 2, nothing
// sent); failback without --allow-recreate does not ask.
func TestConfirmedOperationsNeedYesOffATerminal(t *testing.T) {
	t.Parallel()
	d := startAdmin(t, "")
	for _, args := range [][]string{
		{"failover", "dc1"},
		{"failover", "dc1", "-o", "json"},
		{"failback", "dc1", "--allow-recreate"},
	} {
		code, out, errOut := kmirrorIn(t, "y\n", nil, append(args, "--config", d.cfgPath)...)
		if code != exitUsage || !strings.Contains(errOut, "standard input is not a terminal: pass --yes") {
			t.Errorf("%v without --yes: exit %d\n%s%s", args, code, out, errOut)
		}
	}
	if calls := d.ctl.Calls(); len(calls) != 0 {
		t.Fatalf("refused commands reached the daemon: %+v", calls)
	}
	if code, _, errOut := kmirror(t, nil, "failback", "dc1", "--config", d.cfgPath); code != exitOK {
		t.Fatalf("failback without --allow-recreate asks: exit %d\n%s", code, errOut)
	}
}

// TestAdminErrorsShowTheHintAndMapToExitCodes: the API's message and hint
// are shown (text: a Hint: line; -o json: code and hint fields), and each
// code has its exit code.
func TestAdminErrorsShowTheHintAndMapToExitCodes(t *testing.T) {
	t.Parallel()
	d := startAdmin(t, "")
	code, _, errOut := kmirror(t, nil, "mirrors", "describe", "never-existed", "--config", d.cfgPath)
	if code != exitNotFound || !strings.Contains(errOut, "kmirror mirrors describe: not found: ") || !strings.Contains(errOut, "never-existed") || !strings.Contains(errOut, "\nHint: ") {
		t.Fatalf("unknown mirror: exit %d\n%s", code, errOut)
	}
	code, out, errOut := kmirror(t, nil, "failover", "dc1", "--topics", "nomatch", "--wait-for-catch-up", "1m", "--yes", "--config", d.cfgPath, "-o", "json")
	var doc struct {
		Error    string `json:"error"`
		ExitCode int    `json:"exit_code"`
		Code     string `json:"code"`
		Hint     string `json:"hint"`
	}
	if code != exitNotFound || json.Unmarshal([]byte(errOut), &doc) != nil || doc.Code != admin.CodeNoMatchingTopics || doc.Hint == "" || doc.ExitCode != exitNotFound || !strings.Contains(doc.Error, "nomatch") {
		t.Fatalf("no matching topics -o json: exit %d\n%s%s", code, out, errOut)
	}
	d.ctl.Update(func(c *admintest.Controller) { c.Err = admin.ErrNotCaughtUp })
	if code, _, errOut := kmirror(t, nil, "failover", "dc1", "--yes", "--config", d.cfgPath); code == exitOK || code == exitUsage {
		t.Fatalf("a refused failover: exit %d\n%s", code, errOut)
	}
}

// TestWaitForCatchUpGivesUpWithoutChangingAnything: a mirror that does not
// catch up within --wait-for-catch-up is never failed over; off a terminal
// the progress is a line on stderr.
func TestWaitForCatchUpGivesUpWithoutChangingAnything(t *testing.T) {
	t.Parallel()
	d := startAdmin(t, "")
	code, _, errOut := kmirror(t, nil, "failover", "dc1", "--topics", "orders", "--wait-for-catch-up", "2s", "--yes", "--config", d.cfgPath)
	if code != exitFailure || !strings.Contains(errOut, "did not catch up within --wait-for-catch-up 2s (lag 3): nothing was changed") {
		t.Fatalf("exit %d\n%s", code, errOut)
	}
	if !strings.Contains(errOut, "waiting for mirror dc1 to catch up: lag 3 (orders 3), ETA ?") {
		t.Errorf("no progress line:\n%s", errOut)
	}
	if calls := d.ctl.Calls(); len(calls) != 0 {
		t.Fatalf("the daemon got %+v", calls)
	}
}
