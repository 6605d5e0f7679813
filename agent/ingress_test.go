package agent

import (
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/skein-dev/skein/api"
	"github.com/skein-dev/skein/internal/testutil"
	"github.com/skein-dev/skein/structs"
)

// ingressGet sends GET path to the agent's ingress with the token (""
// none) and returns the status and body.
func ingressGet(t *testing.T, hc *http.Client, a *Agent, path, token string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, a.IngressAddr()+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func TestIngress_RunsOnlyWhenGivenAPort(t *testing.T) {
	t.Parallel()
	a, _ := startAgent(t, testConfig(t, t.TempDir()))
	if addr := a.IngressAddr(); addr != "" {
		t.Errorf("an agent given no ingress port serves one at %s", addr)
	}
}

func TestIngress_ALoopbackAgentWithoutATokenServesPlainHTTP(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t, t.TempDir())
	cfg.IngressPort = -1
	a, admin, _ := startAgentAdmin(t, cfg)
	if !strings.HasPrefix(a.IngressAddr(), "http://127.0.0.1:") {
		t.Fatalf("ingress at %q, want plain HTTP on the bind address", a.IngressAddr())
	}
	code, body := ingressGet(t, http.DefaultClient, a, "/llama/v1/models", admin)
	if code != http.StatusNotFound || body != "service \"llama\" not found\n" {
		t.Errorf("got %d %q, want 404 naming the service", code, body)
	}
}

func TestIngress_ASecureAgentServesHTTPSAndWantsTheAPIsToken(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t, t.TempDir())
	cfg.Security = SecurityTLS
	cfg.IngressPort = -1
	a, _ := startAgentWithoutACL(t, cfg) // about the cluster's API token, which works only until the bootstrap
	if !strings.HasPrefix(a.IngressAddr(), "https://") {
		t.Fatalf("ingress at %q, want HTTPS", a.IngressAddr())
	}
	tok, err := os.ReadFile(filepath.Join(a.DataDir(), "api-token"))
	if err != nil {
		t.Fatal(err)
	}
	bundle, err := os.ReadFile(a.secure.CACertPath())
	if err != nil {
		t.Fatal(err)
	}
	conf, err := api.ClusterTLS(bundle)
	if err != nil {
		t.Fatal(err)
	}
	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: conf}, Timeout: time.Minute}
	testutil.WaitFor(t, 10*time.Second, func() error {
		resp, err := hc.Get(a.IngressAddr() + "/")
		if err != nil {
			return err
		}
		// Closed, or its connection waits for it to be read until the
		// client's timeout, past the end of a package whose tests run
		// in parallel: the leak check at its end sees that.
		return resp.Body.Close()
	})
	if code, body := ingressGet(t, hc, a, "/llama/", ""); code != http.StatusUnauthorized {
		t.Errorf("without a token: %d %q, want 401", code, body)
	}
	if code, body := ingressGet(t, hc, a, "/llama/", "wrong"); code != http.StatusUnauthorized {
		t.Errorf("with a wrong token: %d %q, want 401", code, body)
	}
	if code, body := ingressGet(t, hc, a, "/llama/", strings.TrimSpace(string(tok))); code != http.StatusNotFound {
		t.Errorf("with the cluster's token: %d %q, want 404 for a service that does not exist", code, body)
	}
	// Without the cluster's CA the certificate is not trusted.
	untrusted := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{}}, Timeout: time.Minute}
	if _, err := untrusted.Get(a.IngressAddr() + "/"); err == nil {
		t.Error("a client without the cluster's CA trusted the ingress")
	}
}

// runningReplicas returns the running allocations of the service's
// replicas that report the health wanted (nil: any, reported or not).
func runningReplicas(a *Agent, service string, healthy *bool) []*structs.Allocation {
	var out []*structs.Allocation
	for _, job := range a.fsm.ServiceReplicas(service) {
		for _, alloc := range a.fsm.Allocs(job.ID) {
			if alloc.State != structs.AllocRunning {
				continue
			}
			if healthy == nil || alloc.Health != nil && alloc.Health.Healthy == *healthy {
				out = append(out, alloc)
			}
		}
	}
	return out
}

// waitReplicas waits until n of the service's replicas run with the
// health wanted, and returns them.
func waitReplicas(t testing.TB, a *Agent, service string, n int, healthy bool) []*structs.Allocation {
	t.Helper()
	var got []*structs.Allocation
	testutil.WaitFor(t, 30*time.Second, func() error {
		got = runningReplicas(a, service, &healthy)
		if len(got) != n {
			var jobs []string
			for _, j := range a.fsm.ServiceReplicas(service) {
				jobs = append(jobs, fmt.Sprintf("%s %s (%s)", j.ID, j.State, j.Reason))
			}
			return fmt.Errorf("%d replicas running with healthy=%v, want %d; all running: %d; replicas: %s", len(got), healthy, n,
				len(runningReplicas(a, service, nil)), strings.Join(jobs, ", "))
		}
		return nil
	})
	return got
}

// A service of two replicas of busybox's httpd, reached through the
// ingress: not served while its replicas are starting, served once they
// are healthy, and still served while one of them is killed and replaced.
func TestIngress_AServiceOfTwoReplicasIsServedThroughTheLossOfOne(t *testing.T) {
	t.Parallel()
	if _, err := os.Stat(testutil.Busybox); err != nil {
		t.Skipf("busybox's httpd serves the replicas: %v", err)
	}
	cfg := testConfig(t, t.TempDir())
	cfg.IngressPort = -1
	a, admin, _ := startAgentAdmin(t, cfg)
	site := testutil.SharedDir(t)
	if err := os.WriteFile(filepath.Join(site, "index.html"), []byte("hello\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := a.apply(structs.ServiceRegisterType, structs.ServiceRegisterRequest{Service: structs.Service{
		ID: structs.NewID(), Name: "web", Replicas: 2, CreatedAt: time.Now().UTC(),
		Spec: structs.ServiceSpec{
			Job: structs.JobSpec{Command: []string{"/bin/sh", "-c", "exec " + testutil.Busybox + " httpd -f -p $PORT -h " + site}},
			// Healthy once the site has /health; starting until then.
			Health: &structs.HealthCheck{Kind: structs.HealthHTTP, Path: "/health",
				Interval: structs.Duration(200 * time.Millisecond), Timeout: structs.Duration(200 * time.Millisecond),
				Grace: structs.Duration(time.Hour)},
		},
	}})
	if err != nil {
		t.Fatalf("register the service: %v", err)
	}
	waitReplicas(t, a, "web", 2, false)
	code, body := ingressGet(t, http.DefaultClient, a, "/web/index.html", admin)
	if code != http.StatusServiceUnavailable || body != "service web has no healthy replica: 2 starting\n" {
		t.Errorf("while the replicas start: %d %q, want 503 saying they start", code, body)
	}

	if err := os.WriteFile(filepath.Join(site, "health"), []byte("ok\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	replicas := waitReplicas(t, a, "web", 2, true)
	if replicas[0].NodeID != a.NodeID() || replicas[0].MasterPort == replicas[1].MasterPort {
		t.Fatalf("replicas %+v and %+v: want two on this node, on ports of their own", replicas[0], replicas[1])
	}
	serve := func(what string) {
		t.Helper()
		for i := range 20 {
			if code, body := ingressGet(t, http.DefaultClient, a, "/web/index.html", admin); code != http.StatusOK || body != "hello\n" {
				t.Fatalf("%s, request %d: %d %q, want the site", what, i, code, body)
			}
		}
	}
	serve("both replicas healthy")

	// Kill one replica's process: the other serves every request, those
	// sent to the dead one before the state knows included.
	killed := replicas[0]
	killJobGroup(t, a.allocDir(), killed.ID)
	serve("one replica killed")

	// Its replica job runs again, on a new allocation, and serves too.
	testutil.WaitFor(t, 30*time.Second, func() error {
		healthy := true
		for _, alloc := range runningReplicas(a, "web", &healthy) {
			if alloc.JobID == killed.JobID && alloc.ID != killed.ID {
				return nil
			}
		}
		return fmt.Errorf("replica %s has not come back healthy", killed.JobID)
	})
	serve("the killed replica back")
}
