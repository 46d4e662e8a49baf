package file

import (
	"context"
	"os"

	"github.com/kmirror/kmirror/sdk/plugin"
	"github.com/kmirror/kmirror/sdk/statestore"
)

// KeyDir is the one configuration key of the file store as a plugin.
const KeyDir = "dir"

// Schema declares the file store's configuration as a plugin: the state
// directory, which Open creates (mode 0700) if needed.
var Schema = plugin.Schema{
	{Name: KeyDir, Type: plugin.FieldString, Required: true, Description: "the state directory (created with mode 0700 if missing; locked while the store is open); a relative path is relative to the daemon's working directory"},
}

// NewFromConfig opens the store in the configured directory; it is the
// constructor of plugin.ServeConfig.NewStateStore. A missing or empty dir,
// or a dir that is a file, is refused with a *plugin.ConfigError naming the
// key; Open's own errors (a locked or damaged directory) come back as they
// are, naming the directory.
func NewFromConfig(_ context.Context, _ string, cfg plugin.Config) (statestore.Store, error) {
	if err := Schema.Validate(cfg); err != nil {
		return nil, err
	}
	var c struct {
		Dir string `json:"dir"`
	}
	if err := cfg.Decode(&c); err != nil {
		return nil, err
	}
	if c.Dir == "" {
		return nil, &plugin.ConfigError{Problems: []plugin.Problem{{Key: KeyDir, Reason: "must not be empty"}}}
	}
	if fi, err := os.Stat(c.Dir); err == nil && !fi.IsDir() {
		return nil, &plugin.ConfigError{Problems: []plugin.Problem{{Key: KeyDir, Reason: "names a file, not a directory"}}}
	}
	return Open(c.Dir)
}
