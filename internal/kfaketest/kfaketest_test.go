package kfaketest

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// fatalTB records the first Fatalf and ends the goroutine as testing does.
type fatalTB struct {
	testing.TB
	msg string
}

func (f *fatalTB) Helper() {}

func (f *fatalTB) Fatalf(format string, args ...any) {
	f.msg = fmt.Sprintf(format, args...)
	runtime.Goexit()
}

// run calls fn with a fatalTB on a goroutine of its own and returns the
// Fatalf message, "" if fn returned normally.
func run(t *testing.T, fn func(testing.TB)) string {
	f := &fatalTB{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		fn(f)
	}()
	<-done
	return f.msg
}

func TestWaitForReturnsOnceTheConditionHolds(t *testing.T) {
	t.Parallel()
	calls := 0
	msg := run(t, func(tb testing.TB) {
		WaitFor(tb, "the third call", func() (bool, string) {
			calls++
			return calls == 3, fmt.Sprintf("call %d", calls)
		})
	})
	if msg != "" || calls != 3 {
		t.Fatalf("WaitFor failed with %q after %d calls, want success on the third", msg, calls)
	}
}

func TestWaitForReportsWhatAndTheLastStateOnTimeout(t *testing.T) {
	t.Parallel()
	calls := 0
	msg := run(t, func(tb testing.TB) {
		WaitForWithin(tb, 50*time.Millisecond, "the moon", func() (bool, string) {
			calls++
			return false, fmt.Sprintf("seen %d times", calls)
		})
	})
	if calls < 2 {
		t.Fatalf("the condition was evaluated %d times, want it polled", calls)
	}
	if want := fmt.Sprintf("waiting for the moon; last state: seen %d times", calls); !strings.Contains(msg, want) {
		t.Fatalf("timeout message %q lacks %q", msg, want)
	}
	msg = run(t, func(tb testing.TB) {
		WaitForWithin(tb, 10*time.Millisecond, "nothing", func() (bool, string) { return false, "" })
	})
	if !strings.HasSuffix(msg, "waiting for nothing") {
		t.Fatalf("timeout message without a state: %q", msg)
	}
}

func TestNewClusterHasOneBrokerUnlessToldAndTheSeededTopics(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		opts    []kfake.Opt
		brokers int
	}{
		{nil, DefaultBrokers},
		{[]kfake.Opt{kfake.NumBrokers(3), kfake.SeedTopics(2, "a", "b")}, 3},
	} {
		c := NewCluster(t, tc.opts...)
		adm := NewAdmin(t, c)
		meta, err := adm.Metadata(Context(t))
		if err != nil {
			t.Fatal(err)
		}
		if len(meta.Brokers) != tc.brokers {
			t.Errorf("%d brokers, want %d", len(meta.Brokers), tc.brokers)
		}
		for _, topic := range []string{"a", "b"} {
			if td, ok := meta.Topics[topic]; (tc.opts != nil) != ok || ok && len(td.Partitions) != 2 {
				t.Errorf("brokers %d: topic %s: listed %v, %d partitions", tc.brokers, topic, ok, len(td.Partitions))
			}
		}
	}
}

func TestCreateTopicSetsItsConfigs(t *testing.T) {
	t.Parallel()
	c := NewCluster(t)
	cl := NewClient(t, c)
	retention := "3600000"
	CreateTopic(t, cl, "configured", 3, map[string]*string{"retention.ms": &retention})
	adm := NewAdmin(t, c)
	rcs, err := adm.DescribeTopicConfigs(Context(t), "configured")
	if err != nil {
		t.Fatal(err)
	}
	rc, err := rcs.On("configured", nil)
	if err != nil {
		t.Fatal(err)
	}
	var got string
	for _, cfg := range rc.Configs {
		if cfg.Key == "retention.ms" && cfg.Value != nil {
			got = *cfg.Value
		}
	}
	if got != retention {
		t.Fatalf("retention.ms = %q, want %q", got, retention)
	}
	if msg := run(t, func(tb testing.TB) { CreateTopic(tb, cl, "configured", 3, nil) }); !strings.Contains(msg, "creating topic configured") {
		t.Fatalf("creating an existing topic: %q, want the test failed naming the topic", msg)
	}
}

func TestClientIsClosedWhenTheTestEnds(t *testing.T) {
	t.Parallel()
	c := NewCluster(t)
	var cl *kgo.Client
	t.Run("sub", func(t *testing.T) {
		cl = NewClient(t, c)
		if _, err := kmsg.NewPtrMetadataRequest().RequestWith(Context(t), cl); err != nil {
			t.Fatalf("client of the cluster: %v", err)
		}
	})
	if _, err := kmsg.NewPtrMetadataRequest().RequestWith(Context(t), cl); !errors.Is(err, kgo.ErrClientClosed) {
		t.Fatalf("after the test ended the client answers %v, want ErrClientClosed", err)
	}
}

// goPackage is the part of `go list -json` output the import rule needs.
type goPackage struct {
	ImportPath   string
	Deps         []string // of the package itself, tests excluded
	TestImports  []string
	XTestImports []string
}

// TestOnlyTestsImportThisPackage: no package of the module depends on this
// one outside its tests. To show the check can fail, the same check on the
// packages' test imports must find the tests that use it.
func TestOnlyTestsImportThisPackage(t *testing.T) {
	t.Parallel()
	const self = "github.com/kmirror/kmirror/internal/kfaketest"
	_, file, _, _ := runtime.Caller(0)
	cmd := exec.Command("go", "list", "-json", "github.com/kmirror/kmirror/...")
	cmd.Dir = filepath.Join(filepath.Dir(file), "..", "..")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, stderr.String())
	}
	var testUsers []string
	for dec := json.NewDecoder(bytes.NewReader(out)); dec.More(); {
		var p goPackage
		if err := dec.Decode(&p); err != nil {
			t.Fatalf("decoding go list output: %v", err)
		}
		if slices.Contains(p.Deps, self) {
			t.Errorf("%s depends on %s outside its tests: only _test.go files may import it", p.ImportPath, self)
		}
		if slices.Contains(p.TestImports, self) || slices.Contains(p.XTestImports, self) {
			testUsers = append(testUsers, p.ImportPath)
		}
	}
	if !slices.Contains(testUsers, "github.com/kmirror/kmirror/core/writer") {
		t.Errorf("the tests importing %s are %v; core/writer's are among them, so the check reads the wrong data", self, testUsers)
	}
}
