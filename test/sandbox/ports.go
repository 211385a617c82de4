package sandbox

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"strconv"
	"sync"
)

// The workload clusters' fake API servers listen on ports of this range:
// below the kernel's ephemeral range (32768 and up on Linux), so an
// outgoing connection never holds a port a workload cluster is about to
// listen on.
const (
	portRangeMin = 20000
	portRangeMax = 32000
)

// usedPorts are the ports handed out by this process, whose listeners may
// not be open yet.
var usedPorts = struct {
	sync.Mutex
	set map[int32]bool
}{set: map[int32]bool{}}

// freeWorkloadPort returns a port of the workload range that nothing
// listens on now and that this process has not handed out before. The
// in-memory server would pick ports in sequence without checking them, so
// two sandboxes on one machine would clash; a random free port avoids it.
func freeWorkloadPort() (int32, error) {
	usedPorts.Lock()
	defer usedPorts.Unlock()
	for range 200 {
		port := int32(portRangeMin + rand.IntN(portRangeMax-portRangeMin))
		if usedPorts.set[port] {
			continue
		}
		l, err := net.Listen("tcp", net.JoinHostPort(workloadHost, strconv.Itoa(int(port))))
		if err != nil {
			continue
		}
		if err := l.Close(); err != nil && !errors.Is(err, net.ErrClosed) {
			return 0, fmt.Errorf("closing the probe listener on port %d: %w", port, err)
		}
		usedPorts.set[port] = true
		return port, nil
	}
	return 0, fmt.Errorf("no free port found in %d-%d for a workload cluster", portRangeMin, portRangeMax)
}
