package kafka

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
)

// ensureTopic creates the topic if it is missing, refuses it if it has the
// wrong shape, and returns its metadata once every partition has a leader.
// A refusal wraps ErrInvalidConfig and names the setting.
func (s *Store) ensureTopic(ctx context.Context) (topicMeta, error) {
	created := false
	for {
		// A metadata request of its own: the client's cached metadata
		// may not know a topic created a moment ago.
		m, err := loadMeta(ctx, s.cl, s.cfg.Topic)
		switch {
		case errors.Is(err, kerr.UnknownTopicOrPartition) && created:
			// Created, not yet known to this broker.
		case errors.Is(err, kerr.UnknownTopicOrPartition):
			if err := s.createTopic(ctx); err != nil && !errors.Is(err, kerr.TopicAlreadyExists) {
				return topicMeta{}, err
			}
			// Created here or by another daemon at the same time:
			// check it like any existing topic.
			created = true
		case err != nil:
			return topicMeta{}, fmt.Errorf("describing the topic: %w", err)
		default:
			if err := s.checkTopic(ctx, m.replicas, len(m.leaders)); err != nil {
				return topicMeta{}, err
			}
			if allLed(m.leaders) {
				return m, nil
			}
		}
		select {
		case <-ctx.Done():
			return topicMeta{}, fmt.Errorf("waiting for the topic and its partition leaders: %w", ctx.Err())
		case <-time.After(20 * time.Millisecond): // polling the metadata until the topic is created and led
		}
	}
}

// createTopic creates the topic with the store's settings, refusing a
// replication factor larger than the cluster's broker count.
func (s *Store) createTopic(ctx context.Context) error {
	brokers, err := s.adm.ListBrokers(ctx)
	if err != nil {
		return fmt.Errorf("listing the brokers to create the topic: %w", err)
	}
	if s.cfg.ReplicationFactor > len(brokers) {
		return fmt.Errorf("%w: cannot create the topic with %s %d: the cluster has %d broker(s); set %s to at most %d in the store's config (or create the topic yourself)",
			ErrInvalidConfig, KeyReplicationFactor, s.cfg.ReplicationFactor, len(brokers), KeyReplicationFactor, len(brokers))
	}
	str := func(v string) *string { return &v }
	configs := map[string]*string{
		"cleanup.policy":                 str("compact"),
		"min.insync.replicas":            str(strconv.Itoa(minInsyncReplicas(s.cfg.ReplicationFactor))),
		"unclean.leader.election.enable": str("false"),
		"max.message.bytes":              str(strconv.Itoa(s.cfg.MaxMessageBytes)),
	}
	resp, err := s.adm.CreateTopic(ctx, int32(s.cfg.Partitions), int16(s.cfg.ReplicationFactor), configs, s.cfg.Topic)
	if err == nil {
		err = resp.Err
	}
	if err != nil {
		if resp.ErrMessage != "" {
			return fmt.Errorf("creating the topic: %w: %s", err, resp.ErrMessage)
		}
		return fmt.Errorf("creating the topic: %w", err)
	}
	return nil
}

// checkTopic refuses an existing topic that is not compacted (only), has
// another partition count or fewer replicas than configured.
func (s *Store) checkTopic(ctx context.Context, replicas, partitions int) error {
	if partitions != s.cfg.Partitions {
		return fmt.Errorf("%w: the topic exists with %d partitions, but %s is %d: a key's partition depends on the count; set %s to %d, or use another topic",
			ErrInvalidConfig, partitions, KeyPartitions, s.cfg.Partitions, KeyPartitions, partitions)
	}
	if replicas < s.cfg.ReplicationFactor {
		return fmt.Errorf("%w: the topic exists with replication factor %d, below %s %d; add replicas (kafka-reassign-partitions) or lower %s",
			ErrInvalidConfig, replicas, KeyReplicationFactor, s.cfg.ReplicationFactor, KeyReplicationFactor)
	}
	rcs, err := s.adm.DescribeTopicConfigs(ctx, s.cfg.Topic)
	if err != nil {
		return fmt.Errorf("describing the topic's configs: %w", err)
	}
	rc, err := rcs.On(s.cfg.Topic, nil)
	if err == nil {
		err = rc.Err
	}
	if err != nil {
		return fmt.Errorf("describing the topic's configs: %w", err)
	}
	policy := ""
	for _, c := range rc.Configs {
		if c.Key == "cleanup.policy" && c.Value != nil {
			policy = *c.Value
		}
	}
	if policy != "compact" {
		return fmt.Errorf("%w: the topic exists with cleanup.policy=%q: the state must be compacted, never deleted by retention; set cleanup.policy=compact on it (kafka-configs --alter --add-config cleanup.policy=compact), or use another topic",
			ErrInvalidConfig, policy)
	}
	return nil
}

func allLed(leaders []int32) bool { return countLed(leaders) == len(leaders) }

func countLed(leaders []int32) int {
	n := 0
	for _, l := range leaders {
		if l >= 0 {
			n++
		}
	}
	return n
}
