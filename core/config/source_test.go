package config

import (
	"strings"
	"testing"
)

// TestSourceDataIsTheFileContent: Source.Data (a configuration read from
// standard input) is loaded as the file would be, Path only labelling it;
// LoadForPlugins takes it too.
func TestSourceDataIsTheFileContent(t *testing.T) {
	t.Parallel()
	data := []byte("destination:\n  bootstrap.servers: h:9092\nstate:\n  dir: /tmp/kmirror-source-test\nadmin.address: 127.0.0.1:9645\n")
	cfg, err := Load(Source{Path: "standard input", Data: data})
	if err != nil || cfg.Destination.BootstrapServers[0] != "h:9092" {
		t.Fatalf("Load from Data: %v, %+v", err, cfg)
	}
	if cfg, err := LoadForPlugins(Source{Path: "standard input", Data: data}); err != nil || cfg.AdminAddress != "127.0.0.1:9645" {
		t.Fatalf("LoadForPlugins from Data: %v", err)
	}
	_, err = Load(Source{Path: "standard input", Data: []byte("log.levl: info\n")})
	if err == nil || !strings.Contains(err.Error(), "log.levl") {
		t.Fatalf("bad Data: %v", err)
	}
	// The variables the command line reserves are not taken for keys.
	if _, err := Load(Source{Data: data, Env: []string{"KMIRROR_CONFIG=x.yaml"}, Reserved: []string{"KMIRROR_CONFIG"}}); err != nil {
		t.Fatalf("a reserved variable: %v", err)
	}
}
