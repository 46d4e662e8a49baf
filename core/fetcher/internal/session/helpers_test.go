package session

import (
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kmirror/kmirror/core/fetcher/internal/budget"
)

// testShared is what a fetcher Manager with default options shares with
// its sessions.
func testShared(cl *kgo.Client) *Shared {
	return &Shared{
		Cl:      cl,
		Log:     hclog.NewNullLogger(),
		Budget:  budget.New(64 << 20),
		Wake:    make(chan struct{}, 1),
		Parts:   make(map[TP]*Cursor),
		Pending: make(map[TP]*Cursor),
		Config: Config{
			PartitionMaxBytes: 1048576,
			ResponseMaxBytes:  10485760,
			MinBytes:          1,
			MaxWait:           500 * time.Millisecond,
			Backoff:           time.Second,
			CloseTimeout:      500 * time.Millisecond,
		},
	}
}

// figures are the Manager's Stats that the tests here check.
type figures struct{ BufferedBytes, BudgetBufferedBytes int64 }

// stats is fetcher.Manager.Stats' BufferedBytes and BudgetBufferedBytes.
func stats(m *Shared) figures {
	m.Mu.Lock()
	defer m.Mu.Unlock()
	return figures{m.Buffered, m.Budget.Buffered()}
}

// done is what fetcher.Manager.Done does with the bytes acknowledged.
func done(m *Shared, topic string, partition int32, n int) {
	m.Mu.Lock()
	defer m.Mu.Unlock()
	if p, ok := m.Parts[TP{topic, partition}]; ok {
		m.Unbuffer(p, int64(n))
	}
}
