// Package faultproxy is a loopback TCP proxy that puts a bad network between
// a client and one server: added latency with jitter, a bandwidth cap, cut
// connections and a black hole, each switched on and off by the test that
// owns the proxy.
//
// A broker advertises the proxy's address on a listener of its own (see
// kafkatest.Options.FaultProxies), so clients that bootstrap through the
// proxy keep connecting through it, and a fault hits every connection a
// client has to that broker.
//
// # Faults
//
//   - [Proxy.SetLatency]: every chunk of bytes is held for a one-way delay
//     in each direction (a round trip sees it twice), plus or minus a
//     uniformly drawn jitter, as netem's "delay D J". Bytes are never
//     reordered: a chunk is never due before the one read before it.
//   - [Proxy.SetBandwidth]: each direction is a link of that many bytes per
//     second, shared by all the proxy's connections; a sender is held back
//     (TCP back-pressure), not buffered without bound.
//   - [Proxy.Cut]: every current connection is reset (RST, both sides) and
//     every new one is accepted and reset at once, until [Proxy.Resume].
//   - [Proxy.Blackhole]: connections stay open and new ones are accepted,
//     but no byte crosses in either direction until [Proxy.Resume]: a
//     half-open link, where a peer learns of trouble only from its own
//     timeouts. Bytes a sender wrote meanwhile are held, as TCP would
//     retransmit them, and delivered after Resume, unless the connection
//     was reset or cut.
//   - [Proxy.Resume] ends a cut or a black hole; latency and bandwidth stay
//     as set (set them to zero to remove them).
package faultproxy

import (
	"errors"
	"io"
	"math/rand/v2"
	"net"
	"sync"
	"time"
)

// Proxy is one fault proxy in front of one TCP server. Its methods are safe
// for concurrent use.
type Proxy struct {
	ln net.Listener
	// wg owns the accept loop and every connection's goroutines.
	wg sync.WaitGroup

	mu      sync.Mutex
	target  string
	latency time.Duration // one way
	jitter  time.Duration
	rate    int64 // bytes per second and direction; 0: unlimited
	cut     bool
	// hole is non-nil while black-holed; Resume closes it.
	hole   chan struct{}
	links  map[*link]struct{}
	closed bool

	// up (client to server) and down (server to client) pace the bytes at
	// the bandwidth cap.
	up, down pacer
}

// Start listens on a free loopback port and forwards each connection to
// target (host:port). An empty target is allowed: connections are then
// reset until [Proxy.SetTarget] names one.
func Start(target string) (*Proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &Proxy{ln: ln, target: target, links: map[*link]struct{}{}}
	p.wg.Go(p.accept)
	return p, nil
}

// Addr is the proxy's address (host:port); it does not change.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// SetTarget sets the server that new connections are forwarded to; current
// connections keep theirs.
func (p *Proxy) SetTarget(target string) {
	p.mu.Lock()
	p.target = target
	p.mu.Unlock()
}

// SetLatency sets the one-way delay of the bytes read from now on: d plus a
// uniform draw from [-jitter, +jitter], never below zero. Zero removes it.
func (p *Proxy) SetLatency(d, jitter time.Duration) {
	p.mu.Lock()
	p.latency, p.jitter = max(d, 0), max(jitter, 0)
	p.mu.Unlock()
}

// SetBandwidth caps each direction at bytesPerSecond, shared by all the
// proxy's connections. Zero (or less) removes the cap.
func (p *Proxy) SetBandwidth(bytesPerSecond int64) {
	p.mu.Lock()
	p.rate = max(bytesPerSecond, 0)
	p.mu.Unlock()
}

// Cut resets every current connection and resets new ones as soon as they
// are accepted, until Resume.
func (p *Proxy) Cut() {
	p.mu.Lock()
	p.cut = true
	links := p.takeLinks()
	p.mu.Unlock()
	for _, l := range links {
		l.kill(true)
	}
}

// Blackhole stops forwarding in both directions, keeping current
// connections open and accepting new ones, until Resume.
func (p *Proxy) Blackhole() {
	p.mu.Lock()
	if p.hole == nil {
		p.hole = make(chan struct{})
	}
	p.mu.Unlock()
}

// Resume ends a cut or a black hole: held bytes flow again and new
// connections are forwarded.
func (p *Proxy) Resume() {
	p.mu.Lock()
	p.cut = false
	if p.hole != nil {
		close(p.hole)
		p.hole = nil
	}
	p.mu.Unlock()
}

// Conns is the number of connections the proxy forwards now.
func (p *Proxy) Conns() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.links)
}

// Close stops accepting, resets every connection and waits for the
// proxy's goroutines. It is safe to call more than once.
func (p *Proxy) Close() {
	p.mu.Lock()
	p.closed = true
	links := p.takeLinks()
	if p.hole != nil {
		close(p.hole)
		p.hole = nil
	}
	p.mu.Unlock()
	p.ln.Close()
	for _, l := range links {
		l.kill(true)
	}
	p.wg.Wait()
}

// takeLinks empties the connection set and returns what it held. p.mu held.
func (p *Proxy) takeLinks() []*link {
	out := make([]*link, 0, len(p.links))
	for l := range p.links {
		out = append(out, l)
	}
	clear(p.links)
	return out
}

// shape draws one chunk's one-way delay and returns it with the current
// rate.
func (p *Proxy) shape() (delay time.Duration, rate int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delay = p.latency
	if p.jitter > 0 {
		delay += time.Duration(rand.Int64N(int64(2*p.jitter)+1)) - p.jitter
	}
	return max(delay, 0), p.rate
}

// gate returns nil when bytes may flow, else a channel closed when they may
// again.
func (p *Proxy) gate() <-chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.hole == nil {
		return nil
	}
	return p.hole
}

func (p *Proxy) accept() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return // closed
		}
		p.mu.Lock()
		refuse, target := p.cut || p.closed || p.target == "", p.target
		p.mu.Unlock()
		if refuse {
			reset(c)
			continue
		}
		p.wg.Go(func() { p.serve(c, target) })
	}
}

// serve dials target for client c and forwards between them until both
// directions end or the link is killed.
func (p *Proxy) serve(c net.Conn, target string) {
	s, err := net.Dial("tcp", target)
	if err != nil {
		reset(c)
		return
	}
	l := &link{client: c, server: s, done: make(chan struct{})}
	p.mu.Lock()
	if p.cut || p.closed {
		p.mu.Unlock()
		l.kill(true)
		return
	}
	p.links[l] = struct{}{}
	p.mu.Unlock()

	var pipes sync.WaitGroup
	pipes.Go(func() { p.pipe(l, c, s, &p.up) })
	pipes.Go(func() { p.pipe(l, s, c, &p.down) })
	pipes.Wait()
	l.kill(false)
	p.mu.Lock()
	delete(p.links, l)
	p.mu.Unlock()
}

// link is one proxied connection: the client's and the server's sockets.
type link struct {
	client, server net.Conn
	once           sync.Once
	done           chan struct{} // closed when the link is killed
}

// kill closes both sockets, with a reset when rst is set (linger 0), and
// wakes the link's goroutines.
func (l *link) kill(rst bool) {
	l.once.Do(func() {
		if rst {
			reset(l.client)
			reset(l.server)
		} else {
			l.client.Close()
			l.server.Close()
		}
		close(l.done)
	})
}

// reset closes c with an RST instead of a FIN.
func reset(c net.Conn) {
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.SetLinger(0)
	}
	c.Close()
}

// chunk is bytes read at once, due for writing at due.
type chunk struct {
	data []byte
	due  time.Time
}

// maxChunk bounds one read; with a bandwidth cap a chunk is also at most
// 10 ms of the link's time, so the cap is smooth.
const maxChunk = 64 << 10

// pipe copies src to dst through the faults: a reader that paces the bytes
// at the bandwidth cap and stamps each chunk's due time, and a writer that
// holds each chunk until due and while black-holed. It ends the link on an
// error (a reset passes on as a reset) and half-closes dst on EOF.
func (p *Proxy) pipe(l *link, src, dst net.Conn, link *pacer) {
	chunks := make(chan chunk, 256)
	var writer sync.WaitGroup
	writer.Go(func() {
		for c := range chunks {
			if !waitUntil(c.due, l.done) || !p.waitOpen(l.done) {
				continue // killed: drain so the reader never blocks
			}
			if _, err := dst.Write(c.data); err != nil {
				l.kill(true)
			}
		}
		select {
		case <-l.done:
		default:
			if tc, ok := dst.(*net.TCPConn); ok {
				_ = tc.CloseWrite()
			}
		}
	})
	defer func() {
		close(chunks)
		writer.Wait()
	}()
	var last time.Time
	for {
		if !p.waitOpen(l.done) {
			return
		}
		delay, rate := p.shape()
		size := maxChunk
		if rate > 0 {
			size = int(min(max(rate/100, 512), maxChunk))
		}
		buf := make([]byte, size)
		n, err := src.Read(buf)
		if n > 0 {
			// The chunk has crossed the link when its turn on the wire
			// ends; the reader waits for that, which is the back-pressure.
			sent := link.reserve(n, rate)
			if !waitUntil(sent, l.done) {
				return
			}
			due := sent.Add(delay)
			if due.Before(last) {
				due = last
			}
			last = due
			chunks <- chunk{data: buf[:n], due: due}
		}
		if err != nil {
			if !errors.Is(err, io.EOF) {
				l.kill(true)
			}
			return
		}
	}
}

// waitOpen waits while the proxy is black-holed; false when done closed
// first.
func (p *Proxy) waitOpen(done <-chan struct{}) bool {
	for {
		g := p.gate()
		if g == nil {
			select {
			case <-done:
				return false
			default:
				return true
			}
		}
		select {
		case <-g:
		case <-done:
			return false
		}
	}
}

// waitUntil waits until t; false when done closed first.
func waitUntil(t time.Time, done <-chan struct{}) bool {
	d := time.Until(t)
	if d <= 0 {
		select {
		case <-done:
			return false
		default:
			return true
		}
	}
	timer := time.NewTimer(d) // the simulated wire: hold the bytes until due
	defer timer.Stop()
	select {
	case <-timer.C:
		return true
	case <-done:
		return false
	}
}

// pacer is one direction's link at the bandwidth cap: when the wire is free
// next.
type pacer struct {
	mu   sync.Mutex
	free time.Time
}

// reserve books n bytes on the wire at rate bytes per second and returns
// when they have crossed it (now without a cap).
func (pc *pacer) reserve(n int, rate int64) time.Time {
	now := time.Now()
	if rate <= 0 {
		return now
	}
	pc.mu.Lock()
	defer pc.mu.Unlock()
	start := now
	if pc.free.After(now) {
		start = pc.free
	}
	pc.free = start.Add(time.Duration(int64(n) * int64(time.Second) / rate))
	return pc.free
}
