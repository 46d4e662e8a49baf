package kclient

import (
	"context"
	"crypto/tls"
	"net"
	"time"
)

// SocketOptions are the TCP settings of a client's connections
// (send.buffer.bytes, receive.buffer.bytes, replica.socket.receive.buffer.bytes
// and socket.connection.setup.timeout.ms). A buffer size of -1 or 0 keeps the
// operating system's default; a zero DialTimeout sets none.
type SocketOptions struct {
	SendBuffer    int
	ReceiveBuffer int
	DialTimeout   time.Duration
}

// Dialer returns a dial function that opens a TCP connection with so's buffer
// sizes and timeout and, when tc is not nil, runs the TLS handshake on it (the
// server name defaults to the host dialed, as franz-go's own TLS dialing does).
func Dialer(so SocketOptions, tc *tls.Config) func(ctx context.Context, network, host string) (net.Conn, error) {
	d := &net.Dialer{Timeout: so.DialTimeout}
	return func(ctx context.Context, network, host string) (net.Conn, error) {
		conn, err := d.DialContext(ctx, network, host)
		if err != nil {
			return nil, err
		}
		if tcp, ok := conn.(*net.TCPConn); ok {
			if so.SendBuffer > 0 {
				_ = tcp.SetWriteBuffer(so.SendBuffer)
			}
			if so.ReceiveBuffer > 0 {
				_ = tcp.SetReadBuffer(so.ReceiveBuffer)
			}
		}
		if tc == nil {
			return conn, nil
		}
		cfg := tc.Clone()
		if cfg.ServerName == "" {
			if h, _, err := net.SplitHostPort(host); err == nil {
				cfg.ServerName = h
			}
		}
		tlsConn := tls.Client(conn, cfg)
		if err := tlsConn.HandshakeContext(ctx); err != nil {
			conn.Close()
			return nil, err
		}
		return tlsConn, nil
	}
}
