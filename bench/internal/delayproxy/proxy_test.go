package delayproxy

import (
	"bytes"
	"crypto/rand"
	"io"
	"net"
	"testing"
	"time"
)

// Bytes pass the proxy intact and in order in both directions, and none
// arrives before its delay has passed.
func TestDelayProxyDelaysButKeepsEveryByte(t *testing.T) {
	echo, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer echo.Close()
	go func() { // the echo server: ends when its listener closes
		for {
			c, err := echo.Accept()
			if err != nil {
				return
			}
			go func() { defer c.Close(); _, _ = io.Copy(c, c) }()
		}
	}()
	p, err := Start(echo.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	const delay = 20 * time.Millisecond
	p.SetDelay(delay)

	c, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	want := make([]byte, 3<<20) // many chunks
	_, _ = rand.Read(want)
	began := time.Now()
	go func() { _, _ = c.Write(want) }()
	got := make([]byte, len(want))
	if _, err := io.ReadFull(c, got[:1]); err != nil {
		t.Fatal(err)
	}
	if rtt := time.Since(began); rtt < 2*delay {
		t.Errorf("the first byte came back after %s, before the round trip of %s", rtt, 2*delay)
	}
	if _, err := io.ReadFull(c, got[1:]); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatal("bytes changed or reordered through the proxy")
	}
}
