// Package delayproxy is a loopback TCP proxy that holds every chunk of bytes
// for a set one-way delay in each direction before passing it on, without
// limiting bandwidth: with 25 ms a client sees a 50 ms round trip to the
// broker behind it, as across a WAN. Brokers advertise the proxy's address
// on a listener of their own (kafkatest.ProxiedListener), so clients that
// bootstrap through the proxy keep connecting through it.
package delayproxy

import (
	"errors"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// Proxy is one delaying proxy in front of one broker listener.
type Proxy struct {
	ln     net.Listener
	target string
	delay  atomic.Int64 // one way, nanoseconds

	mu     sync.Mutex
	conns  map[net.Conn]struct{}
	closed bool
	wg     sync.WaitGroup
}

// Start listens on a free loopback port and forwards to target.
func Start(target string) (*Proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &Proxy{ln: ln, target: target, conns: map[net.Conn]struct{}{}}
	p.wg.Go(p.accept)
	return p, nil
}

// Addr is the proxy's address (host:port).
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// SetDelay sets the one-way delay for bytes read from now on.
func (p *Proxy) SetDelay(d time.Duration) { p.delay.Store(int64(d)) }

// Close stops accepting, closes every connection and waits for its
// goroutines.
func (p *Proxy) Close() {
	p.mu.Lock()
	p.closed = true
	for c := range p.conns {
		c.Close()
	}
	p.mu.Unlock()
	p.ln.Close()
	p.wg.Wait()
}

func (p *Proxy) track(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		c.Close()
		return false
	}
	p.conns[c] = struct{}{}
	return true
}

func (p *Proxy) untrack(c net.Conn) {
	p.mu.Lock()
	delete(p.conns, c)
	p.mu.Unlock()
	c.Close()
}

func (p *Proxy) accept() {
	for {
		client, err := p.ln.Accept()
		if err != nil {
			return // closed
		}
		server, err := net.Dial("tcp", p.target)
		if err != nil {
			client.Close()
			continue
		}
		if !p.track(client) || !p.track(server) {
			server.Close()
			continue
		}
		p.wg.Go(func() { p.pipe(client, server) })
		p.wg.Go(func() { p.pipe(server, client) })
	}
}

// chunk is bytes read at a time, due for writing at due.
type chunk struct {
	data []byte
	due  time.Time
}

// pipe copies src to dst, each chunk held until its due time: a reader and
// a writer, so the delay adds latency without cutting throughput.
func (p *Proxy) pipe(src, dst net.Conn) {
	defer p.untrack(src)
	defer p.untrack(dst)
	chunks := make(chan chunk, 1024)
	var writer sync.WaitGroup
	writer.Go(func() {
		for c := range chunks {
			if wait := time.Until(c.due); wait > 0 {
				time.Sleep(wait) // the simulated wire: hold the chunk until due
			}
			if _, err := dst.Write(c.data); err != nil {
				src.Close()
				for range chunks { // drain so the reader never blocks
				}
				return
			}
		}
		if tc, ok := dst.(*net.TCPConn); ok {
			_ = tc.CloseWrite()
		}
	})
	for {
		buf := make([]byte, 64<<10)
		n, err := src.Read(buf)
		if n > 0 {
			chunks <- chunk{data: buf[:n], due: time.Now().Add(time.Duration(p.delay.Load()))}
		}
		if err != nil {
			if !errors.Is(err, io.EOF) {
				dst.Close()
			}
			break
		}
	}
	close(chunks)
	writer.Wait()
}
