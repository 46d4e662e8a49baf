package metrics

import (
	"testing"
	"time"
)

// BenchmarkDataPathProduce measures what a ProduceRequest costs in metrics
// (sent, then answered): paid once per request, not per batch.
func BenchmarkDataPathProduce(b *testing.B) {
	p, err := New()
	if err != nil {
		b.Fatal(err)
	}
	d, err := p.NewDataPath("bench")
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		d.ProduceSent(1)
		d.ProduceDone(1, 2*time.Millisecond, 4, 64<<10, false)
	}
}
