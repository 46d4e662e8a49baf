package topicsync

import (
	"reflect"
	"testing"

	"github.com/kmirror/kmirror/core/config"
)

func TestConfigChangesSetDifferencesAndDeleteExtrasButNeverTouchExcludedKeys(t *testing.T) {
	t.Parallel()
	excl, err := config.CompileRegexList([]string{"min.insync.replicas", ".*throttled.*"})
	if err != nil {
		t.Fatal(err)
	}
	src := map[string]string{"retention.ms": "1000", "cleanup.policy": "compact", "min.insync.replicas": "2", "leader.replication.throttled.replicas": "*"}
	dst := map[string]string{"retention.ms": "5000", "segment.bytes": "1024", "min.insync.replicas": "1"}
	var got []string
	for _, c := range configChanges(topicConfig{Dynamic: src}, topicConfig{Dynamic: dst}, excl) {
		v := ""
		if c.Value != nil {
			v = "=" + *c.Value
		}
		got = append(got, opName(c.Op)+" "+c.Name+v)
	}
	want := []string{"SET cleanup.policy=compact", "SET retention.ms=1000", "DELETE segment.bytes"}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("changes = %q, want %q", got, want)
	}
	if ch := configChanges(topicConfig{Dynamic: map[string]string{"a": "1"}}, topicConfig{Dynamic: map[string]string{"a": "1"}}, excl); len(ch) != 0 {
		t.Fatalf("equal configs give changes %v", ch)
	}
}
