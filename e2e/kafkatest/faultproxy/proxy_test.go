package faultproxy

import (
	"bytes"
	"crypto/rand"
	"errors"
	"io"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// echoServer is a TCP echo server that counts its open connections.
type echoServer struct {
	ln   net.Listener
	open atomic.Int64
	wg   sync.WaitGroup
}

func startEcho(t *testing.T) *echoServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	e := &echoServer{ln: ln}
	e.wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			e.open.Add(1)
			e.wg.Go(func() {
				defer e.open.Add(-1)
				defer c.Close()
				_, _ = io.Copy(c, c)
			})
		}
	})
	t.Cleanup(func() {
		ln.Close()
		e.wg.Wait()
	})
	return e
}

func (e *echoServer) addr() string { return e.ln.Addr().String() }

// startProxy starts a proxy in front of target, closed when the test ends
// (before the echo server it fronts, cleanups run last in first out).
func startProxy(t *testing.T, target string) *Proxy {
	t.Helper()
	p, err := Start(target)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	return p
}

func dial(t *testing.T, addr string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// roundTrip writes msg and reads it back within d.
func roundTrip(c net.Conn, msg []byte, d time.Duration) error {
	_ = c.SetDeadline(time.Now().Add(d))
	defer func() { _ = c.SetDeadline(time.Time{}) }()
	if _, err := c.Write(msg); err != nil {
		return err
	}
	got := make([]byte, len(msg))
	if _, err := io.ReadFull(c, got); err != nil {
		return err
	}
	if !bytes.Equal(got, msg) {
		return errors.New("echo differs")
	}
	return nil
}

// resetOnArrival connects to addr and tries a round trip; it returns nil
// when the connection is reset (at once, or by the time the dial returns),
// else what happened.
func resetOnArrival(addr string) error {
	c, err := net.Dial("tcp", addr) // the kernel accepts; the proxy resets
	if errors.Is(err, syscall.ECONNRESET) {
		return nil
	}
	if err != nil {
		return err
	}
	defer c.Close()
	err = roundTrip(c, []byte("x"), 5*time.Second)
	switch {
	case err == nil:
		return errors.New("forwarded, want a reset")
	case errors.Is(err, os.ErrDeadlineExceeded):
		return errors.New("held open, want a reset")
	}
	return nil // reset, or closed
}

// waitFor polls cond every few milliseconds for up to 10 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within 10 s", what)
		}
		time.Sleep(5 * time.Millisecond) // polling a condition, not synchronising on time
	}
}

// Bytes pass intact and in order in both directions, with latency and
// jitter, and none comes back before the round trip's smallest delay.
func TestLatencyWithJitterKeepsEveryByteInOrder(t *testing.T) {
	t.Parallel()
	echo := startEcho(t)
	p := startProxy(t, echo.addr())
	const delay, jitter = 20 * time.Millisecond, 10 * time.Millisecond
	p.SetLatency(delay, jitter)

	c := dial(t, p.Addr())
	want := make([]byte, 3<<20) // many chunks, each with its own draw
	_, _ = rand.Read(want)
	began := time.Now()
	go func() { _, _ = c.Write(want) }() // ends when c closes at the latest
	got := make([]byte, len(want))
	if _, err := io.ReadFull(c, got[:1]); err != nil {
		t.Fatal(err)
	}
	if rtt, least := time.Since(began), 2*(delay-jitter); rtt < least {
		t.Errorf("the first byte came back after %s, before the least round trip of %s", rtt, least)
	}
	if _, err := io.ReadFull(c, got[1:]); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatal("bytes changed or reordered through the proxy")
	}

	p.SetLatency(0, 0)
	if err := roundTrip(c, []byte("no delay"), 5*time.Second); err != nil {
		t.Fatalf("round trip after the latency was removed: %v", err)
	}
}

// A bandwidth cap holds a transfer to the cap: 256 KiB echoed through a
// 1 MiB/s link in each direction take at least a quarter of a second.
func TestBandwidthCapHoldsTheRate(t *testing.T) {
	t.Parallel()
	echo := startEcho(t)
	p := startProxy(t, echo.addr())
	const rate, size = 1 << 20, 256 << 10
	p.SetBandwidth(rate)

	c := dial(t, p.Addr())
	want := make([]byte, size)
	_, _ = rand.Read(want)
	began := time.Now()
	go func() { _, _ = c.Write(want) }()
	got := make([]byte, size)
	if _, err := io.ReadFull(c, got); err != nil {
		t.Fatal(err)
	}
	elapsed := time.Since(began)
	if least := time.Duration(size) * time.Second / rate * 9 / 10; elapsed < least {
		t.Errorf("%d bytes crossed a %d B/s link in %s, faster than %s", size, rate, elapsed, least)
	}
	if !bytes.Equal(got, want) {
		t.Fatal("bytes changed or reordered through the proxy")
	}
	t.Logf("%d bytes echoed through %d B/s in %s", size, rate, elapsed)

	p.SetBandwidth(0)
	began = time.Now()
	if err := roundTrip(c, want, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	t.Logf("without the cap: %s", time.Since(began))
}

// Cut resets the open connections on both sides and resets new ones at once;
// after Resume new connections are forwarded again.
func TestCutResetsConnectionsUntilResume(t *testing.T) {
	t.Parallel()
	echo := startEcho(t)
	p := startProxy(t, echo.addr())
	c := dial(t, p.Addr())
	if err := roundTrip(c, []byte("before"), 5*time.Second); err != nil {
		t.Fatal(err)
	}

	p.Cut()
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if n, err := c.Read(make([]byte, 1)); !errors.Is(err, syscall.ECONNRESET) {
		t.Fatalf("read on a cut connection: %d bytes, %v; want a reset", n, err)
	}
	waitFor(t, "the server's side closed", func() bool { return echo.open.Load() == 0 })
	if n := p.Conns(); n != 0 {
		t.Fatalf("%d connections forwarded after Cut", n)
	}

	if err := resetOnArrival(p.Addr()); err != nil {
		t.Fatalf("a connection made during the cut: %v", err)
	}
	if n := echo.open.Load(); n != 0 {
		t.Fatalf("a connection made during the cut reached the server (%d open)", n)
	}

	p.Resume()
	if err := roundTrip(dial(t, p.Addr()), []byte("after"), 5*time.Second); err != nil {
		t.Fatalf("after Resume: %v", err)
	}
}

// Blackhole keeps connections open, old and new, and forwards nothing; after
// Resume the bytes written meanwhile arrive, none lost.
func TestBlackholeHoldsBytesUntilResume(t *testing.T) {
	t.Parallel()
	echo := startEcho(t)
	p := startProxy(t, echo.addr())
	old := dial(t, p.Addr())
	if err := roundTrip(old, []byte("before"), 5*time.Second); err != nil {
		t.Fatal(err)
	}

	p.Blackhole()
	fresh := dial(t, p.Addr())
	waitFor(t, "the new connection accepted and forwarded to the server", func() bool { return echo.open.Load() == 2 })
	for name, c := range map[string]net.Conn{"old": old, "new": fresh} {
		if _, err := c.Write([]byte(name)); err != nil {
			t.Fatalf("write on the %s connection: %v", name, err)
		}
		// Nothing comes back while the hole lasts: wait a while for it.
		_ = c.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
		if n, err := c.Read(make([]byte, 8)); !errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatalf("read on the %s connection in the black hole: %d bytes, %v; want nothing", name, n, err)
		}
		_ = c.SetReadDeadline(time.Time{})
	}
	if n := p.Conns(); n != 2 {
		t.Fatalf("%d connections open in the black hole, want 2", n)
	}

	p.Resume()
	for name, c := range map[string]net.Conn{"old": old, "new": fresh} {
		got := make([]byte, len(name))
		_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
		if _, err := io.ReadFull(c, got); err != nil || string(got) != name {
			t.Fatalf("the %s connection after Resume: %q, %v; want %q", name, got, err, name)
		}
		if err := roundTrip(c, []byte("after"), 5*time.Second); err != nil {
			t.Fatalf("the %s connection after Resume: %v", name, err)
		}
	}
}

// A connection in a black hole is reset by Cut, and a half-close passes
// through: the client's FIN reaches the server, whose close comes back.
func TestCutEndsABlackholeAndHalfCloseIsForwarded(t *testing.T) {
	t.Parallel()
	echo := startEcho(t)
	p := startProxy(t, echo.addr())
	c := dial(t, p.Addr())
	p.Blackhole()
	p.Cut()
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.Read(make([]byte, 1)); !errors.Is(err, syscall.ECONNRESET) {
		t.Fatalf("read on a black-holed connection after Cut: %v; want a reset", err)
	}
	p.Resume()

	c = dial(t, p.Addr())
	if _, err := c.Write([]byte("last words")); err != nil {
		t.Fatal(err)
	}
	if err := c.(*net.TCPConn).CloseWrite(); err != nil {
		t.Fatal(err)
	}
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	got, err := io.ReadAll(c)
	if err != nil || string(got) != "last words" {
		t.Fatalf("after a half-close: %q, %v; want the echo, then EOF", got, err)
	}
	waitFor(t, "the proxy forgot the closed connection", func() bool { return p.Conns() == 0 })
}

// Without a target, or with a target that refuses, a connection is reset;
// SetTarget points new connections elsewhere, and Close ends everything.
func TestTargetAndClose(t *testing.T) {
	t.Parallel()
	p := startProxy(t, "")
	if err := resetOnArrival(p.Addr()); err != nil {
		t.Fatalf("a proxy without a target: %v", err)
	}
	echo := startEcho(t)
	p.SetTarget(echo.addr())
	c := dial(t, p.Addr())
	if err := roundTrip(c, []byte("x"), 5*time.Second); err != nil {
		t.Fatal(err)
	}
	p.Close()
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.Read(make([]byte, 1)); err == nil {
		t.Fatal("a connection survived Close")
	}
	if c, err := net.Dial("tcp", p.Addr()); err == nil {
		c.Close()
		t.Fatal("a closed proxy accepted a connection")
	}
	p.Close() // twice is fine
}
