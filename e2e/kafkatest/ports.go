package kafkatest

import (
	"fmt"
	"net"
	"sync"
)

// pickPorts is freePorts; tests replace it to provoke a port clash.
var pickPorts = freePorts

var (
	portsMu sync.Mutex
	// portsUsed holds every port handed out in this process, so two clusters
	// started at the same time never get the same port from the kernel.
	portsUsed = map[int]bool{}
)

// freePorts returns n distinct loopback ports that were free a moment ago.
// Another process can still take one before the broker binds it; Start
// retries with new ports when a broker fails to bind.
func freePorts(n int) ([]int, error) {
	portsMu.Lock()
	defer portsMu.Unlock()
	var held []net.Listener
	defer func() {
		for _, l := range held {
			l.Close()
		}
	}()
	ports := make([]int, 0, n)
	for len(ports) < n {
		if len(held) > n+100 {
			return nil, fmt.Errorf("kafkatest: no free loopback ports after %d tries", len(held))
		}
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("kafkatest: find a free loopback port: %w", err)
		}
		held = append(held, l)
		p := l.Addr().(*net.TCPAddr).Port
		if portsUsed[p] {
			continue
		}
		portsUsed[p] = true
		ports = append(ports, p)
	}
	return ports, nil
}
