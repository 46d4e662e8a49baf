// Package groupfilter is a kmirror filter plugin: a mirror syncs the
// offsets of the consumer groups whose ID starts with one of the configured
// prefixes and, when topic prefixes are configured, mirrors only the topics
// whose name starts with one of those.
package groupfilter

import (
	"fmt"

	"github.com/hashicorp/go-hclog"
	"github.com/kmirror/kmirror/sdk/plugin"
)

// Version is the plugin's own version, reported in its Info.
const Version = "0.1.0"

// Config is the plugin's config block in kmirror's configuration.
type Config struct {
	// GroupPrefixes: a group is synced when its ID starts with one of them.
	GroupPrefixes []string `json:"group_prefixes"`
	// TopicPrefixes: when set, a topic is mirrored only when its name
	// starts with one of them. When empty, the filter leaves topics alone.
	TopicPrefixes []string `json:"topic_prefixes"`
}

// Schema declares Config's keys. kmirror checks the config block against
// it before the plugin sees it, and names the key in every error.
var Schema = plugin.Schema{
	{Name: "group_prefixes", Type: plugin.FieldStringList, Required: true,
		Description: "a consumer group is synced when its ID starts with one of these"},
	{Name: "topic_prefixes", Type: plugin.FieldStringList,
		Description: "when set, a topic is mirrored only when its name starts with one of these"},
}

// New returns the filter called name in kmirror's configuration. It
// refuses an empty group_prefixes list and empty prefixes (which would
// match everything) with a *plugin.ConfigError naming the key.
func New(name string, cfg Config, log hclog.Logger) (*Filter, error) {
	var problems []plugin.Problem
	if len(cfg.GroupPrefixes) == 0 {
		problems = append(problems, plugin.Problem{Key: "group_prefixes", Reason: "list at least one prefix"})
	}
	problems = append(problems, emptyItems("group_prefixes", cfg.GroupPrefixes)...)
	problems = append(problems, emptyItems("topic_prefixes", cfg.TopicPrefixes)...)
	if len(problems) > 0 {
		return nil, &plugin.ConfigError{Problems: problems}
	}
	return &Filter{name: name, cfg: cfg, log: log}, nil
}

// emptyItems reports the empty prefixes of the list under key.
func emptyItems(key string, prefixes []string) []plugin.Problem {
	var problems []plugin.Problem
	for i, p := range prefixes {
		if p == "" {
			problems = append(problems, plugin.Problem{Key: key, Reason: fmt.Sprintf("item %d is empty, which would match everything", i)})
		}
	}
	return problems
}
