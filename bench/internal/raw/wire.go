package raw

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"

	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// pipeConn is one TCP connection to a broker with several requests in
// flight. Requests are written in the order Send is called and the broker
// answers them in that order (it handles one request per connection at a
// time), which is what keeps a partition's batches in order when each of
// several in-flight ProduceRequests carries one batch of it: Kafka's own
// producer pipelines the same way.
//
// franz-go's Broker.Request cannot be used for this: concurrent calls may
// reach the connection in any order.
type pipeConn struct {
	conn   net.Conn
	fmt    *kmsg.RequestFormatter
	slots  chan struct{} // one per request in flight
	queue  chan *pending // written, not yet answered, in order
	closed chan struct{}

	mu   sync.Mutex // serialises writes, correlation ids and queue order
	w    *bufio.Writer
	corr int32
	buf  []byte

	errOnce sync.Once
	err     error
}

// pending is one request in flight; Done is closed once Resp is read or the
// connection failed (Err).
type pending struct {
	Req  kmsg.Request
	Resp kmsg.Response
	Err  error
	Done chan struct{}
	corr int32
}

func dialPipe(ctx context.Context, addr string, inflight int) (*pipeConn, error) {
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("dial %s: %w", addr, err)
	}
	p := &pipeConn{
		conn:   c,
		fmt:    kmsg.NewRequestFormatter(kmsg.FormatterClientID("kmirror-bench-raw")),
		slots:  make(chan struct{}, inflight),
		queue:  make(chan *pending, inflight),
		closed: make(chan struct{}),
		w:      bufio.NewWriterSize(c, 1<<20),
	}
	go p.readLoop() // owned by p: ends when the connection closes
	return p, nil
}

// fail records the connection's first error and closes it.
func (p *pipeConn) fail(err error) {
	p.errOnce.Do(func() {
		p.err = err
		close(p.closed)
		p.conn.Close()
	})
}

// Close closes the connection; requests in flight fail.
func (p *pipeConn) Close() { p.fail(errors.New("connection closed")) }

// Send writes req, waiting while the connection has its maximum in flight,
// and returns at once: wait on the pending's Done for the response.
func (p *pipeConn) Send(ctx context.Context, req kmsg.Request) (*pending, error) {
	select {
	case p.slots <- struct{}{}:
	case <-p.closed:
		return nil, p.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.corr++
	pd := &pending{Req: req, Done: make(chan struct{}), corr: p.corr}
	p.buf = p.fmt.AppendRequest(p.buf[:0], req, p.corr)
	p.queue <- pd // room guaranteed: a slot is held
	if _, err := p.w.Write(p.buf); err != nil {
		p.fail(err)
		return nil, err
	}
	if err := p.w.Flush(); err != nil {
		p.fail(err)
		return nil, err
	}
	return pd, nil
}

func (p *pipeConn) readLoop() {
	r := bufio.NewReaderSize(p.conn, 1<<20)
	var size [4]byte
	for {
		if _, err := io.ReadFull(r, size[:]); err != nil {
			p.fail(err)
			p.drain()
			return
		}
		body := make([]byte, binary.BigEndian.Uint32(size[:]))
		if _, err := io.ReadFull(r, body); err != nil {
			p.fail(err)
			p.drain()
			return
		}
		var pd *pending
		select {
		case pd = <-p.queue:
		default:
			p.fail(errors.New("response without a request"))
			p.drain()
			return
		}
		pd.Resp, pd.Err = parseResponse(pd.Req, pd.corr, body)
		close(pd.Done)
		<-p.slots
		if pd.Err != nil {
			p.fail(pd.Err)
			p.drain()
			return
		}
	}
}

// drain fails every request still queued.
func (p *pipeConn) drain() {
	for {
		select {
		case pd := <-p.queue:
			pd.Err = p.err
			close(pd.Done)
		default:
			return
		}
	}
}

// parseResponse decodes a response body (after the size) to req.
func parseResponse(req kmsg.Request, corr int32, body []byte) (kmsg.Response, error) {
	rd := kbin.Reader{Src: body}
	if got := rd.Int32(); got != corr {
		return nil, fmt.Errorf("response correlation id %d, want %d", got, corr)
	}
	resp := req.ResponseKind()
	resp.SetVersion(req.GetVersion())
	// Flexible responses have tagged fields in their header, except
	// ApiVersions (key 18), whose header is always v0.
	if resp.IsFlexible() && req.Key() != 18 {
		for n := rd.Uvarint(); n > 0; n-- {
			rd.Uvarint()
			rd.Span(int(rd.Uvarint()))
		}
	}
	if err := rd.Complete(); err != nil {
		return nil, fmt.Errorf("response header: %w", err)
	}
	if err := resp.ReadFrom(rd.Src); err != nil {
		return nil, fmt.Errorf("decoding %T: %w", resp, err)
	}
	return resp, nil
}
