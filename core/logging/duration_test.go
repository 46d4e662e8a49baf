package logging

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
)

// TestDurationsRenderAsStrings: in both formats a time.Duration argument, on
// the root logger and on loggers derived with Named, With and ResetNamed,
// renders as "1.5s", not as nanoseconds.
func TestDurationsRenderAsStrings(t *testing.T) {
	t.Parallel()
	const d = 1500 * time.Millisecond
	derive := map[string]func(hclog.Logger) hclog.Logger{
		"root":       func(l hclog.Logger) hclog.Logger { return l },
		"named":      func(l hclog.Logger) hclog.Logger { return l.Named("sub") },
		"with":       func(l hclog.Logger) hclog.Logger { return l.With("mirror", "m1") },
		"reset":      func(l hclog.Logger) hclog.Logger { return l.ResetNamed("other") },
		"named-with": func(l hclog.Logger) hclog.Logger { return l.Named("a").With("k", "v").Named("b") },
		"intercept": func(l hclog.Logger) hclog.Logger {
			return l.(hclog.InterceptLogger).NamedIntercept("i")
		},
	}
	for _, format := range []string{FormatJSON, FormatText} {
		for name, fn := range derive {
			t.Run(format+"/"+name, func(t *testing.T) {
				t.Parallel()
				var buf bytes.Buffer
				root, err := New(&buf, "trace", format)
				if err != nil {
					t.Fatal(err)
				}
				l := fn(root)
				l.Info("info", "wait", d)
				l.Log(hclog.Warn, "log", "wait", d)
				l.Trace("trace", "wait", d)
				l.Debug("debug", "wait", d)
				l.Warn("warn", "wait", d)
				l.Error("error", "wait", d)
				l.With("implied", d).Info("with")
				lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
				if len(lines) != 7 {
					t.Fatalf("got %d lines, want 7:\n%s", len(lines), buf.String())
				}
				for i, line := range lines {
					key := "wait"
					if i == 6 {
						key = "implied"
					}
					if format == FormatJSON {
						var m map[string]any
						if err := json.Unmarshal([]byte(line), &m); err != nil {
							t.Fatalf("line %q: %v", line, err)
						}
						if m[key] != "1.5s" {
							t.Errorf("line %q: %s = %#v, want \"1.5s\"", line, key, m[key])
						}
						continue
					}
					if !strings.Contains(line, key+"=1.5s") {
						t.Errorf("line %q lacks %s=1.5s", line, key)
					}
				}
			})
		}
	}
}

// TestImpliedArgsRenderDurations: ImpliedArgs reports a duration given to
// With as its string.
func TestImpliedArgsRenderDurations(t *testing.T) {
	t.Parallel()
	root, err := New(&bytes.Buffer{}, "info", FormatJSON)
	if err != nil {
		t.Fatal(err)
	}
	args := root.With("wait", 2*time.Second).ImpliedArgs()
	if len(args) != 2 || args[1] != "2s" {
		t.Fatalf("implied args %v, want [wait 2s]", args)
	}
}
