package plugin

import (
	"strings"
	"testing"

	"github.com/kmirror/kmirror/sdk/auth"
	"github.com/kmirror/kmirror/sdk/filter"
)

func TestHandshakeCarriesEachKindsMajorVersion(t *testing.T) {
	want := map[Kind]uint{KindAuth: auth.ProtocolMajor, KindStateStore: StateStoreProtocolMajor, KindFilter: filter.ProtocolMajor}
	for _, k := range Kinds() {
		h, err := Handshake(k)
		if err != nil {
			t.Fatal(err)
		}
		if h.ProtocolVersion != want[k] || h.MagicCookieKey != MagicCookieKey || h.MagicCookieValue != MagicCookieValue {
			t.Fatalf("%s handshake = %+v", k, h)
		}
	}
}

func TestUnknownKindIsRefused(t *testing.T) {
	if _, err := Handshake("metrics"); err == nil || !strings.Contains(err.Error(), `unknown plugin kind "metrics"`) {
		t.Fatalf("Handshake(metrics) error = %v", err)
	}
}
