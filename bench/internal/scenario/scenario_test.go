package scenario

import (
	"strings"
	"testing"
)

func TestSelectScenarios(t *testing.T) {
	all, err := Select("all", false)
	if err != nil || len(all) != len(scenarios) {
		t.Fatalf("all: %d scenarios, %v", len(all), err)
	}
	quick, err := Select("", true)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range quick {
		if !s.InQuick {
			t.Errorf("%s in the default quick set", s.Name)
		}
		if s.Records >= 1_000_000 {
			t.Errorf("%s quick variant has %d records", s.Name, s.Records)
		}
	}
	two, err := Select("p500, 1k-lz4-16k", true)
	if err != nil || len(two) != 2 || two[0].Name != "p500" || two[0].Records != 100_000 {
		t.Errorf("named quick selection = %+v, %v", two, err)
	}
	if _, err := Select("nope", false); err == nil || !strings.Contains(err.Error(), "p2000-little") {
		t.Errorf("unknown scenario: %v, want an error listing the scenarios", err)
	}
	names := map[string]bool{}
	for _, s := range scenarios {
		if names[s.Name] {
			t.Errorf("scenario %s twice", s.Name)
		}
		names[s.Name] = true
		if s.Quick.Records == 0 || s.Records == 0 || s.Partitions == 0 || s.RecordSize < 8 {
			t.Errorf("scenario %s is incomplete: %+v", s.Name, s)
		}
	}
}
