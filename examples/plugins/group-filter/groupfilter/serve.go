package groupfilter

import (
	"context"

	"github.com/hashicorp/go-hclog"
	"github.com/kmirror/kmirror/sdk/filter"
	"github.com/kmirror/kmirror/sdk/plugin"
)

// ServeConfig is what the plugin binary serves: the Schema, and a
// constructor that kmirror calls once with the plugin's name and its
// config block. log is the plugin's logger; kmirror shows its lines under
// plugin.filter.<name>.
func ServeConfig(log hclog.Logger) plugin.ServeConfig {
	return plugin.ServeConfig{
		Schema: Schema,
		NewFilter: func(_ context.Context, name string, c plugin.Config) (filter.Filter, error) {
			var cfg Config
			if err := c.Decode(&cfg); err != nil {
				return nil, err
			}
			f, err := New(name, cfg, log)
			if err != nil {
				return nil, err
			}
			log.Info("configured", "group_prefixes", cfg.GroupPrefixes, "topic_prefixes", cfg.TopicPrefixes)
			return f, nil
		},
		Logger: log,
	}
}
