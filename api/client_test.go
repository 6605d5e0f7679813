package api

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestClient_SeveralAddrsFallThroughToOneThatAnswers: with SKEIN_ADDR
// naming several nodes, a dead one is skipped.
func TestClient_SeveralAddrsFallThroughToOneThatAnswers(t *testing.T) {
	live := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte(`{"node":"b","leader":"b"}`))
	}))
	defer live.Close()
	dead := closedAddr(t)
	c, err := NewClient(dead+", "+live.URL, "")
	if err != nil {
		t.Fatal(err)
	}
	s, err := c.Status(context.Background())
	if err != nil || s.Node != "b" {
		t.Fatalf("status through %s then %s: %+v, %v", dead, live.URL, s, err)
	}
}

func TestClient_AllAddrsDeadSaysSo(t *testing.T) {
	c, err := NewClient(closedAddr(t)+","+closedAddr(t), "")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Status(context.Background()); err == nil || !strings.Contains(err.Error(), "connection refused") {
		t.Fatalf("status with no agent up: %v", err)
	}
}

func TestClient_BadAddrIsRefused(t *testing.T) {
	for _, addr := range []string{"ftp://x:1", "http://", "http://ok:1,::bad"} {
		if _, err := NewClient(addr, ""); err == nil {
			t.Errorf("NewClient(%q) accepted it", addr)
		}
	}
}

// closedAddr is the URL of a port nothing listens on.
func closedAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := "http://" + l.Addr().String()
	l.Close()
	return addr
}
