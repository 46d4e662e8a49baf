package pluginhost_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kmirror/kmirror/core/pluginhost"
	"github.com/kmirror/kmirror/sdk/filter"
	"github.com/kmirror/kmirror/sdk/plugin"
)

func TestProbeReadsAPluginsInfo(t *testing.T) {
	t.Parallel()
	p, err := pluginhost.Probe(context.Background(), filterSpec("keep", nil), pluginhost.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if p.ProtocolMajor != 1 || !p.InfoKnown || p.Name != "test" || p.ProtocolMinor != filter.ProtocolMinor {
		t.Fatalf("probed %+v, want protocol 1, Info of the filter named test", p)
	}
}

func TestProbeOfAConstructorBuiltPluginHasNoInfoYet(t *testing.T) {
	t.Parallel()
	p, err := pluginhost.Probe(context.Background(), filterSpec("keep", nil), pluginhost.Options{Command: withEnv("KMIRROR_TEST_SCHEMA=1")})
	if err != nil {
		t.Fatal(err)
	}
	if p.ProtocolMajor != 1 || len(p.Schema) != 2 {
		t.Fatalf("probed %+v, want protocol 1 and the schema's two keys", p)
	}
	if p.InfoKnown || !strings.Contains(p.InfoError, "once it is configured") {
		t.Fatalf("probed %+v: a plugin built when configured has no Info before", p)
	}
}

func TestProbeRefusesAnotherMajorVersion(t *testing.T) {
	t.Parallel()
	spec := pluginhost.Spec{Name: "v2", Kind: plugin.KindFilter, Path: v2Bin, SHA256: v2Sum}
	_, err := pluginhost.Probe(context.Background(), spec, pluginhost.Options{})
	if err == nil || !strings.Contains(err.Error(), "protocol version 2 and this kmirror speaks version 1") {
		t.Fatalf("err = %v, want a refusal naming versions 2 and 1", err)
	}
}

func TestProbeRefusesAPluginOfAnotherKind(t *testing.T) {
	t.Parallel()
	spec := pluginhost.Spec{Name: "keep", Kind: plugin.KindAuth, Path: filterBin, SHA256: filterSum}
	_, err := pluginhost.Probe(context.Background(), spec, pluginhost.Options{})
	if err == nil || !strings.Contains(err.Error(), "not a auth plugin: it serves the filter protocol") {
		t.Fatalf("err = %v, want a refusal saying it is a filter plugin", err)
	}
}

func TestProbeRefusesAFileThatIsNoPlugin(t *testing.T) {
	t.Parallel()
	file := filepath.Join(t.TempDir(), "hello")
	script := []byte("#!/bin/sh\necho hello\n")
	if err := os.WriteFile(file, script, 0o755); err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(script)
	spec := pluginhost.Spec{Name: "hello", Kind: plugin.KindFilter, Path: file, SHA256: hex.EncodeToString(sum[:])}
	_, err := pluginhost.Probe(context.Background(), spec, pluginhost.Options{})
	if err == nil || !strings.Contains(err.Error(), "is not a kmirror filter plugin") {
		t.Fatalf("err = %v, want a refusal saying it is no kmirror plugin", err)
	}
}

func TestProbeChecksTheSumFirst(t *testing.T) {
	t.Parallel()
	spec := filterSpec("keep", nil)
	spec.SHA256 = strings.Repeat("0", 64)
	_, err := pluginhost.Probe(context.Background(), spec, pluginhost.Options{})
	if err == nil || !strings.Contains(err.Error(), "checksum mismatch") {
		t.Fatalf("err = %v, want a checksum mismatch", err)
	}
}
