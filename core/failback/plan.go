package failback

import (
	"context"
	"fmt"
	"regexp"
	"slices"

	"github.com/kmirror/kmirror/core/config"
	"github.com/kmirror/kmirror/core/control"
	"github.com/kmirror/kmirror/core/partition"
)

// DefaultSideSuffix names the side topics that keep the old source's
// diverged records when the request names none.
const DefaultSideSuffix = ".kmirror-diverged"

// Name is the name of mirror m's failback (reverse) mirror.
func Name(m string) string { return m + "-failback" }

// ReverseConfig builds the reverse mirror's configuration from the mirror
// it reverses: source = the daemon's destination, destination = its source.
func ReverseConfig(dcfg *config.Config, of config.Mirror, name string, topics []string) (config.Mirror, error) {
	quoted := make([]string, len(topics))
	for i, t := range topics {
		quoted[i] = regexp.QuoteMeta(t)
	}
	include, err := config.CompileRegexList(quoted)
	if err != nil {
		return config.Mirror{}, err
	}
	return config.Mirror{
		Name: name, Source: dcfg.Destination,
		TopicsInclude: include, GroupsInclude: of.GroupsInclude, GroupsExclude: of.GroupsExclude,
		ACLInclude: of.ACLInclude, TopicPropertiesExclude: of.TopicPropertiesExclude,
	}, nil
}

// FailedOver returns mirror's failed-over topics (those stopped reports
// an operator stopped), sorted, and where each of their partitions
// stopped. A failed-over partition not yet STOPPED is a conflict
// (control.ErrConflict): the failover has not completed; no failed-over
// topic at all is one too.
func FailedOver(ctx context.Context, machine *partition.Machine, stopped func(ctx context.Context, topic string) (bool, error), mirror string) ([]string, map[string][]Stopped, error) {
	parts, err := machine.LoadMirror(ctx, mirror)
	if err != nil && len(parts) == 0 {
		return nil, nil, fmt.Errorf("mirror %s: loading partition states: %w", mirror, err)
	}
	byTopic := map[string][]Stopped{}
	var topics []string
	for _, p := range parts {
		rec := p.Record()
		s, err := stopped(ctx, rec.Topic)
		if err != nil {
			return nil, nil, err
		}
		if !s {
			continue
		}
		if rec.State != partition.Stopped {
			return nil, nil, fmt.Errorf("%w: mirror %s: %s/%d is %s, not STOPPED: wait until the failover completes (kmirror failover --mirror %s shows it)",
				control.ErrConflict, mirror, rec.Topic, rec.Partition, rec.State, mirror)
		}
		if _, ok := byTopic[rec.Topic]; !ok {
			topics = append(topics, rec.Topic)
		}
		byTopic[rec.Topic] = append(byTopic[rec.Topic], Stopped{Partition: rec.Partition, Last: rec.LastMirroredOffset, Mode: rec.Mode})
	}
	if len(topics) == 0 {
		return nil, nil, fmt.Errorf("%w: mirror %s has no failed-over topic: run kmirror failover --mirror %s first", control.ErrConflict, mirror, mirror)
	}
	slices.Sort(topics)
	return topics, byTopic, nil
}

// Decide decides (or completes) the reverse mirror's partitions of each of
// topics in turn (DecideTopic), and returns what it did; on an error, what
// it did before.
func Decide(ctx context.Context, pr Params, topics []string, byTopic map[string][]Stopped) ([]Topic, error) {
	var out []Topic
	for _, t := range topics {
		tf, err := DecideTopic(ctx, pr, t, byTopic[t])
		if err != nil {
			return out, err
		}
		out = append(out, tf)
	}
	return out, nil
}
