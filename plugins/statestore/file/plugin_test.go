package file

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/kmirror/kmirror/sdk/plugin"
	"github.com/kmirror/kmirror/sdk/statestore"
)

func TestNewFromConfig(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "state")
	s, err := NewFromConfig(t.Context(), "state", plugin.Config{"dir": dir})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	if _, err := s.Put(t.Context(), "k", []byte("v"), 0); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "FORMAT")); err != nil {
		t.Fatalf("the store is not in the configured directory: %v", err)
	}
	// The directory is locked: a second store there is refused.
	if _, err := NewFromConfig(t.Context(), "state", plugin.Config{"dir": dir}); !errors.Is(err, statestore.ErrLocked) {
		t.Fatalf("second store in %s: %v, want ErrLocked", dir, err)
	}
}

func TestNewFromConfigNamesTheKey(t *testing.T) {
	t.Parallel()
	file := filepath.Join(t.TempDir(), "a-file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		cfg  plugin.Config
		want plugin.Problem
	}{
		{plugin.Config{}, plugin.Problem{Key: "dir", Reason: "required"}},
		{plugin.Config{"dir": ""}, plugin.Problem{Key: "dir", Reason: "must not be empty"}},
		{plugin.Config{"dir": 7}, plugin.Problem{Key: "dir", Reason: "must be a string"}},
		{plugin.Config{"dir": file}, plugin.Problem{Key: "dir", Reason: "names a file, not a directory"}},
		{plugin.Config{"dir": t.TempDir(), "sync": true}, plugin.Problem{Key: "sync", Reason: "unknown key (known: dir)"}},
	} {
		s, err := NewFromConfig(t.Context(), "state", c.cfg)
		var ce *plugin.ConfigError
		if s != nil || !errors.As(err, &ce) || len(ce.Problems) != 1 || ce.Problems[0] != c.want {
			t.Errorf("NewFromConfig(%v) = %v; want a *plugin.ConfigError with %v", c.cfg, err, c.want)
		}
	}
}
