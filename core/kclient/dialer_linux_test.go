package kclient_test

import (
	"context"
	"net"
	"syscall"
	"testing"
	"time"

	"github.com/kmirror/kmirror/core/kclient"
)

// TestDialerAppliesSocketBuffers: the dialer kmirror hands franz-go sets the
// configured buffer sizes on the TCP connection (Linux reports twice the
// requested size, for its bookkeeping).
func TestDialerAppliesSocketBuffers(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	done := make(chan struct{})
	defer close(done)
	go func() { // accepts the one connection of the test and holds it open until the test ends
		if c, err := ln.Accept(); err == nil {
			defer c.Close()
			<-done
		}
	}()
	const send, recv = 96 << 10, 192 << 10
	conn, err := kclient.Dialer(kclient.SocketOptions{SendBuffer: send, ReceiveBuffer: recv, DialTimeout: time.Second}, nil)(context.Background(), "tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	raw, err := conn.(*net.TCPConn).SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var gotSnd, gotRcv int
	if err := raw.Control(func(fd uintptr) {
		gotSnd, _ = syscall.GetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_SNDBUF)
		gotRcv, _ = syscall.GetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF)
	}); err != nil {
		t.Fatal(err)
	}
	if gotSnd < send || gotRcv < recv {
		t.Fatalf("SO_SNDBUF %d, SO_RCVBUF %d; want at least %d and %d", gotSnd, gotRcv, send, recv)
	}
}
