package api

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"net/http"
	"net/url"
)

// Errors of a CA bundle: one without a certificate, one holding a
// certificate that is no CA's.
var (
	ErrNoCACert = errors.New("no PEM certificate in the CA bundle")
	ErrNotCA    = errors.New("not a CA certificate")
)

// ClusterTLS returns a client TLS configuration that accepts a server whose
// certificate chains to one of the CA certificates in caBundlePEM, with TLS
// 1.3 at least.
//
// The host name is not checked: a cluster node's certificate names its node
// ID, while users and nodes dial it by IP address, so a name check would
// refuse every node. The chain is what authenticates it: only the cluster
// CA signs node certificates, and only for admitted nodes. Go's verifier
// always checks names when it checks chains, so the configuration turns it
// off (InsecureSkipVerify) and checks the chain itself in VerifyConnection,
// which runs on every handshake, resumed ones included.
func ClusterTLS(caBundlePEM []byte) (*tls.Config, error) {
	certs, err := ParseCerts(caBundlePEM)
	if err != nil {
		return nil, err
	}
	roots := x509.NewCertPool()
	for _, c := range certs {
		if !c.IsCA {
			return nil, fmt.Errorf("CA bundle: %q: %w", c.Subject.CommonName, ErrNotCA)
		}
		roots.AddCert(c)
	}
	return &tls.Config{
		MinVersion:         tls.VersionTLS13,
		InsecureSkipVerify: true, // the chain is checked in VerifyConnection; see above
		VerifyConnection: func(cs tls.ConnectionState) error {
			return verifyChain(cs.PeerCertificates, roots, x509.ExtKeyUsageServerAuth)
		},
	}, nil
}

// verifyChain checks that peer's first certificate is signed by a CA of
// roots, for usage, without looking at names: the rules the nodes verify
// each other by (trust's verifyChain). The cluster CA signs node
// certificates itself, so no CA the server sends along is taken.
func verifyChain(peer []*x509.Certificate, roots *x509.CertPool, usage x509.ExtKeyUsage) error {
	if len(peer) == 0 {
		return errors.New("the server sent no certificate")
	}
	_, err := peer[0].Verify(x509.VerifyOptions{
		Roots:     roots,
		KeyUsages: []x509.ExtKeyUsage{usage},
	})
	if err != nil {
		return fmt.Errorf("verify the server's certificate against the cluster CA: %w", err)
	}
	return nil
}

// ParseCerts decodes every CERTIFICATE block of a PEM bundle; other blocks
// are skipped. A bundle without any is ErrNoCACert.
func ParseCerts(bundle []byte) ([]*x509.Certificate, error) {
	var certs []*x509.Certificate
	for {
		var b *pem.Block
		b, bundle = pem.Decode(bundle)
		if b == nil {
			break
		}
		if b.Type != "CERTIFICATE" {
			continue
		}
		c, err := x509.ParseCertificate(b.Bytes)
		if err != nil {
			return nil, fmt.Errorf("parse CA certificate: %w", err)
		}
		certs = append(certs, c)
	}
	if len(certs) == 0 {
		return nil, ErrNoCACert
	}
	return certs, nil
}

// Fingerprint is "sha256:" and the hex SHA-256 of a certificate's DER, the
// form CA.Fingerprint takes.
func Fingerprint(cert *x509.Certificate) string {
	sum := sha256.Sum256(cert.Raw)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// CA returns the cluster CA's certificates and the current one's
// fingerprint.
func (c *Client) CA(ctx context.Context) (*CA, error) {
	var ca CA
	return &ca, c.do(ctx, http.MethodGet, "/v1/ca", nil, nil, &ca)
}

// CreateJoinToken makes a join token; the answer holds its secret, which
// the cluster does not keep.
func (c *Client) CreateJoinToken(ctx context.Context, req JoinTokenCreateRequest) (*JoinTokenCreated, error) {
	var t JoinTokenCreated
	return &t, c.do(ctx, http.MethodPost, "/v1/join-tokens", nil, req, &t)
}

// JoinTokens lists the join tokens, without their secrets.
func (c *Client) JoinTokens(ctx context.Context) ([]JoinToken, error) {
	var ts []JoinToken
	return ts, c.do(ctx, http.MethodGet, "/v1/join-tokens", nil, nil, &ts)
}

// RevokeJoinToken stops a join token from admitting more nodes; it returns
// the token as the revocation left it.
func (c *Client) RevokeJoinToken(ctx context.Context, id string) (*JoinToken, error) {
	var t JoinToken
	return &t, c.do(ctx, http.MethodDelete, "/v1/join-tokens/"+url.PathEscape(id), nil, nil, &t)
}

// Keyring reports the gossip keyring's generation and which generation
// each node has installed.
func (c *Client) Keyring(ctx context.Context) (*KeyringStatus, error) {
	var k KeyringStatus
	return &k, c.do(ctx, http.MethodGet, "/v1/keyring", nil, nil, &k)
}

// RotateKeyring starts a rotation of the gossip keyring to a new primary
// key.
func (c *Client) RotateKeyring(ctx context.Context) (*KeyringStatus, error) {
	var k KeyringStatus
	return &k, c.do(ctx, http.MethodPost, "/v1/keyring/rotate", nil, struct{}{}, &k)
}

// RevokeNode revokes a node's admission: its certificate is refused from
// then on. id is the node's full ID. The answer comes once the node is cut
// off everywhere, or says what is still under way after a while.
func (c *Client) RevokeNode(ctx context.Context, id string, req NodeRevokeRequest) (*NodeRevokeResult, error) {
	var out NodeRevokeResult
	if err := c.do(ctx, http.MethodPost, "/v1/nodes/"+url.PathEscape(id)+"/revoke", nil, req, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// Admit presents a join token and a CSR to a member of a secure cluster and
// returns what the node needs to take part. The caller's TLS configuration
// (WithTLS) decides how the member is trusted before the node has the CA.
func (c *Client) Admit(ctx context.Context, req AdmitRequest) (*AdmitResponse, error) {
	var r AdmitResponse
	return &r, c.do(ctx, http.MethodPost, "/v1/admit", nil, req, &r)
}

// Renew asks the leader to sign a new certificate for the node its current
// one (presented through WithTLS) names.
func (c *Client) Renew(ctx context.Context, req RenewRequest) (*RenewResponse, error) {
	var r RenewResponse
	return &r, c.do(ctx, http.MethodPost, "/v1/internal/renew", nil, req, &r)
}

// PushCAKey hands the CA key to the node this client talks to.
func (c *Client) PushCAKey(ctx context.Context, req CAKeyRequest) error {
	return c.do(ctx, http.MethodPost, "/v1/internal/ca-key", nil, req, nil)
}
