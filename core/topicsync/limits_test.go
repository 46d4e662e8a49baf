package topicsync

import (
	"context"
	"fmt"
	"reflect"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/core/config"
	"github.com/kmirror/kmirror/internal/kfaketest"
)

func TestReadMessageLimitTakesTheEffectiveValueAndTheBrokerValueBehindATopicSetting(t *testing.T) {
	t.Parallel()
	s := kadm.StringPtr
	for _, c := range []struct {
		name    string
		configs []kadm.Config
		want    Limit
	}{
		{"broker default", []kadm.Config{
			{Key: "retention.ms", Value: s("1000"), Source: kmsg.ConfigSourceDynamicTopicConfig},
			{Key: "max.message.bytes", Value: s("5242880"), Source: kmsg.ConfigSourceDynamicDefaultBrokerConfig},
		}, Limit{Bytes: 5242880, Default: 5242880}},
		{"topic setting over a static broker setting", []kadm.Config{
			{Key: "max.message.bytes", Value: s("2097152"), Source: kmsg.ConfigSourceDynamicTopicConfig, Synonyms: []kadm.ConfigSynonym{
				{Key: "max.message.bytes", Value: s("2097152"), Source: kmsg.ConfigSourceDynamicTopicConfig},
				{Key: "message.max.bytes", Value: s("3000000"), Source: kmsg.ConfigSourceStaticBrokerConfig},
				{Key: "message.max.bytes", Value: s("1048588"), Source: kmsg.ConfigSourceDefaultConfig},
			}},
		}, Limit{Bytes: 2097152, Topic: true, Default: 3000000}},
		{"topic setting without synonyms", []kadm.Config{
			{Key: "max.message.bytes", Value: s("2097152"), Source: kmsg.ConfigSourceDynamicTopicConfig},
		}, Limit{Bytes: 2097152, Topic: true}},
		{"not reported", []kadm.Config{{Key: "retention.ms", Value: s("1000")}}, Limit{}},
		{"not a number", []kadm.Config{{Key: "max.message.bytes", Value: s("lots")}}, Limit{}},
	} {
		if got := readLimit(c.configs); got != c.want {
			t.Errorf("%s: got %+v, want %+v", c.name, got, c.want)
		}
	}
}

func TestConfigChangesKeepTheDestinationLimitAtLeastTheSources(t *testing.T) {
	t.Parallel()
	none := config.RegexList{}
	excl, err := config.CompileRegexList([]string{"max.message.bytes"})
	if err != nil {
		t.Fatal(err)
	}
	inherits := func(n int64) topicConfig { return topicConfig{Limit: Limit{Bytes: n, Default: n}} }
	sets := func(n, def int64) topicConfig {
		return topicConfig{Dynamic: map[string]string{"max.message.bytes": fmt.Sprint(n)}, Limit: Limit{Bytes: n, Topic: true, Default: def}}
	}
	for _, c := range []struct {
		name     string
		src, dst topicConfig
		exclude  config.RegexList
		want     []string
	}{
		{"source brokers allow more than the destination's", inherits(5242880), inherits(1048588), none, []string{"SET max.message.bytes=5242880"}},
		{"destination brokers allow as much", inherits(1048588), inherits(1048588), none, nil},
		{"destination brokers allow more", inherits(1048588), inherits(10485760), none, nil},
		{"destination already raised", inherits(5242880), sets(5242880, 1048588), none, nil},
		{"destination raised to another value", inherits(5242880), sets(2097152, 1048588), none, []string{"SET max.message.bytes=5242880"}},
		{"destination override no longer needed", inherits(1048588), sets(524288, 1048588), none, []string{"DELETE max.message.bytes"}},
		{"source topic setting is copied", sets(2048, 1048588), inherits(1048588), none, []string{"SET max.message.bytes=2048"}},
		{"destination broker value unknown", inherits(1048588), topicConfig{Dynamic: map[string]string{"max.message.bytes": "524288"}, Limit: Limit{Bytes: 524288, Topic: true}}, none, []string{"SET max.message.bytes=1048588"}},
		{"source limit unknown", topicConfig{}, sets(524288, 1048588), none, []string{"DELETE max.message.bytes"}},
		{"excluded", inherits(5242880), inherits(1048588), excl, nil},
	} {
		var got []string
		for _, ch := range configChanges(c.src, c.dst, c.exclude) {
			v := ""
			if ch.Value != nil {
				v = "=" + *ch.Value
			}
			got = append(got, opName(ch.Op)+" "+ch.Name+v)
		}
		if !reflect.DeepEqual(got, c.want) {
			t.Errorf("%s: changes %q, want %q", c.name, got, c.want)
		}
	}
}

// TestDataPathRaisesTheDestinationLimitItself: with no sync round in
// between, the data path's own check (Syncer.RaiseLimit, behind Refused)
// raises a destination limit below the
// source's (a SET of the source's value) and reports both limits; a
// destination override below its brokers' value goes (a DELETE).
func TestDataPathRaisesTheDestinationLimitItself(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	kfaketest.CreateTopic(t, f.srcCl, "set", 1, map[string]*string{"max.message.bytes": kadm.StringPtr("3145728")})
	kfaketest.CreateTopic(t, f.dstCl, "set", 1, map[string]*string{"max.message.bytes": kadm.StringPtr("200000")})
	kfaketest.CreateTopic(t, f.srcCl, "del", 1, nil)
	kfaketest.CreateTopic(t, f.dstCl, "del", 1, map[string]*string{"max.message.bytes": kadm.StringPtr("200000")})
	dp, _ := newSyncer(t, f, nil, ".*", "", "")
	ctx := context.Background()

	src, dst, raised, err := dp.RaiseLimit(ctx, "set")
	if err != nil || !raised {
		t.Fatalf("raiseDestLimit(set) = raised %v, %v", raised, err)
	}
	if want := (Limit{Bytes: 3145728, Topic: true, Default: 1048588}); src != want || dst != want {
		t.Fatalf("limits after the raise: source %+v, destination %+v, want both %+v", src, dst, want)
	}
	if got := dynamicConfigs(t, f.dstCl, "set")["max.message.bytes"]; got != "3145728" {
		t.Fatalf("destination max.message.bytes = %q, want 3145728", got)
	}
	if _, _, raised, err := dp.RaiseLimit(ctx, "set"); err != nil || raised {
		t.Fatalf("a second raiseDestLimit(set) = raised %v, %v; want nothing to do", raised, err)
	}

	if _, dst, raised, err := dp.RaiseLimit(ctx, "del"); err != nil || !raised || dst.Bytes != 1048588 || dst.Topic {
		t.Fatalf("raiseDestLimit(del) = %+v, raised %v, %v; want the override deleted (1048588 from the brokers)", dst, raised, err)
	}
	if got, ok := dynamicConfigs(t, f.dstCl, "del")["max.message.bytes"]; ok {
		t.Fatalf("destination override max.message.bytes=%s is still there", got)
	}
}
