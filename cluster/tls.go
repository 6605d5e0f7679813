package cluster

import (
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"time"
)

// TLSPair is mutual TLS for one transport: what a node presents and checks
// when it accepts a connection, and when it dials one. This package only
// applies the two configurations; what they verify (the chain to the
// cluster CA, the node ID a certificate names, revocation) is the
// caller's, through the usual tls.Config fields and callbacks.
type TLSPair struct {
	// Server is used for accepted connections. It must require client
	// certificates: ClientAuth tls.RequireAndVerifyClientCert (the chain
	// is checked against ClientCAs), or tls.RequireAnyClientCert with a
	// VerifyPeerCertificate or VerifyConnection callback that checks it.
	Server *tls.Config
	// Client is used for dialled connections and must carry this node's
	// certificate. With an empty ServerName the dialled host is used, as
	// tls.Dial does. InsecureSkipVerify needs a VerifyPeerCertificate or
	// VerifyConnection callback.
	Client *tls.Config
}

// tlsHandshakeTimeout bounds the handshake of an accepted connection: a
// peer that connects and never completes one is dropped after this long.
const tlsHandshakeTimeout = 10 * time.Second

// tlsReady is the byte an accepting node writes once it has verified the
// dialling node's certificate. In TLS 1.3 the client's handshake ends
// before the server has checked the client certificate, so without it a
// node whose certificate is refused would learn so only at its first
// read; with it, the refusal fails the dial.
const tlsReady byte = 1

// validate checks that p makes a mutually authenticated transport.
func (p *TLSPair) validate() error {
	switch {
	case p.Server == nil || p.Client == nil:
		return fmt.Errorf("%w: raft tls needs both a server and a client configuration", ErrInvalidConfig)
	case len(p.Server.Certificates) == 0 && p.Server.GetCertificate == nil && p.Server.GetConfigForClient == nil:
		return fmt.Errorf("%w: raft tls server configuration has no certificate", ErrInvalidConfig)
	case len(p.Client.Certificates) == 0 && p.Client.GetClientCertificate == nil:
		return fmt.Errorf("%w: raft tls client configuration has no certificate", ErrInvalidConfig)
	}
	serverChecks := p.Server.VerifyPeerCertificate != nil || p.Server.VerifyConnection != nil
	switch p.Server.ClientAuth {
	case tls.RequireAndVerifyClientCert:
	case tls.RequireAnyClientCert:
		if !serverChecks {
			return fmt.Errorf("%w: raft tls server accepts any client certificate and has no callback to verify it", ErrInvalidConfig)
		}
	default:
		return fmt.Errorf("%w: raft tls server must require client certificates", ErrInvalidConfig)
	}
	if p.Client.InsecureSkipVerify && p.Client.VerifyPeerCertificate == nil && p.Client.VerifyConnection == nil {
		return fmt.Errorf("%w: raft tls client skips verification and has no callback to verify peers", ErrInvalidConfig)
	}
	return nil
}

// dialTLS completes a client handshake on conn, and waits for the peer's
// tlsReady, before the deadline, so a peer that refuses this node (or
// that this node refuses) fails the dial rather than a later read. On
// error conn is closed.
func dialTLS(conn net.Conn, cfg *tls.Config, address string, deadline time.Time) (net.Conn, error) {
	if cfg.ServerName == "" {
		host, _, err := net.SplitHostPort(address)
		if err != nil {
			host = address
		}
		cfg = cfg.Clone()
		cfg.ServerName = host
	}
	tc := tls.Client(conn, cfg)
	err := conn.SetDeadline(deadline)
	if err == nil {
		err = tc.Handshake()
	}
	if err == nil {
		var b [1]byte
		if _, err = io.ReadFull(tc, b[:]); err == nil && b[0] != tlsReady {
			err = fmt.Errorf("unexpected first byte %#x", b[0])
		}
	}
	if err == nil {
		err = conn.SetDeadline(time.Time{}) // raft sets its own per call
	}
	if err != nil {
		_ = conn.Close()
		return nil, fmt.Errorf("tls handshake with %s: %w", address, err)
	}
	return tc, nil
}

// serverConn is an accepted TLS connection whose handshake runs on first
// use, in the goroutine raft serves the connection in, so Accept never
// waits on a peer. The handshake (and the tlsReady byte) must finish
// within timeout; the deadline is cleared after, as raft sets none on
// accepted connections. A failed handshake fails every read and write,
// and raft then closes the connection.
type serverConn struct {
	*tls.Conn
	timeout time.Duration
	once    sync.Once
	err     error
}

func (c *serverConn) handshake() error {
	c.once.Do(func() {
		err := c.SetDeadline(time.Now().Add(c.timeout))
		if err == nil {
			err = c.Handshake()
		}
		if err == nil {
			_, err = c.Conn.Write([]byte{tlsReady})
		}
		if err == nil {
			err = c.SetDeadline(time.Time{})
		}
		switch {
		case errors.Is(err, io.EOF):
			// Closed before a word: another server asking whether this
			// port answers (stand.go), nothing raft should log.
			c.err = io.EOF
		case err != nil:
			c.err = fmt.Errorf("tls handshake with %s: %w", c.RemoteAddr(), err)
		}
	})
	return c.err
}

func (c *serverConn) Read(b []byte) (int, error) {
	if err := c.handshake(); err != nil {
		return 0, err
	}
	return c.Conn.Read(b)
}

func (c *serverConn) Write(b []byte) (int, error) {
	if err := c.handshake(); err != nil {
		return 0, err
	}
	return c.Conn.Write(b)
}
