package cluster

import (
	"errors"
	"fmt"
	"net"
	"strconv"
	"sync"
	"time"

	"github.com/hashicorp/memberlist"
)

// memNet carries gossip between members of one process in memory, for
// benchmarks of more members than the kernel can carry packets for on
// two cores (B5 at 1,000). Packets are dropped when the receiver's queue
// is full, as UDP's are; streams (joins, push-pull) are in-memory pipes.
// What it leaves out is only the kernel's share: memberlist, its timings
// and skein's use of it are the production ones.
type memNet struct {
	mu     sync.RWMutex
	byAddr map[string]*memTransport
	next   int
}

// memQueue is how many packets a member may have waiting before more are
// dropped, about what a socket's receive buffer holds of gossip.
const memQueue = 512

// transport returns a new member's transport, at an address of its own.
func (n *memNet) transport() *memTransport {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.byAddr == nil {
		n.byAddr = map[string]*memTransport{}
	}
	n.next++
	ip := net.IPv4(127, 100, byte(n.next>>8), byte(n.next))
	t := &memTransport{
		network: n,
		ip:      ip,
		addr:    net.JoinHostPort(ip.String(), strconv.Itoa(DefaultGossipPort)),
		packets: make(chan *memberlist.Packet, memQueue),
		streams: make(chan net.Conn),
		done:    make(chan struct{}),
	}
	n.byAddr[t.addr] = t
	return t
}

func (n *memNet) lookup(addr string) (*memTransport, error) {
	n.mu.RLock()
	defer n.mu.RUnlock()
	t, ok := n.byAddr[addr]
	if !ok {
		return nil, fmt.Errorf("memnet: no member at %s", addr)
	}
	return t, nil
}

// memTransport is one member's end of a memNet (memberlist.Transport).
type memTransport struct {
	network *memNet
	ip      net.IP
	addr    string
	packets chan *memberlist.Packet
	streams chan net.Conn
	done    chan struct{}
	once    sync.Once
}

var _ memberlist.Transport = (*memTransport)(nil)

func (t *memTransport) FinalAdvertiseAddr(string, int) (net.IP, int, error) {
	return t.ip, DefaultGossipPort, nil
}

func (t *memTransport) WriteTo(b []byte, addr string) (time.Time, error) {
	now := time.Now()
	dest, err := t.network.lookup(addr)
	if err != nil {
		return now, err
	}
	p := &memberlist.Packet{Buf: append([]byte(nil), b...), From: memAddr(t.addr), Timestamp: now}
	select {
	case dest.packets <- p:
	case <-dest.done:
	default: // a full queue drops the packet, as a full socket buffer does
	}
	return now, nil
}

func (t *memTransport) PacketCh() <-chan *memberlist.Packet { return t.packets }

func (t *memTransport) DialTimeout(addr string, timeout time.Duration) (net.Conn, error) {
	dest, err := t.network.lookup(addr)
	if err != nil {
		return nil, err
	}
	mine, theirs := net.Pipe()
	select {
	case dest.streams <- theirs:
		return mine, nil
	case <-dest.done:
	case <-time.After(timeout):
	}
	_ = mine.Close()
	_ = theirs.Close()
	return nil, errors.New("memnet: dial " + addr + ": no answer")
}

func (t *memTransport) StreamCh() <-chan net.Conn { return t.streams }

// Shutdown takes the member off the network; packets and dials to it
// fail from then on.
func (t *memTransport) Shutdown() error {
	t.once.Do(func() {
		t.network.mu.Lock()
		delete(t.network.byAddr, t.addr)
		t.network.mu.Unlock()
		close(t.done)
	})
	return nil
}

// memAddr is a member's address on a memNet, as a net.Addr.
type memAddr string

func (a memAddr) Network() string { return "memnet" }
func (a memAddr) String() string  { return string(a) }
