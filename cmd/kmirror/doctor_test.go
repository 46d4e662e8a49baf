package main

import (
	"encoding/json"
	"fmt"
	"net"
	"strings"
	"testing"

	"github.com/kmirror/kmirror/internal/kfaketest"
)

// TestDoctorExitsOneOnAFailedCheck: `kmirror doctor` passes two reachable
// clusters (exit 0, -o json the report) and fails an unreachable one
// (exit 1, the fix printed).
func TestDoctorExitsOneOnAFailedCheck(t *testing.T) {
	t.Parallel()
	dst, src := kfaketest.NewCluster(t), kfaketest.NewCluster(t)
	cfgOf := func(dstAddr string) string {
		return writeFile(t, "kmirror.yaml", fmt.Sprintf("destination:\n  bootstrap.servers: %s\nstate:\n  dir: %s\nmirrors:\n  - name: dc1\n    bootstrap.servers: %s\n",
			dstAddr, t.TempDir(), src.ListenAddrs()[0]))
	}
	code, out, errOut := kmirror(t, nil, "doctor", "--config", cfgOf(dst.ListenAddrs()[0]), "-o", "json")
	var rep struct {
		Clusters []struct{ Name string } `json:"clusters"`
		Failed   int                     `json:"failed"`
	}
	if code != exitOK || json.Unmarshal([]byte(out), &rep) != nil || rep.Failed != 0 || len(rep.Clusters) != 2 || rep.Clusters[1].Name != "mirror dc1 source" {
		t.Fatalf("doctor of good clusters: exit %d\n%s%s", code, out, errOut)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := ln.Addr().String()
	ln.Close()
	code, out, errOut = kmirror(t, nil, "doctor", "--config", cfgOf(closed))
	if code != exitFailure || !strings.Contains(out, "✗ tcp") || !strings.Contains(out, "fix: check that a broker listens") || !strings.Contains(out, "1 check(s) failed") {
		t.Fatalf("doctor of an unreachable destination: exit %d\n%s%s", code, out, errOut)
	}
}
