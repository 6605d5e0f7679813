package agent

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/skein-dev/skein/api"
	"github.com/skein-dev/skein/cluster"
	"github.com/skein-dev/skein/structs"
)

// ErrNoLeader is returned when no leader appears within forwardWait.
var ErrNoLeader = errors.New("no leader: the cluster is electing one or has lost quorum; try again")

// peerHTTP returns an HTTP client for agent-to-agent requests with the
// given overall timeout (0: none, for log streams). In tests it honours the
// network partitions of Config.Network.
func (a *Agent) peerHTTP(timeout time.Duration) *http.Client {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	if p := a.cfg.Network; p != nil {
		dialer := &net.Dialer{Timeout: 5 * time.Second}
		from := a.listener.Addr().String()
		tr.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
			if p.Cut(from, addr) {
				// A cut drops packets, as a dead host or a pulled cable
				// does: the dial hangs until it times out.
				timeout := time.NewTimer(dialer.Timeout)
				defer timeout.Stop()
				select {
				case <-ctx.Done():
				case <-timeout.C:
				}
				return nil, fmt.Errorf("dial %s: partitioned", addr)
			}
			conn, err := dialer.DialContext(ctx, network, addr)
			if err != nil {
				return nil, err
			}
			return p.Track(conn, from, addr)
		}
	}
	return &http.Client{Timeout: timeout, Transport: tr}
}

// leader waits (up to forwardWait, or ctx) until a leader is known and
// returns its node ID and HTTP address. self is true when it is this node.
func (a *Agent) leader(ctx context.Context) (id, httpAddr string, self bool, err error) {
	ctx, cancel := context.WithTimeout(ctx, forwardWait)
	defer cancel()
	for {
		if a.raft.IsLeader() {
			return a.nodeID, a.HTTPAddr(), true, nil
		}
		if _, id := a.raft.Leader(); id != "" {
			if addr := a.httpAddrOf(id); addr != "" {
				return id, addr, false, nil
			}
		}
		select {
		case <-ctx.Done():
			return "", "", false, ErrNoLeader
		case <-a.ctx.Done():
			return "", "", false, ErrNoLeader
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// httpAddrOf finds a node's API address: from its registration, or, for a
// node not registered yet, from gossip.
func (a *Agent) httpAddrOf(nodeID string) string {
	if n, ok := a.fsm.Node(nodeID); ok && n.Addresses.HTTP != "" {
		return n.Addresses.HTTP
	}
	for _, m := range a.members() {
		if m.ID == nodeID {
			return m.HTTP
		}
	}
	return ""
}

// leaderClient returns an API client for the leader, or nil when this node
// leads.
func (a *Agent) leaderClient(ctx context.Context) (*api.Client, error) {
	_, addr, self, err := a.leader(ctx)
	if err != nil || self {
		return nil, err
	}
	return a.peerClient(addr)
}

func (a *Agent) peerClient(addr string) (*api.Client, error) {
	c, err := api.NewClient(addr, a.cfg.Token)
	if err != nil {
		return nil, err
	}
	return c.WithHTTPClient(a.forwardHTTP), nil
}

// writeRegister commits a node registration through the leader.
func (a *Agent) writeRegister(n structs.Node) error {
	c, err := a.leaderClient(a.ctx)
	if err != nil {
		return err
	}
	if c == nil {
		_, err := a.apply(structs.NodeRegisterType, structs.NodeRegisterRequest{Node: n, At: now()})
		return err
	}
	return c.Register(a.ctx, n)
}

// writeAllocUpdates commits this node's allocation reports through the leader.
func (a *Agent) writeAllocUpdates(updates []structs.AllocUpdate) error {
	c, err := a.leaderClient(a.ctx)
	if err != nil {
		return err
	}
	if c == nil {
		_, err := a.apply(structs.AllocUpdateType, structs.AllocUpdateRequest{NodeID: a.nodeID, Updates: updates})
		return err
	}
	return c.UpdateAllocs(a.ctx, a.nodeID, updates)
}

// writeGPUHealth commits this node's GPU health through the leader.
func (a *Agent) writeGPUHealth(req structs.NodeGPUHealthRequest) error {
	c, err := a.leaderClient(a.ctx)
	if err != nil {
		return err
	}
	if c == nil {
		_, err := a.apply(structs.NodeGPUHealthType, req)
		return err
	}
	return c.UpdateGPUHealth(a.ctx, req)
}

// forward passes a client's write to the leader, once: a request that was
// already forwarded is never passed on again. body is the request body
// already read, which must make the write idempotent (submissions carry a
// request ID), because a leader that died mid-request is retried: the write
// waits up to forwardWait for a leader that answers. It returns false,
// having written nothing, when this node became the leader meanwhile: the
// caller then serves the write itself.
func (a *Agent) forward(w http.ResponseWriter, r *http.Request, body []byte) bool {
	if r.Header.Get(api.ForwardedHeader) != "" {
		writeError(w, http.StatusServiceUnavailable, fmt.Errorf("%w: leadership moved while the request was forwarded; try again", cluster.ErrNotLeader))
		return true
	}
	ctx, cancel := context.WithTimeout(r.Context(), forwardWait)
	defer cancel()
	var lastErr error
	for {
		id, addr, self, err := a.leader(ctx)
		switch {
		case err != nil && lastErr != nil:
			writeError(w, http.StatusServiceUnavailable, fmt.Errorf("%w (last attempt: %v)", err, lastErr))
			return true
		case err != nil:
			writeError(w, http.StatusServiceUnavailable, err)
			return true
		case self:
			return false
		}
		attempt, abandon := context.WithCancel(ctx)
		stopWatch := a.abandonOnNewLeader(attempt, abandon, id)
		req, err := http.NewRequestWithContext(attempt, r.Method, addr+r.URL.RequestURI(), bytes.NewReader(body))
		if err != nil {
			stopWatch()
			abandon()
			writeError(w, http.StatusInternalServerError, err)
			return true
		}
		copyHeaders(req.Header, r.Header, "Content-Type", api.TokenHeader, "Authorization")
		req.Header.Set(api.ForwardedHeader, a.cfg.Name)
		resp, err := a.forwardHTTP.Do(req)
		if err == nil && resp.StatusCode != http.StatusServiceUnavailable {
			// Answered: a leadership change from now on must not cut the
			// answer short.
			stopWatch()
			defer abandon()
			defer resp.Body.Close()
			relay(w, resp)
			return true
		}
		stopWatch()
		if err == nil {
			// The node stopped leading before or while it wrote: try
			// the leader Raft names next.
			err = api.ReadError(resp)
		}
		abandon()
		// The leader this node knew is unreachable, most likely dead, or
		// no longer leads: wait for Raft to name another.
		lastErr = fmt.Errorf("forward to the leader at %s: %w", addr, err)
		select {
		case <-ctx.Done():
			writeError(w, http.StatusServiceUnavailable, fmt.Errorf("%w (last attempt: %v)", ErrNoLeader, lastErr))
			return true
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// abandonOnNewLeader cancels a forwarded attempt to the leader leaderID as
// soon as Raft names another leader, or this node, so a write sent to a
// leader that died or was cut off is retried at the new one the moment it
// is elected, instead of after the dial times out. The retried body is
// idempotent (see forward). The returned func stops the watch and must be
// called once the attempt is answered or has failed.
func (a *Agent) abandonOnNewLeader(attempt context.Context, abandon context.CancelFunc, leaderID string) (stop func()) {
	done := make(chan struct{})
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-attempt.Done():
				return
			case <-tick.C:
			}
			if _, id := a.raft.Leader(); (id != "" && id != leaderID) || a.raft.IsLeader() {
				abandon()
				return
			}
		}
	}()
	return func() {
		close(done)
		<-watched
	}
}

// proxy passes a request that only another node can answer (its logs, a
// fault injected into its simulated GPUs) to that node, with body, and
// streams the answer back.
func (a *Agent) proxy(w http.ResponseWriter, r *http.Request, addr string, body []byte) {
	if r.Header.Get(api.ForwardedHeader) != "" {
		writeError(w, http.StatusMisdirectedRequest, errors.New("the request was forwarded to a node that does not hold the data"))
		return
	}
	req, err := http.NewRequestWithContext(r.Context(), r.Method, addr+r.URL.RequestURI(), bytes.NewReader(body))
	if err != nil {
		writeError(w, http.StatusInternalServerError, err)
		return
	}
	copyHeaders(req.Header, r.Header, "Content-Type", api.TokenHeader, "Authorization")
	req.Header.Set(api.ForwardedHeader, a.cfg.Name)
	resp, err := a.proxyHTTP.Do(req)
	if err != nil {
		writeError(w, http.StatusBadGateway, fmt.Errorf("reach the node at %s: %w", addr, err))
		return
	}
	defer resp.Body.Close()
	relay(w, resp)
}

func copyHeaders(dst, src http.Header, names ...string) {
	for _, n := range names {
		if v := src.Get(n); v != "" {
			dst.Set(n, v)
		}
	}
}

// relay copies a response to w, flushing as data arrives so streams stay live.
func relay(w http.ResponseWriter, resp *http.Response) {
	if ct := resp.Header.Get("Content-Type"); ct != "" {
		w.Header().Set("Content-Type", ct)
	}
	w.WriteHeader(resp.StatusCode)
	flusher, _ := w.(http.Flusher)
	buf := make([]byte, 32<<10)
	for {
		n, err := resp.Body.Read(buf)
		if n > 0 {
			if _, werr := w.Write(buf[:n]); werr != nil {
				return
			}
			if flusher != nil {
				flusher.Flush()
			}
		}
		if err != nil { // io.EOF or a broken stream: either way, done
			return
		}
	}
}
