package secure

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/skein-dev/skein/api"
	"github.com/skein-dev/skein/trust"
)

// Admission timings: a joining node retries the members it was given
// until one admits it, or refuses it.
const (
	admitWait      = 2 * time.Minute
	admitCallLimit = 15 * time.Second
	admitRetryMax  = 5 * time.Second
)

// DefaultHTTPPort is the API port a --join host without a URL is asked
// for admission on.
const DefaultHTTPPort = 7470

// join admits this node with its join token: it sends a CSR to the members
// in start.JoinAddrs, checking that they hold the CA the token pins, and
// stores what the one that admits it answers.
func (s *Secure) join(start Start) (certPEM, keyPEM []byte, err error) {
	tok, err := trust.ParseJoinToken(start.JoinToken)
	if err != nil {
		return nil, nil, fmt.Errorf("join token: %w", err)
	}
	keyPEM, csr, err := s.newCSR()
	if err != nil {
		return nil, nil, err
	}
	req := api.AdmitRequest{Token: start.JoinToken, NodeID: s.cfg.NodeID, Name: s.cfg.Name, CSR: string(csr)}
	hc := &http.Client{Timeout: admitCallLimit, Transport: &http.Transport{TLSClientConfig: trust.PinnedTLS(tok.CAFingerprint)}}
	resp, err := admit(hc, AdmitURLs(start.JoinAddrs), req, s.log.Info)
	if err != nil {
		return nil, nil, err
	}
	s.bundle = []byte(strings.Join(resp.CACerts, ""))
	if _, err := trust.NewIdentity([]byte(resp.Cert), keyPEM, s.bundle); err != nil {
		return nil, nil, fmt.Errorf("the certificate the cluster sent: %w", err)
	}
	if err := s.store.SaveCA(s.bundle, nil); err != nil {
		return nil, nil, err
	}
	if err := s.store.SaveNode([]byte(resp.Cert), keyPEM); err != nil {
		return nil, nil, err
	}
	if err := s.saveKeyring(resp.Keyring); err != nil {
		return nil, nil, err
	}
	s.gossipAddrs = resp.GossipAddrs
	s.log.Info("admitted to the cluster", "ca", tok.CAFingerprint)
	return []byte(resp.Cert), keyPEM, nil
}

// admit asks each URL in turn until one admits the node. A refusal (a
// 4xx answer: the token is wrong, expired, used up or revoked) ends it at
// once; unreachable members and elections are retried for admitWait.
func admit(hc *http.Client, urls []string, req api.AdmitRequest, logf func(string, ...any)) (*api.AdmitResponse, error) {
	ctx, cancel := context.WithTimeout(context.Background(), admitWait)
	defer cancel()
	backoff := 250 * time.Millisecond
	var lastErr error
	for {
		for _, u := range urls {
			c, err := api.NewClient(u, "")
			if err != nil {
				return nil, fmt.Errorf("--join %s: %w", u, err)
			}
			resp, err := c.WithHTTPClient(hc).Admit(ctx, req)
			if err == nil {
				return resp, nil
			}
			if errors.Is(err, trust.ErrPinMismatch) {
				return nil, fmt.Errorf("%s does not hold the CA the join token pins (a token of another cluster?): %w", u, err)
			}
			var apiErr *api.Error
			if errors.As(err, &apiErr) && apiErr.StatusCode >= 400 && apiErr.StatusCode < 500 {
				return nil, fmt.Errorf("%s refused to admit this node: %w", u, err)
			}
			lastErr = fmt.Errorf("%s: %w", u, err)
		}
		logf("not admitted yet; retrying", "error", lastErr, "retry_in", backoff)
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("no member admitted this node within %s: %w", admitWait, lastErr)
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, admitRetryMax)
	}
}

// AdmitURLs turns --join addresses into the API URLs admission asks: a
// URL is used as it is; a host, or a host:port naming the gossip port,
// is asked on DefaultHTTPPort over https.
func AdmitURLs(joins []string) []string {
	var out []string
	for _, j := range joins {
		j = strings.TrimSpace(j)
		if strings.Contains(j, "://") {
			out = append(out, j)
			continue
		}
		host := j
		if h, _, err := net.SplitHostPort(j); err == nil {
			host = h
		}
		out = append(out, "https://"+net.JoinHostPort(strings.Trim(host, "[]"), strconv.Itoa(DefaultHTTPPort)))
	}
	return out
}

// GossipJoins are the --join entries gossip can dial: those that are not
// API URLs.
func GossipJoins(joins []string) []string {
	var out []string
	for _, j := range joins {
		if !strings.Contains(j, "://") {
			out = append(out, j)
		}
	}
	return out
}
