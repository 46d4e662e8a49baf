package logging

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
)

// TestWithFieldsWritesWhatWithWrites: every line, level check and derived
// logger of WithFields is what base.With writes, in text and JSON, to the
// logger's output and to an intercept sink.
func TestWithFieldsWritesWhatWithWrites(t *testing.T) {
	t.Parallel()
	for _, format := range []string{FormatText, FormatJSON} {
		t.Run(format, func(t *testing.T) {
			t.Parallel()
			run := func(make func(hclog.Logger) hclog.Logger) (string, string) {
				var out, sink bytes.Buffer
				root, err := New(&out, "debug", format)
				if err != nil {
					t.Fatal(err)
				}
				root.RegisterSink(hclog.NewSinkAdapter(&hclog.LoggerOptions{Output: &sink, Level: hclog.Trace, JSONFormat: format == FormatJSON, DisableTime: true}))
				l := make(root.Named("mirror"))
				l.Trace("not written to out (debug level), written to the sink", "k", 1)
				l.Debug("debug line", "took", 1500*time.Millisecond)
				l.Info("info line", "k", "v")
				l.Warn("warn line")
				l.Error("error line", "error", "boom")
				l.Log(hclog.Info, "log line", "n", 3)
				l.With("extra", true).Info("with line")
				l.Named("sub").Info("named line")
				if l.IsTrace() || !l.IsDebug() || !l.IsError() || l.GetLevel() != hclog.Debug {
					t.Errorf("level checks: trace %v debug %v error %v level %v", l.IsTrace(), l.IsDebug(), l.IsError(), l.GetLevel())
				}
				l.Info("implied", "args", len(l.ImpliedArgs()))
				return withoutTimes(out.String()), sink.String()
			}
			wantOut, wantSink := run(func(b hclog.Logger) hclog.Logger { return b.With("topic", "t", "partition", int32(3)) })
			gotOut, gotSink := run(func(b hclog.Logger) hclog.Logger { return WithFields(b, "topic", "t", "partition", int32(3)) })
			if gotOut != wantOut {
				t.Errorf("output differs from With's:\ngot:\n%s\nwant:\n%s", gotOut, wantOut)
			}
			if gotSink != wantSink {
				t.Errorf("sink differs from With's:\ngot:\n%s\nwant:\n%s", gotSink, wantSink)
			}
			for _, want := range []string{"debug line", "took=1.5s", "partition=3", "with line", "extra=true", "mirror.sub", "args=4"} {
				if format == FormatText && !strings.Contains(gotOut, want) {
					t.Errorf("output lacks %q:\n%s", want, gotOut)
				}
			}
			if !strings.Contains(gotSink, "written to the sink") {
				t.Errorf("the sink missed the trace line:\n%s", gotSink)
			}
		})
	}
}

// withoutTimes drops each line's time stamp (the first field in text, the
// "@timestamp" key in JSON) so that two runs compare.
func withoutTimes(s string) string {
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		if j := strings.Index(l, `"@timestamp":"`); j >= 0 {
			k := strings.Index(l[j+14:], `"`)
			lines[i] = l[:j] + l[j+14+k+1:]
		} else if j := strings.IndexByte(l, ' '); j >= 0 && strings.HasPrefix(l, "20") {
			lines[i] = l[j:]
		}
	}
	return strings.Join(lines, "\n")
}
