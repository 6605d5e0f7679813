package ingress

import (
	"net"

	"golang.org/x/sys/unix"
)

// peerClosed reports whether the other end of a TCP connection has closed
// it: its FIN came (CLOSE_WAIT) or its reset did (CLOSE). A connection
// whose state cannot be read is taken as open.
func peerClosed(c net.Conn) bool {
	tc, ok := c.(*net.TCPConn)
	if !ok {
		return false
	}
	raw, err := tc.SyscallConn()
	if err != nil {
		return false
	}
	closed := false
	_ = raw.Control(func(fd uintptr) {
		info, err := unix.GetsockoptTCPInfo(int(fd), unix.IPPROTO_TCP, unix.TCP_INFO)
		closed = err == nil && (info.State == unix.BPF_TCP_CLOSE_WAIT || info.State == unix.BPF_TCP_CLOSE)
	})
	return closed
}
