package ingress

import (
	"errors"
	"net"
	"net/http/httptrace"
	"sync"
	"sync/atomic"
)

// errReplicaClosed is a write refused because the replica had closed the
// kept-alive connection before it: nothing of the request went.
var errReplicaClosed = errors.New("the replica had closed the kept-alive connection")

// replicaConn is a connection to a replica. It counts the bytes written
// to it, so that a request that failed can be known to have sent nothing,
// and, once armed (a kept-alive connection handed to a new request),
// looks before the first write whether the replica closed it meanwhile:
// a write into a connection the replica closed would reach its kernel,
// which resets it, and look like a request the replica got and dropped.
type replicaConn struct {
	net.Conn
	written atomic.Int64
	// checkNext asks the next write to look first whether the replica
	// closed the connection.
	checkNext atomic.Bool
}

func (c *replicaConn) Write(p []byte) (int, error) {
	if c.checkNext.Swap(false) && peerClosed(c.Conn) {
		return 0, errReplicaClosed
	}
	n, err := c.Conn.Write(p)
	c.written.Add(int64(n))
	return n, err
}

// sendLog follows the connections one try of a request is given (the
// transport may give it several, retrying by itself a request it sent
// nothing of), through an httptrace.ClientTrace, to tell whether any byte
// of the request was written and whether it was given a kept-alive
// connection.
type sendLog struct {
	mu    sync.Mutex
	conns []*replicaConn
	start []int64
	// reused is whether any connection given was kept alive from an
	// earlier request.
	reused bool
}

// trace is the ClientTrace that fills the log; it arms the check of a
// kept-alive connection.
func (l *sendLog) trace() *httptrace.ClientTrace {
	return &httptrace.ClientTrace{GotConn: func(info httptrace.GotConnInfo) {
		c, ok := info.Conn.(*replicaConn)
		if !ok {
			return
		}
		l.mu.Lock()
		defer l.mu.Unlock()
		if info.Reused {
			l.reused = true
			c.checkNext.Store(true)
		}
		l.conns = append(l.conns, c)
		l.start = append(l.start, c.written.Load())
	}}
}

// sentNothing reports whether no byte of the request was written to any
// connection it was given.
func (l *sendLog) sentNothing() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	for i, c := range l.conns {
		if c.written.Load() != l.start[i] {
			return false
		}
	}
	return true
}

func (l *sendLog) keptAlive() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.reused
}
