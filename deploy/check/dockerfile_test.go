package check

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/moby/buildkit/frontend/dockerfile/instructions"
	"github.com/moby/buildkit/frontend/dockerfile/linter"
	"github.com/moby/buildkit/frontend/dockerfile/parser"
)

const dockerfile = "docker/Dockerfile"

// TestDockerfileParsesAndBuildsAMinimalImage parses the Dockerfile as
// BuildKit does (syntax, every instruction's arguments, BuildKit's lint
// rules as errors) and checks the image it describes: a Go build stage
// that builds ./cmd/kmirror from files that exist, then a distroless or
// scratch stage holding the binary only, run as a non-root user, whose
// default command is `kmirror run --config /etc/kmirror/kmirror.yaml`.
// Nothing is built: that needs a Docker daemon.
func TestDockerfileParsesAndBuildsAMinimalImage(t *testing.T) {
	t.Parallel()
	f, err := os.Open(filepath.Join(deployDir, dockerfile))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	res, err := parser.Parse(f)
	if err != nil {
		t.Fatalf("%s: %v", dockerfile, err)
	}
	for _, w := range res.Warnings {
		t.Errorf("%s: %s", dockerfile, w.Short)
	}
	lint := linter.New(&linter.Config{Warn: func(rule, _, _, msg string, loc []parser.Range) {
		t.Errorf("%s: lint %s: %s at %v", dockerfile, rule, msg, loc)
	}})
	stages, _, err := instructions.Parse(res.AST, lint)
	if err != nil {
		t.Fatalf("%s: %v", dockerfile, err)
	}
	if len(stages) != 2 {
		t.Fatalf("%s: %d stages, want a build stage and the image", dockerfile, len(stages))
	}
	build, final := stages[0], stages[1]
	if !strings.HasPrefix(build.BaseName, "golang:") {
		t.Errorf("%s: the build stage is FROM %s, want golang", dockerfile, build.BaseName)
	}
	built := false
	for _, c := range build.Commands {
		switch c := c.(type) {
		case *instructions.CopyCommand:
			for _, src := range c.SourcePaths {
				if src == "." {
					continue
				}
				if _, err := os.Stat(filepath.Join(deployDir, "..", src)); err != nil {
					t.Errorf("%s: COPY %s: not in the repository (the build context is its root)", dockerfile, src)
				}
			}
		case *instructions.RunCommand:
			cmd := strings.Join(c.CmdLine, " ")
			if strings.Contains(cmd, "go build") {
				built = strings.Contains(cmd, "CGO_ENABLED=0") && strings.HasSuffix(strings.TrimSpace(cmd), "./cmd/kmirror")
			}
		}
	}
	if !built {
		t.Errorf("%s: the build stage does not build a static ./cmd/kmirror (CGO_ENABLED=0 go build ... ./cmd/kmirror)", dockerfile)
	}
	if b := final.BaseName; b != "scratch" && !strings.HasPrefix(b, "gcr.io/distroless/static") {
		t.Errorf("%s: the image is FROM %s, want distroless static or scratch", dockerfile, b)
	}
	var user string
	var entrypoint, cmd []string
	for _, c := range final.Commands {
		switch c := c.(type) {
		case *instructions.CopyCommand:
			if c.From != build.Name || !slices.Equal(c.SourcePaths, []string{"/out/kmirror"}) || c.DestPath != "/usr/local/bin/kmirror" {
				t.Errorf("%s: the image copies %v from %q to %s; want the binary only", dockerfile, c.SourcePaths, c.From, c.DestPath)
			}
		case *instructions.UserCommand:
			user = c.User
		case *instructions.EntrypointCommand:
			entrypoint = c.CmdLine
		case *instructions.CmdCommand:
			cmd = c.CmdLine
		case *instructions.RunCommand, *instructions.AddCommand:
			t.Errorf("%s: the image stage may hold the binary only, not %s", dockerfile, c)
		}
	}
	if u, _, _ := strings.Cut(user, ":"); u == "" || u == "0" || u == "root" {
		t.Errorf("%s: the image runs as %q, want a non-root user", dockerfile, user)
	}
	if got := append(slices.Clone(entrypoint), cmd...); !slices.Equal(got, []string{"/usr/local/bin/kmirror", "run", "--config", "/etc/kmirror/kmirror.yaml"}) {
		t.Errorf("%s: the image runs %v, want kmirror run --config /etc/kmirror/kmirror.yaml", dockerfile, got)
	}
}
