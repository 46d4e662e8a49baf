package filtertest_test

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/kmirror/kmirror/sdk/filter"
	"github.com/kmirror/kmirror/sdk/filter/filtertest"
)

// brokenEnv names the defect the filter of TestConformance has; the parent
// test runs this test binary once per defect and expects the suite to fail.
const brokenEnv = "KMIRROR_FILTERTEST_BROKEN"

// suffix keeps topics whose name ends in ".events"; with a defect set it
// breaks one rule of the contract.
type suffix struct {
	filter.Pass
	defect string
	kinds  []filter.Kind
}

func (s *suffix) Info() filter.Info {
	k := s.kinds
	if s.defect != "shared-info" {
		k = append([]filter.Kind(nil), k...)
	}
	return filter.Info{Name: "suffix", ProtocolMajor: filter.ProtocolMajor, Kinds: k}
}

func (s *suffix) FilterTopics(ctx context.Context, _ string, in []filter.Topic) ([]filter.Topic, error) {
	if err := ctx.Err(); err != nil && s.defect != "ignores-context" {
		return nil, err
	}
	out := []filter.Topic{}
	for i, t := range in {
		if s.defect == "modifies-input" {
			in[i].Configs = nil
		}
		if strings.HasSuffix(t.Name, ".events") {
			out = append(out, t)
		}
	}
	if s.defect == "invents" {
		out = append(out, filtertest.Topics("invented")...)
	}
	return out, nil
}

func (s *suffix) FilterGroups(ctx context.Context, mirror string, in []filter.Group) ([]filter.Group, error) {
	if s.defect == "drops-unhandled" && len(in) > 0 {
		return in[1:], nil
	}
	return s.Pass.FilterGroups(ctx, mirror, in)
}

// TestConformance proves the suite passes a correct filter (and, run by
// TestSuiteCatchesDefects with a defect set, that it fails a broken one).
func TestConformance(t *testing.T) {
	filtertest.Run(t, &suffix{defect: os.Getenv(brokenEnv), kinds: []filter.Kind{filter.Topics}})
}

func TestSuiteCatchesDefects(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	defects := map[string]string{
		"invents":         "topics/OutputIsSubset",
		"modifies-input":  "topics/OutputIsSubset",
		"ignores-context": "topics/CanceledContext",
		"drops-unhandled": "groups/UnhandledKindPassesThrough",
		"shared-info":     "InfoStable",
	}
	for defect, subtest := range defects {
		t.Run(defect, func(t *testing.T) {
			cmd := exec.CommandContext(t.Context(), exe, "-test.run=^TestConformance$", "-test.count=1")
			cmd.Env = append(os.Environ(), brokenEnv+"="+defect)
			out, err := cmd.CombinedOutput()
			if err == nil {
				t.Fatalf("the suite passed a filter with defect %q:\n%s", defect, out)
			}
			if want := "--- FAIL: TestConformance/" + subtest; !strings.Contains(string(out), want) {
				t.Fatalf("defect %q: output lacks %q:\n%s", defect, want, out)
			}
		})
	}
}

func TestHelpers(t *testing.T) {
	ts := filtertest.Topics("a", "__consumer_offsets", "__x")
	if got := filtertest.TopicNames(ts); strings.Join(got, ",") != "a,__consumer_offsets,__x" {
		t.Fatalf("TopicNames = %v", got)
	}
	if ts[0].Internal || !ts[1].Internal || ts[2].Internal || ts[0].Partitions != 3 {
		t.Fatalf("Topics = %+v", ts)
	}
	gs := filtertest.Groups("g1", "g2")
	if got := filtertest.GroupIDs(gs); strings.Join(got, ",") != "g1,g2" || gs[0].Kind != filter.GroupClassic {
		t.Fatalf("Groups = %+v", gs)
	}
	for name, n := range map[string]int{"topics": len(filtertest.SampleTopics()), "groups": len(filtertest.SampleGroups()), "acls": len(filtertest.SampleACLs())} {
		if n < 500 {
			t.Errorf("sample %s has %d items", name, n)
		}
	}
	if err := filter.VerifyOutput(filtertest.SampleTopics(), filtertest.SampleTopics()); err != nil {
		t.Errorf("sample topics have duplicates: %v", err)
	}
}
