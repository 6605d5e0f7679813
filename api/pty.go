package api

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
)

// PTYUpgrade is the protocol an exec with a terminal (ExecRequest.TTY)
// upgrades its connection to, in the Upgrade header: after the answer
// 101 Switching Protocols, both ends send frames.
//
// A frame is its type (one byte), its payload's length (four bytes, big
// endian, at most MaxPTYFrame) and the payload. The client sends
// PTYInput, PTYResize and PTYSignal; the node that runs the command sends
// PTYOutput, then PTYExit, or PTYError when the session broke, and
// closes the connection.
const PTYUpgrade = "skein-pty"

// The types of PTY frames.
const (
	// PTYInput is keys typed: bytes for the terminal's input.
	PTYInput byte = 'i'
	// PTYResize is the terminal's new size: rows then columns, two
	// bytes each, big endian.
	PTYResize byte = 'r'
	// PTYSignal is a signal for the command's process group: one byte,
	// its number (SIGINT, SIGQUIT, SIGTERM, SIGHUP, SIGKILL only).
	PTYSignal byte = 's'
	// PTYOutput is what the command wrote to the terminal.
	PTYOutput byte = 'o'
	// PTYExit ends a session: the command's exit code, four bytes, big
	// endian (128+N when signal N killed it).
	PTYExit byte = 'x'
	// PTYError ends a session that broke: why, in words.
	PTYError byte = 'e'
)

// MaxPTYFrame bounds a frame's payload.
const MaxPTYFrame = 32 << 10

// ErrPTYFrame is a frame that breaks the protocol.
var ErrPTYFrame = errors.New("bad terminal frame")

// WritePTYFrame writes one frame.
func WritePTYFrame(w io.Writer, typ byte, payload []byte) error {
	if len(payload) > MaxPTYFrame {
		return fmt.Errorf("%w: %d bytes, more than the limit of %d", ErrPTYFrame, len(payload), MaxPTYFrame)
	}
	b := make([]byte, 5+len(payload))
	b[0] = typ
	binary.BigEndian.PutUint32(b[1:5], uint32(len(payload)))
	copy(b[5:], payload)
	_, err := w.Write(b)
	return err
}

// ReadPTYFrame reads one frame; a payload over MaxPTYFrame is an error
// (ErrPTYFrame), and nothing of it is read.
func ReadPTYFrame(r io.Reader) (typ byte, payload []byte, err error) {
	var h [5]byte
	if _, err := io.ReadFull(r, h[:]); err != nil {
		return 0, nil, err
	}
	n := binary.BigEndian.Uint32(h[1:5])
	if n > MaxPTYFrame {
		return 0, nil, fmt.Errorf("%w: %d bytes, more than the limit of %d", ErrPTYFrame, n, MaxPTYFrame)
	}
	payload = make([]byte, n)
	if _, err := io.ReadFull(r, payload); err != nil {
		return 0, nil, err
	}
	return h[0], payload, nil
}

// PTYSession is a command running under a terminal (Client.ExecPTY):
// Write sends keys, Resize and Signal what their names say; Read reads
// what it writes to the terminal until it ends, when Read returns io.EOF
// and ExitCode how it ended.
type PTYSession struct {
	conn io.ReadWriteCloser
	rd   *bufio.Reader
	wmu  sync.Mutex
	// pending is what is left of the last output frame.
	pending []byte
	code    int
	err     error
	done    bool
}

// ExecPTY runs a command under a terminal beside one rank of a running
// job (req.TTY is set for it), through one agent the client names (the
// one that answered last, the first at the start): an interactive
// session is never sent twice. A refusal (not the owner,
// the job not running) is an *Error, as for Exec.
func (c *Client) ExecPTY(ctx context.Context, id string, req ExecRequest) (*PTYSession, error) {
	req.TTY = true
	body, err := json.Marshal(req)
	if err != nil {
		return nil, fmt.Errorf("encode request: %w", err)
	}
	base := c.bases[int(c.pref.Load())%len(c.bases)]
	u := *base
	u.RawPath = strings.TrimSuffix(base.EscapedPath(), "/") + "/v1/jobs/" + url.PathEscape(id) + "/exec"
	u.Path = strings.TrimSuffix(base.Path, "/") + "/v1/jobs/" + id + "/exec"
	hreq, err := http.NewRequestWithContext(ctx, http.MethodPost, u.String(), bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("build request: %w", err)
	}
	hreq.Header.Set("Content-Type", "application/json")
	hreq.Header.Set("Connection", "Upgrade")
	hreq.Header.Set("Upgrade", PTYUpgrade)
	if c.token != "" {
		hreq.Header.Set(TokenHeader, c.token)
	}
	resp, err := c.http.Do(hreq)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusSwitchingProtocols {
		return nil, ReadError(resp)
	}
	conn, ok := resp.Body.(io.ReadWriteCloser)
	if !ok {
		resp.Body.Close()
		return nil, errors.New("the agent switched protocols on a connection that cannot be written")
	}
	return &PTYSession{conn: conn, rd: bufio.NewReader(conn)}, nil
}

// Write sends keys.
func (s *PTYSession) Write(p []byte) (int, error) {
	for off := 0; off < len(p); off += MaxPTYFrame {
		if err := s.send(PTYInput, p[off:min(len(p), off+MaxPTYFrame)]); err != nil {
			return off, err
		}
	}
	return len(p), nil
}

// Resize tells the terminal its new size.
func (s *PTYSession) Resize(rows, cols uint16) error {
	var b [4]byte
	binary.BigEndian.PutUint16(b[0:2], rows)
	binary.BigEndian.PutUint16(b[2:4], cols)
	return s.send(PTYResize, b[:])
}

// Signal sends signal number sig to the command's process group.
func (s *PTYSession) Signal(sig int) error {
	if sig <= 0 || sig > 255 {
		return fmt.Errorf("signal %d: out of range", sig)
	}
	return s.send(PTYSignal, []byte{byte(sig)})
}

func (s *PTYSession) send(typ byte, p []byte) error {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	return WritePTYFrame(s.conn, typ, p)
}

// Read reads the terminal's output; io.EOF once the command ended
// (ExitCode), or the session's error.
func (s *PTYSession) Read(p []byte) (int, error) {
	for len(s.pending) == 0 {
		if s.done {
			return 0, s.endErr()
		}
		typ, payload, err := ReadPTYFrame(s.rd)
		if err != nil {
			s.done = true
			if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
				err = errors.New("the session broke off before the command ended")
			}
			s.err = err
			continue
		}
		switch typ {
		case PTYOutput:
			s.pending = payload
		case PTYExit:
			if len(payload) != 4 {
				s.done, s.err = true, fmt.Errorf("%w: exit frame of %d bytes", ErrPTYFrame, len(payload))
				continue
			}
			s.done, s.code = true, int(int32(binary.BigEndian.Uint32(payload)))
		case PTYError:
			s.done, s.err = true, errors.New(string(payload))
		default:
			s.done, s.err = true, fmt.Errorf("%w: type %q", ErrPTYFrame, typ)
		}
	}
	n := copy(p, s.pending)
	s.pending = s.pending[n:]
	return n, nil
}

func (s *PTYSession) endErr() error {
	if s.err != nil {
		return s.err
	}
	return io.EOF
}

// ExitCode is the command's exit code, once Read returned io.EOF.
func (s *PTYSession) ExitCode() int { return s.code }

// Close ends the session; a command still running gets SIGHUP, as when
// a terminal hangs up.
func (s *PTYSession) Close() error { return s.conn.Close() }
