package memstore_test

import (
	"testing"

	"github.com/kmirror/kmirror/sdk/statestore"
	"github.com/kmirror/kmirror/sdk/statestore/memstore"
	"github.com/kmirror/kmirror/sdk/statestore/storetest"
)

func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) statestore.Store { return memstore.New() })
}
