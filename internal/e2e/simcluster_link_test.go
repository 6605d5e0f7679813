package e2e

import (
	"context"
	"errors"
	"net"
	"testing"
	"time"
)

// TestSimLink_CutClosesConnectionsAndRefusesDials checks the node-loss
// benchmark's cut: a connection dialled before it is closed by it (a read
// waiting on it returns), and every dial after it fails, so nothing of a
// cut sim reaches a server.
func TestSimLink_CutClosesConnectionsAndRefusesDials(t *testing.T) {
	t.Parallel()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			defer c.Close() // held open, silent, until the listener closes
		}
	}()
	var link simLink
	dial := link.dialer((&net.Dialer{Timeout: 5 * time.Second}).DialContext)
	conn, err := dial(context.Background(), "tcp", l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	read := make(chan error, 1)
	go func() {
		_, err := conn.Read(make([]byte, 1))
		read <- err
	}()
	link.cutOff()
	select {
	case err := <-read:
		if err == nil {
			t.Fatal("a read on a cut connection returned data")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a read on a connection dialled before the cut still waits 10s after it")
	}
	if _, err := dial(context.Background(), "tcp", l.Addr().String()); !errors.Is(err, errCut) {
		t.Fatalf("dial after the cut: %v, want %v", err, errCut)
	}
}
