package core_test

import (
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"testing"
)

// TestDocListsEveryPackage: core/doc.go names every package under core, once,
// so a newcomer finds each room from one page.
func TestDocListsEveryPackage(t *testing.T) {
	_, file, _, _ := runtime.Caller(0)
	doc, err := os.ReadFile(filepath.Join(filepath.Dir(file), "doc.go"))
	if err != nil {
		t.Fatal(err)
	}
	var listed []string
	for _, m := range regexp.MustCompile(`(?m)^//   - ([a-z0-9/]+):`).FindAllStringSubmatch(string(doc), -1) {
		listed = append(listed, m[1])
	}
	var want []string
	for _, p := range listPackages(t, module+"/core/...") {
		if rel, ok := strings.CutPrefix(p.ImportPath, module+"/core/"); ok {
			want = append(want, rel)
		}
	}
	for _, p := range want {
		if !slices.Contains(listed, p) {
			t.Errorf("core/doc.go does not list package %s", p)
		}
	}
	for i, p := range listed {
		if !slices.Contains(want, p) {
			t.Errorf("core/doc.go lists %s, which is not a package under core", p)
		}
		if slices.Contains(listed[:i], p) {
			t.Errorf("core/doc.go lists %s twice", p)
		}
	}
}
