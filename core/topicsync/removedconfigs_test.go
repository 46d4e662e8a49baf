package topicsync

import (
	"context"
	"reflect"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/internal/kfaketest"
)

// refuseConfig makes the destination answer INVALID_CONFIG to any
// CreateTopics (validate_only or not) that carries key, as Kafka 4 does for
// the keys it removed.
func refuseConfig(f *fixture, key string) {
	f.dst.ControlKey(int16(kmsg.CreateTopics), func(kr kmsg.Request) (kmsg.Response, error, bool) {
		f.dst.KeepControl()
		req := kr.(*kmsg.CreateTopicsRequest)
		resp := req.ResponseKind().(*kmsg.CreateTopicsResponse)
		for _, rt := range req.Topics {
			for _, c := range rt.Configs {
				if c.Name == key {
					st := kmsg.NewCreateTopicsResponseTopic()
					st.Topic = rt.Topic
					st.ErrorCode = kerr.InvalidConfig.Code
					msg := "Unknown topic config name: " + key
					st.ErrorMessage = &msg
					resp.Topics = append(resp.Topics, st)
					return resp, nil, true
				}
			}
		}
		return nil, nil, false
	})
}

// A source topic from an older Kafka carries a key the destination removed
// (message.format.version): the destination topic is created at once with
// every other config (retention and cleanup hold from the first record),
// not without any.
func TestTopicWithAKeyTheDestinationRemovedIsCreatedWithTheOthers(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	refuseConfig(f, "message.format.version")
	kfaketest.CreateTopic(t, f.srcCl, "legacy", 2, map[string]*string{
		"message.format.version": kadm.StringPtr("2.8"),
		"retention.ms":           kadm.StringPtr("-1"),
		"cleanup.policy":         kadm.StringPtr("compact"),
	})
	s, eng := newSyncer(t, f, nil, "legacy", "", "")
	rep, err := s.Sync(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(rep.Created, []string{"legacy"}) || eng.started["legacy"] != 2 {
		t.Fatalf("report %+v, started %v; want legacy created with 2 partitions and started", rep, eng.started)
	}
	if got, want := dynamicConfigs(t, f.dstCl, "legacy"), map[string]string{"retention.ms": "-1", "cleanup.policy": "compact"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("destination configs of legacy = %v, want %v", got, want)
	}
}
