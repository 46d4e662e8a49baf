package core_test

import (
	"bytes"
	"encoding/json"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

const module = "github.com/kmirror/kmirror"

// goPackage is the subset of `go list -json` output the layering rules need.
type goPackage struct {
	ImportPath  string
	Imports     []string
	TestImports []string
	Deps        []string
}

// listPackages runs `go list -json` for patterns from the repository root.
func listPackages(t *testing.T, patterns ...string) []goPackage {
	t.Helper()
	_, file, _, _ := runtime.Caller(0)
	root := filepath.Dir(filepath.Dir(file))
	cmd := exec.Command("go", append([]string{"list", "-json", "-deps=false"}, patterns...)...)
	cmd.Dir = root
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list %v: %v\n%s", patterns, err, stderr.String())
	}
	var pkgs []goPackage
	dec := json.NewDecoder(bytes.NewReader(out))
	for dec.More() {
		var p goPackage
		if err := dec.Decode(&p); err != nil {
			t.Fatalf("decoding go list output: %v", err)
		}
		pkgs = append(pkgs, p)
	}
	if len(pkgs) == 0 {
		t.Fatalf("go list %v matched no package", patterns)
	}
	return pkgs
}

// within reports whether pkg is path or a package below it.
func within(pkg, path string) bool {
	return pkg == path || strings.HasPrefix(pkg, path+"/")
}

// layeringRule is one rule of core/doc.go's "Layering": every package that
// pattern lists and applies accepts (all when nil) may depend, directly or
// not, only on packages of ours that allowed accepts.
type layeringRule struct {
	pattern string
	applies func(pkg string) bool
	allowed func(dep string) bool
	why     string
	// offender is a package that breaks the rule, for
	// TestLayeringRulesCanFail.
	offender string
}

// engineJobs are the packages of core/mirror's jobs, which the engine
// wires and which never import it.
var engineJobs = []string{"control", "datapath", "failover", "failback", "metrics", "runtimemirror"}

var layeringRules = []layeringRule{
	{module + "/sdk/...", nil, func(dep string) bool { return within(dep, module+"/sdk") }, "sdk must import nothing of kmirror's outside sdk",
		module + "/cmd/kmirror"},
	{module + "/plugins/...", nil, func(dep string) bool {
		return within(dep, module+"/sdk") || within(dep, module+"/plugins")
	}, "plugins may import only sdk (and their own packages)",
		module + "/cmd/kmirror"},
	{module + "/core/...", nil, func(dep string) bool {
		return !within(dep, module+"/plugins") && !within(dep, module+"/cmd")
	}, "core must never import plugins or cmd",
		module + "/cmd/kmirror"},
	// The bottom of the data path stands alone: batch is bytes and
	// nothing else.
	{module + "/core/...", func(pkg string) bool { return within(pkg, module+"/core/batch") },
		func(string) bool { return false }, "core/batch must import nothing of kmirror's",
		module + "/core/fetcher"},
	// The one retry policy stands alone too: fetcher and writer use it.
	{module + "/core/...", func(pkg string) bool { return within(pkg, module+"/core/backoff") },
		func(string) bool { return false }, "core/backoff must import nothing of kmirror's",
		module + "/core/writer"},
	// The soft memory limit is the process's, set by cmd and the daemon.
	{module + "/core/...", func(pkg string) bool { return within(pkg, module+"/core/memlimit") },
		func(string) bool { return false }, "core/memlimit must import nothing of kmirror's",
		module + "/core/daemon"},
	// The data path's layers never reach up into the engine, its operator
	// API or the command line; within covers their sub-packages too
	// (core/runner/prove, core/writer/internal/produce, …).
	{module + "/core/...", func(pkg string) bool {
		return within(pkg, module+"/core/fetcher") || within(pkg, module+"/core/writer") || within(pkg, module+"/core/runner")
	}, func(dep string) bool {
		return !within(dep, module+"/core/mirror") && !within(dep, module+"/core/admin") && !within(dep, module+"/cmd")
	}, "core/fetcher, core/writer and core/runner (with its sub-packages) must never import core/mirror, core/admin or cmd",
		module + "/cmd/kmirror"},
	// core/runner's sub-packages (prove, destination, mapstore, filler) are what the
	// runner calls: they never import it back.
	{module + "/core/...", func(pkg string) bool { return strings.HasPrefix(pkg, module+"/core/runner/") },
		func(dep string) bool { return dep != module+"/core/runner" },
		"core/runner's sub-packages must never import core/runner", module + "/cmd/kmirror"},
	// The fetcher's parts (the delivery contract, the budget, the Kafka
	// requests, the sessions) sit below it: they import only batch,
	// backoff and each other, never the fetcher itself.
	{module + "/core/...", func(pkg string) bool {
		return within(pkg, module+"/core/fetcher") && pkg != module+"/core/fetcher"
	}, func(dep string) bool {
		return within(dep, module+"/core/batch") || within(dep, module+"/core/backoff") ||
			within(dep, module+"/core/fetcher") && dep != module+"/core/fetcher"
	}, "core/fetcher's sub-packages may import only core/batch, core/backoff and each other (never core/fetcher)",
		module + "/core/runner"},
	// How key values parse and what the security keys name sit below
	// core/config, which calls them while it loads: they never import it.
	{module + "/core/...", func(pkg string) bool {
		return within(pkg, module+"/core/config/value") || within(pkg, module+"/core/config/security")
	}, func(dep string) bool {
		return within(dep, module+"/core/config/value") || within(dep, module+"/core/config/security") ||
			within(dep, module+"/core/aclrule") || within(dep, module+"/sdk")
	}, "core/config/value and core/config/security may import only each other, core/aclrule and sdk (never core/config)",
		module + "/core/kclient"},
	// Reading the file, the environment and the flags into sections sits
	// below core/config, which decodes the sections: core/config/raw
	// knows no key and never imports core/config.
	{module + "/core/...", func(pkg string) bool { return within(pkg, module+"/core/config/raw") },
		func(dep string) bool {
			return within(dep, module+"/core/config/raw") || within(dep, module+"/core/config/value") ||
				within(dep, module+"/core/aclrule") || within(dep, module+"/sdk")
		}, "core/config/raw may import only core/config/value and what it imports (core/aclrule, sdk), never core/config",
		module + "/core/kclient"},
	// Client options are built from configuration alone: core/kclient
	// sits right above core/config (and what core/config itself imports)
	// and below everything that builds a client.
	{module + "/core/...", func(pkg string) bool { return within(pkg, module+"/core/kclient") },
		func(dep string) bool {
			return within(dep, module+"/core/config") || within(dep, module+"/core/aclrule") ||
				within(dep, module+"/core/failpoint") || within(dep, module+"/sdk")
		}, "core/kclient may import only core/config (with its sub-packages) and what core/config imports (core/aclrule, core/failpoint, sdk)",
		module + "/core/supervisor"},
	// The jobs the engine wires stand below it: they never reach up into
	// the engine, its operator API or the command line.
	{module + "/core/...", func(pkg string) bool {
		for _, job := range engineJobs {
			if within(pkg, module+"/core/"+job) {
				return true
			}
		}
		return false
	}, func(dep string) bool {
		return !within(dep, module+"/core/mirror") && !within(dep, module+"/core/admin") && !within(dep, module+"/cmd")
	}, "the engine's jobs (core/" + strings.Join(engineJobs, ", core/") + ") must never import core/mirror, core/admin or cmd",
		module + "/cmd/kmirror"},
	// A mirror's supervisor is run by the engine and never reaches up
	// into it.
	{module + "/core/...", func(pkg string) bool { return within(pkg, module+"/core/supervisor") },
		func(dep string) bool { return !within(dep, module+"/core/mirror") && !within(dep, module+"/cmd") },
		"core/supervisor must never import core/mirror or cmd", module + "/cmd/kmirror"},
	// The plugin host runs plugins through the SDK's protocols: it never
	// imports an implementation (plugins/), nor the engine that will use
	// its handles.
	{module + "/core/...", func(pkg string) bool { return within(pkg, module+"/core/pluginhost") },
		func(dep string) bool {
			return !within(dep, module+"/plugins") && !within(dep, module+"/core/runner") &&
				!within(dep, module+"/core/mirror") && !within(dep, module+"/cmd")
		}, "core/pluginhost must never import plugins, core/runner, core/mirror or cmd", module + "/cmd/kmirror"},
	// The operator API defines what it asks of the engine (Controller)
	// and the types it answers with; the engine implements it.
	{module + "/core/...", func(pkg string) bool { return within(pkg, module+"/core/admin") },
		func(dep string) bool { return !within(dep, module+"/core/mirror") && !within(dep, module+"/cmd") },
		"core/admin must never import core/mirror or cmd", module + "/cmd/kmirror"},
	// The command line's packages (the admin API's client, the mirrors
	// and plugins commands, the built-ins' registry) reach a daemon only
	// through its APIs: they never build the engine. Only cmd/kmirror's
	// main package (run, demo) does.
	{module + "/cmd/kmirror/internal/...", nil,
		func(dep string) bool {
			return !within(dep, module+"/core/mirror") && !within(dep, module+"/core/supervisor")
		},
		"cmd/kmirror/internal/... must never import core/mirror or core/supervisor (only cmd/kmirror's run and demo build the engine)",
		module + "/cmd/kmirror"},
	// Group membership is a building block the engine will use: it
	// knows work items as strings and imports nothing of ours but the
	// retry policy (and franz-go, hclog).
	{module + "/core/...", func(pkg string) bool { return within(pkg, module+"/core/membership") },
		func(dep string) bool { return within(dep, module+"/core/backoff") },
		"core/membership may import only core/backoff", module + "/core/supervisor"},
	// The MirrorMaker 2 translation reads a file and writes a
	// configuration: it needs the configuration's declarations and its
	// validation, nothing that talks to a cluster.
	{module + "/cmd/kmirror/internal/mm2migrate", nil,
		func(dep string) bool {
			return within(dep, module+"/core/config") || within(dep, module+"/core/aclrule") ||
				within(dep, module+"/core/failpoint") || within(dep, module+"/sdk")
		},
		"cmd/kmirror/internal/mm2migrate imports only core/config (and what it imports) and sdk",
		module + "/cmd/kmirror"},
}

// violations returns the dependencies of pkgs that break r, one line each.
func (r layeringRule) violations(pkgs []goPackage) []string {
	var out []string
	for _, p := range pkgs {
		for _, dep := range p.Deps {
			if within(dep, module) && !r.allowed(dep) {
				out = append(out, p.ImportPath+" depends on "+dep+": "+r.why)
			}
		}
	}
	return out
}

// TestLayering enforces the layering of core/doc.go: sdk imports nothing of
// ours; plugins import only sdk; core never imports plugins or cmd; inside
// core, batch imports nothing of ours, fetcher's sub-packages import only
// batch, backoff and each other, fetcher, writer and runner never import
// mirror, admin or cmd, and config's value, security and raw packages
// never import config, and pluginhost never imports plugins, runner or mirror;
// cmd/kmirror's command packages never import the engine.
func TestLayering(t *testing.T) {
	for _, r := range layeringRules {
		var pkgs []goPackage
		for _, p := range listPackages(t, r.pattern) {
			if r.applies == nil || r.applies(p.ImportPath) {
				pkgs = append(pkgs, p)
			}
		}
		if len(pkgs) == 0 {
			t.Errorf("the rule %q governs no package", r.why)
		}
		for _, v := range r.violations(pkgs) {
			t.Error(v)
		}
	}
}

// TestLayeringRulesCanFail applies each rule to a package known to break it
// (cmd/kmirror wires core, mirror, admin and plugins; fetcher imports
// batch), so a rule that could never report is caught.
func TestLayeringRulesCanFail(t *testing.T) {
	for _, r := range layeringRules {
		if len(r.violations(listPackages(t, r.offender))) == 0 {
			t.Errorf("the rule %q reports nothing for %s, which breaks it", r.why, r.offender)
		}
	}
}

// TestLayeringRuleDetectsViolation makes sure the rule above can fail: cmd
// imports core, so applying the sdk rule to cmd must report it.
func TestLayeringRuleDetectsViolation(t *testing.T) {
	pkgs := listPackages(t, module+"/cmd/kmirror")
	found := false
	for _, dep := range pkgs[0].Deps {
		if strings.HasPrefix(dep, module+"/core") {
			found = true
		}
	}
	if !found {
		t.Fatalf("expected cmd/kmirror to depend on core; the dependency data the layering test relies on is wrong")
	}
}

// TestVerifyIsForTestsOnly: core/verify compares whole logs for the tests
// and the demo; the engine reads logs through core/kafkalog. No core package
// outside tests imports verify.
func TestVerifyIsForTestsOnly(t *testing.T) {
	for _, p := range listPackages(t, module+"/core/...") {
		if p.ImportPath == module+"/core/verify" {
			continue
		}
		for _, imp := range p.Imports {
			if imp == module+"/core/verify" {
				t.Errorf("%s imports core/verify: read logs through core/kafkalog", p.ImportPath)
			}
		}
	}
	// The rule can fail: the demo (cmd/kmirror) imports verify.
	found := false
	for _, imp := range listPackages(t, module+"/cmd/kmirror")[0].Imports {
		found = found || imp == module+"/core/verify"
	}
	if !found {
		t.Fatal("expected cmd/kmirror (the demo) to import core/verify; the import data the rule relies on is wrong")
	}
}

// TestCredentialsComeThroughThePluginHost: kclienttest serves credentials
// straight from the sasl.* keys, for tests. No production package of the
// module imports it, so the daemon's SASL clients always get theirs from
// auth plugins.
func TestCredentialsComeThroughThePluginHost(t *testing.T) {
	for _, p := range listPackages(t, module+"/...") {
		for _, imp := range p.Imports {
			if imp == module+"/core/kclient/kclienttest" {
				t.Errorf("%s imports core/kclient/kclienttest outside its tests", p.ImportPath)
			}
		}
	}
	// The rule can fail: core/mirror's tests import it.
	found := false
	for _, imp := range listPackages(t, module+"/core/mirror")[0].TestImports {
		found = found || imp == module+"/core/kclient/kclienttest"
	}
	if !found {
		t.Fatal("expected core/mirror's tests to import kclienttest; the import data the rule relies on is wrong")
	}
}
