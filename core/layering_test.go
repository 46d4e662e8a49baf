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
	ImportPath string
	Imports    []string
	Deps       []string
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

// TestLayering enforces STYLE.md rule 1: sdk imports nothing of ours; plugins
// import only sdk; core never imports plugins or cmd.
func TestLayering(t *testing.T) {
	rules := []struct {
		pattern string
		allowed func(dep string) bool
		why     string
	}{
		{module + "/sdk/...", func(dep string) bool { return strings.HasPrefix(dep, module+"/sdk") }, "sdk must import nothing of kmirror's outside sdk"},
		{module + "/plugins/...", func(dep string) bool {
			return strings.HasPrefix(dep, module+"/sdk") || strings.HasPrefix(dep, module+"/plugins/")
		}, "plugins may import only sdk (and their own packages)"},
		{module + "/core/...", func(dep string) bool {
			return !strings.HasPrefix(dep, module+"/plugins") && !strings.HasPrefix(dep, module+"/cmd")
		}, "core must never import plugins or cmd"},
	}
	for _, r := range rules {
		for _, p := range listPackages(t, r.pattern) {
			for _, dep := range p.Deps {
				if !strings.HasPrefix(dep, module) {
					continue
				}
				if !r.allowed(dep) {
					t.Errorf("%s depends on %s: %s", p.ImportPath, dep, r.why)
				}
			}
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
