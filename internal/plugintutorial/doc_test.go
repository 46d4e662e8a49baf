package plugintutorial_test

import (
	"bufio"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"golang.org/x/mod/modfile"

	"github.com/kmirror/kmirror/internal/plugintutorial"
)

// fileMarker, on the line before a fenced block of the tutorial, names the
// file of examples/plugins/group-filter that the block shows in full. Every
// Go file and the configuration (kmirror.yaml) are shown.
const fileMarker = "<!-- file: "

// shownFiles returns the blocks of the tutorial marked with fileMarker, by
// file.
func shownFiles(t *testing.T) map[string]string {
	t.Helper()
	doc := filepath.Join(plugintutorial.Root(), "docs", "writing-plugins.md")
	f, err := os.Open(doc)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	shown := map[string]string{}
	var file, fence string // the block being read: its file and its fence
	var block strings.Builder
	pending := ""
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		switch {
		case fence != "" && line == fence:
			shown[file] = block.String()
			file, fence = "", ""
			block.Reset()
		case fence != "":
			block.WriteString(line + "\n")
		case pending != "":
			if !strings.HasPrefix(line, "```") {
				t.Fatalf("%s:%d: %s is not followed by a fenced block", doc, n, pending)
			}
			if _, dup := shown[pending]; dup {
				t.Fatalf("%s:%d: %s is shown twice", doc, n, pending)
			}
			// the closing fence: as many backticks as the opening one
			file, fence, pending = pending, line[:len(line)-len(strings.TrimLeft(line, "`"))], ""
		case strings.HasPrefix(line, fileMarker):
			pending = strings.TrimSuffix(strings.TrimPrefix(line, fileMarker), " -->")
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if fence != "" || pending != "" {
		t.Fatalf("%s: the block of %s%s is not closed", doc, file, pending)
	}
	return shown
}

// The tutorial shows every Go file of the example, and its kmirror
// configuration, in full and as they are: what a reader copies is what CI
// builds, tests and runs.
func TestTutorialShowsTheExampleAsItIs(t *testing.T) {
	t.Parallel()
	shown := shownFiles(t)
	dir := plugintutorial.ExampleDir()
	var files []string
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && (strings.HasSuffix(path, ".go") || strings.HasSuffix(path, ".yaml")) {
			rel, _ := filepath.Rel(dir, path)
			files = append(files, filepath.ToSlash(rel))
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatalf("no file to show in %s", dir)
	}
	for _, name := range files {
		if _, ok := shown[name]; !ok {
			t.Errorf("docs/writing-plugins.md does not show %s (a %s%s --> line before its block)", name, fileMarker, name)
		}
	}
	for name, block := range shown {
		b, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(name)))
		if err != nil {
			t.Errorf("docs/writing-plugins.md shows %s: %v", name, err)
			continue
		}
		if string(b) != block {
			t.Errorf("docs/writing-plugins.md shows %s differently from the file; copy the file into the block:\n%s", name, firstDifference(string(b), block))
		}
	}
}

// firstDifference describes the first line where the file and the block
// differ.
func firstDifference(file, block string) string {
	f, b := strings.Split(file, "\n"), strings.Split(block, "\n")
	for i := range max(len(f), len(b)) {
		if i >= len(f) || i >= len(b) || f[i] != b[i] {
			line := func(l []string) string {
				if i < len(l) {
					return l[i]
				}
				return "(end)"
			}
			return fmt.Sprintf("line %d:\n  file: %s\n  doc:  %s", i+1, line(f), line(b))
		}
	}
	return "(same lines)"
}

// The example requires the sdk at the version the daemon requires
// (scripts/modules.sh pin moves both), so the tutorial's code is built
// against the sdk that this kmirror speaks.
func TestTutorialRequiresThePinnedSDK(t *testing.T) {
	t.Parallel()
	version := func(gomod string) string {
		b, err := os.ReadFile(gomod)
		if err != nil {
			t.Fatal(err)
		}
		f, err := modfile.ParseLax(gomod, b, nil)
		if err != nil {
			t.Fatal(err)
		}
		i := slices.IndexFunc(f.Require, func(r *modfile.Require) bool { return r.Mod.Path == "github.com/kmirror/kmirror/sdk" })
		if i < 0 {
			t.Fatalf("%s does not require the sdk", gomod)
		}
		return f.Require[i].Mod.Version
	}
	daemon := version(filepath.Join(plugintutorial.Root(), "go.mod"))
	example := version(filepath.Join(plugintutorial.ExampleDir(), "go.mod"))
	if daemon != example {
		t.Fatalf("examples/plugins/group-filter requires the sdk at %s, the daemon at %s; run scripts/modules.sh pin", example, daemon)
	}
}
