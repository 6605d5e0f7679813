package server

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"net/http"
	"net/http/httputil"
	"net/url"
	"sync"
	"syscall"
	"time"

	"github.com/skein-dev/skein/api"
)

// PTYProcess is a command running under a terminal beside a job (Config.
// ExecPTY, agent/runner's PTY): Read and Write are its terminal's output
// and input.
type PTYProcess interface {
	io.ReadWriter
	// Resize sets the terminal's size.
	Resize(rows, cols uint16) error
	// Signal signals the command's process group.
	Signal(sig syscall.Signal) error
	// Done is closed once the command has ended; Wait then says how.
	Done() <-chan struct{}
	Wait() (int, error)
	// Close ends the session: the command is hung up on, then killed.
	Close() error
}

// ptySignals are the signals a terminal's user may send its command.
var ptySignals = map[byte]syscall.Signal{
	byte(syscall.SIGHUP):  syscall.SIGHUP,
	byte(syscall.SIGINT):  syscall.SIGINT,
	byte(syscall.SIGQUIT): syscall.SIGQUIT,
	byte(syscall.SIGKILL): syscall.SIGKILL,
	byte(syscall.SIGTERM): syscall.SIGTERM,
}

// ptyDrain bounds how long a session's last output is read once its
// command has ended (something it started may still hold the terminal).
const ptyDrain = time.Second

// ptyLastWrite bounds the writes of a session once its command has
// ended: its last output and its exit code.
const ptyLastWrite = 10 * time.Second

// relayUpgrade passes a request that upgrades its connection (a
// terminal) to the node at addr that runs the job, with body, and relays
// the stream both ways until either end closes it (net/http lifts the
// server's bounds off the connection it hands over). As proxy does, it
// never passes on a request that was forwarded to it.
func (s *allocRoutes) relayUpgrade(w http.ResponseWriter, r *http.Request, addr string, body []byte) {
	if r.Header.Get(api.ForwardedHeader) != "" {
		writeError(w, http.StatusMisdirectedRequest, fmt.Errorf("the request was forwarded to a node that does not run the job"))
		return
	}
	target, err := url.Parse(addr)
	if err != nil {
		writeError(w, http.StatusInternalServerError, err)
		return
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	r.ContentLength = int64(len(body))
	proxy := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(target)
			pr.Out.Header.Set(api.ForwardedHeader, s.cfg.NodeName)
		},
		Transport: s.cfg.Peers.Streams().Transport,
		ErrorHandler: func(w http.ResponseWriter, _ *http.Request, err error) {
			writeError(w, http.StatusBadGateway, fmt.Errorf("reach the node at %s: %w", addr, err))
		},
	}
	proxy.ServeHTTP(w, r)
}

// servePTY runs a command under a terminal beside one of this node's
// allocations and serves it on the request's connection, upgraded to
// api.PTYUpgrade: frames of keys, resizes and signals in; of output, then
// the exit code, out. The session ends when the command does, when the
// client goes (the command is hung up on) or when the agent shuts down.
func (s *allocRoutes) servePTY(w http.ResponseWriter, allocID string, req api.ExecRequest) {
	if s.cfg.ExecPTY == nil {
		writeError(w, http.StatusNotImplemented, fmt.Errorf("this node runs no jobs"))
		return
	}
	ctx, cancel := context.WithCancel(s.ctx)
	defer cancel()
	p, err := s.cfg.ExecPTY(ctx, allocID, req.Command, req.Term, req.Rows, req.Cols)
	if err != nil {
		writeError(w, http.StatusConflict, err)
		return
	}
	defer p.Close()
	// net/http lifts the server's read and write bounds off a connection
	// it hands over: a session lasts as long as its user types. The
	// handler runs as long as the session, so the connection counts as
	// busy, never idle, meanwhile (Serving).
	conn, brw, err := http.NewResponseController(w).Hijack()
	if err != nil {
		writeError(w, http.StatusInternalServerError, fmt.Errorf("take over the connection for a terminal: %w", err))
		return
	}
	defer conn.Close()
	if _, err := io.WriteString(conn, "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: "+api.PTYUpgrade+"\r\n\r\n"); err != nil {
		return
	}
	var wmu sync.Mutex
	send := func(typ byte, payload []byte) error {
		wmu.Lock()
		defer wmu.Unlock()
		return api.WritePTYFrame(conn, typ, payload)
	}
	go func() {
		// The client's frames; once it goes, the command is hung up on.
		defer p.Close()
		for {
			typ, payload, err := api.ReadPTYFrame(brw.Reader)
			if err != nil {
				return
			}
			switch typ {
			case api.PTYInput:
				_, err = p.Write(payload)
			case api.PTYResize:
				if len(payload) == 4 {
					err = p.Resize(binary.BigEndian.Uint16(payload[0:2]), binary.BigEndian.Uint16(payload[2:4]))
				}
			case api.PTYSignal:
				if sig, ok := ptySignals[payload0(payload)]; ok && len(payload) == 1 {
					err = p.Signal(sig)
				}
			default:
				_ = send(api.PTYError, fmt.Appendf(nil, "%v: type %q", api.ErrPTYFrame, typ))
				return
			}
			if err != nil {
				s.log.Debug("terminal input", "alloc", allocID, "error", err)
			}
		}
	}()
	outDone := make(chan struct{})
	go func() {
		defer close(outDone)
		buf := make([]byte, 16<<10)
		for {
			n, err := p.Read(buf)
			if n > 0 && send(api.PTYOutput, buf[:n]) != nil {
				return
			}
			if err != nil {
				return
			}
		}
	}()
	select {
	case <-p.Done():
	case <-ctx.Done():
		_ = p.Close()
	}
	// A client that stops reading does not hold the session past its end.
	_ = conn.SetWriteDeadline(time.Now().Add(ptyLastWrite))
	select {
	case <-outDone:
	case <-time.After(ptyDrain):
	}
	code, err := p.Wait()
	if err != nil {
		_ = send(api.PTYError, []byte(err.Error()))
		return
	}
	var b [4]byte
	binary.BigEndian.PutUint32(b[:], uint32(int32(code)))
	_ = send(api.PTYExit, b[:])
}

// payload0 is a payload's first byte, 0 when it has none.
func payload0(p []byte) byte {
	if len(p) == 0 {
		return 0
	}
	return p[0]
}
