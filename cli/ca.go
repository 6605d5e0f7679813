package cli

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strings"
	"sync"

	ucli "github.com/urfave/cli/v2"

	"github.com/skein-dev/skein/api"
)

func caCommand() *ucli.Command {
	return &ucli.Command{
		Name:  "ca",
		Usage: "the cluster's certificate authority",
		Subcommands: []*ucli.Command{{
			Name:  "export",
			Usage: "write the cluster CA bundle (PEM) for --ca-cert and SKEIN_CACERT",
			Description: "Without --ca-cert the agent cannot be verified yet: the bundle is fetched\n" +
				"without verification (and without the API token), and its fingerprint is\n" +
				"printed to compare with the one the first node logged at start.",
			Flags: []ucli.Flag{
				&ucli.StringFlag{Name: "out", Usage: "write the bundle to `FILE` (mode 0644) instead of stdout"},
			},
			Action: caExportAction,
		}},
	}
}

func caExportAction(c *ucli.Context) error {
	if _, err := cmdArgs(c); err != nil {
		return err
	}
	cl, peer, verifying, err := caClient(c)
	if err != nil {
		return err
	}
	ca, err := cl.CA(c.Context)
	var apiErr *api.Error
	if !verifying && errors.As(err, &apiErr) && (apiErr.StatusCode == http.StatusUnauthorized || apiErr.StatusCode == http.StatusForbidden) {
		return fmt.Errorf("%w (without --ca-cert skein sends no API token, as it cannot verify the agent)", err)
	}
	if err != nil {
		return err
	}
	certs, err := api.ParseCerts([]byte(strings.Join(ca.CACerts, "\n")))
	if err != nil {
		return fmt.Errorf("the agent's CA bundle: %w", err)
	}
	fp := api.Fingerprint(certs[0])
	if ca.Fingerprint != "" && !strings.EqualFold(ca.Fingerprint, fp) {
		return fmt.Errorf("the agent gives the CA fingerprint %s, but its current CA certificate has %s: refusing the bundle", ca.Fingerprint, fp)
	}
	var bundle bytes.Buffer
	for _, cert := range certs {
		_ = pem.Encode(&bundle, &pem.Block{Type: "CERTIFICATE", Bytes: cert.Raw})
	}

	chain := peer.get()
	switch {
	case verifying && chain != nil:
		fmt.Fprintf(c.App.ErrWriter, "fingerprint %s; verified with --ca-cert\n", fp)
	case chain != nil:
		// Unverified, but the agent's own certificate must come from the
		// CA it hands out, or this is not the bundle it serves with.
		if err := signedBy(bundle.Bytes(), chain); err != nil {
			return fmt.Errorf("the agent's certificate is not signed by the CA bundle it sent: refusing it: %w", err)
		}
		fallthrough
	default:
		fmt.Fprintf(c.App.ErrWriter, "fingerprint %s; not verified: compare it with the one the first node logged at start\n", fp)
	}
	if out := c.String("out"); out != "" {
		if err := os.WriteFile(out, bundle.Bytes(), 0o644); err != nil {
			return fmt.Errorf("--out: %w", err)
		}
		return nil
	}
	_, err = c.App.Writer.Write(bundle.Bytes())
	return err
}

// peerChain records the certificates the agent presented in the handshake.
type peerChain struct {
	mu    sync.Mutex
	certs []*x509.Certificate
}

func (p *peerChain) set(certs []*x509.Certificate) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.certs = certs
}

func (p *peerChain) get() []*x509.Certificate {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.certs
}

// caClient returns the client ca export fetches the bundle with, what it
// will record of the agent's certificate, and whether it verifies the
// agent: with --ca-cert as every command does; without, it cannot, so it
// skips verification and leaves the API token out.
func caClient(c *ucli.Context) (*api.Client, *peerChain, bool, error) {
	cfg, err := clusterTLS(c)
	if err != nil {
		return nil, nil, false, err
	}
	verifying := cfg != nil
	token := ""
	if verifying {
		if token, err = apiToken(c); err != nil {
			return nil, nil, false, err
		}
	} else {
		// Nothing to verify against yet: the user compares the fingerprint
		// instead (trust on first use, checked by a person).
		cfg = &tls.Config{MinVersion: tls.VersionTLS13, InsecureSkipVerify: true}
	}
	peer := &peerChain{}
	verify := cfg.VerifyConnection
	cfg.VerifyConnection = func(cs tls.ConnectionState) error {
		if verify != nil {
			if err := verify(cs); err != nil {
				return err
			}
		}
		peer.set(cs.PeerCertificates)
		return nil
	}
	cl, err := api.NewClient(c.String("addr"), token)
	if err != nil {
		return nil, nil, false, &usageError{cmd: c.Command.HelpName, err: err}
	}
	return cl.WithTimeouts(api.DefaultHedgeAfter, api.DefaultAnswerWait).WithTLS(cfg), peer, verifying, nil
}

// signedBy checks the agent's chain against the bundle it sent, as
// --ca-cert with that bundle would.
func signedBy(bundle []byte, chain []*x509.Certificate) error {
	cfg, err := api.ClusterTLS(bundle)
	if err != nil {
		return err
	}
	return cfg.VerifyConnection(tls.ConnectionState{PeerCertificates: chain})
}
