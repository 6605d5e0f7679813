package agent

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/skein-dev/skein/agent/ingress"
	"github.com/skein-dev/skein/agent/server"
	"github.com/skein-dev/skein/api"
	"github.com/skein-dev/skein/internal/testutil"
	"github.com/skein-dev/skein/structs"
)

// floodEnv makes the test binary a flood of idle connections, in a process
// of its own as an attacker's would be: ADDR,N,FROM[,FROM...] opens N
// connections to ADDR from the loopback addresses FROM in turn, dials each
// again once the server closes it, and stops when its stdin closes. The
// test process then holds the servers' ends only, within its descriptors.
const floodEnv = "SKEIN_TEST_FLOOD"

func runFlood(spec string) int {
	parts := strings.Split(spec, ",")
	n, err := strconv.Atoi(parts[1])
	if len(parts) < 3 || err != nil {
		fmt.Fprintf(os.Stderr, "%s=%q: want ADDR,N,FROM[,FROM...]\n", floodEnv, spec)
		return 2
	}
	abuse := testutil.StartAbuse(testutil.AbuseConfig{Addr: parts[0], From: parts[2:], Idle: n, Redial: 2 * time.Second})
	_, _ = io.Copy(io.Discard, os.Stdin)
	abuse.Stop()
	return 0
}

// startFlood starts a flood of n idle connections to addr from 50
// loopback addresses, in a process of its own; it ends with the test or
// when stopped.
func startFlood(t *testing.T, addr string, n int) (stop func()) {
	t.Helper()
	from := make([]string, 50)
	for i := range from {
		from[i] = fmt.Sprintf("127.0.9.%d", i+1)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), floodEnv+"="+addr+","+strconv.Itoa(n)+","+strings.Join(from, ","))
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start the flood: %v", err)
	}
	var once sync.Once
	stop = func() {
		once.Do(func() {
			stdin.Close()
			if err := cmd.Wait(); err != nil {
				t.Errorf("the flood: %v", err)
			}
		})
	}
	t.Cleanup(stop)
	return stop
}

// 10,000 idle connections from 50 other addresses, as many as the door's
// budget, at the API of one agent and at the ingress of another (the
// process's descriptors hold one such budget, not two): a real client's
// requests to both doors are answered every time, the flood keeps its
// connections but those the client's took the places of, and a flood of
// one door takes nothing of the other's budget.
func TestFlood_TenThousandIdleConnections_ARealClientIsStillAnswered(t *testing.T) {
	const flood = 10000
	for _, door := range []struct {
		name               string
		apiConns, ingConns int
		addr               func(a *Agent) string
		stats, otherStats  func(a *Agent) server.ConnStats
		otherBudget        string
	}{
		{"the API", flood, 1000, func(a *Agent) string { return a.listener.Addr().String() },
			(*Agent).ConnStats, (*Agent).IngressConnStats, "the ingress"},
		{"the ingress", 1000, flood, func(a *Agent) string { return strings.TrimPrefix(a.IngressAddr(), "http://") },
			(*Agent).IngressConnStats, (*Agent).ConnStats, "the API"},
	} {
		t.Run(door.name, func(t *testing.T) {
			cfg := testConfig(t, t.TempDir())
			cfg.IngressPort = -1
			cfg.MaxConns, cfg.IngressMaxConns, cfg.MaxConnsPerClient = door.apiConns, door.ingConns, 256
			// The flood's connections stay idle for the test's length:
			// only the budgets are at stake here, not the header timeouts.
			cfg.APITimeouts = server.Timeouts{ReadHeader: 5 * time.Minute}
			cfg.IngressTimeouts = ingress.Timeouts{ReadHeader: 5 * time.Minute}
			a, admin := startAgent(t, cfg)
			token := userToken(t, admin, "rita", structs.RoleReader)
			user := clientFrom(t, a, "127.0.0.90", token)
			userIngress := fromAddr("127.0.0.90", a)
			stop := startFlood(t, door.addr(a), flood)
			defer stop()
			testutil.WaitFor(t, 2*time.Minute, func() error {
				if s := door.stats(a); s.Users < flood {
					return fmt.Errorf("%s holds %d of the flood's connections, want %d", door.name, s.Users, flood)
				}
				return nil
			})
			before := door.stats(a)
			for i := range 8 {
				if _, err := user.Status(context.Background()); err != nil {
					t.Fatalf("the real client's status %d during the flood: %v", i+1, err)
				}
				if code := statusWith(t, userIngress, a.IngressAddr()+"/nope/", token); code != http.StatusNotFound {
					t.Fatalf("the real client's request %d to the ingress during the flood: %d, want 404", i+1, code)
				}
			}
			after := door.stats(a)
			if taken := after.Evicted - before.Evicted; taken > 8 {
				t.Errorf("the real client's requests took the places of %d idle connections, want a few", taken)
			}
			if after.Users < flood-8 {
				t.Errorf("%s holds %d connections, want the flood's %d but the few the client took", door.name, after.Users, flood)
			}
			if other := door.otherStats(a); other.Users > 4 {
				t.Errorf("a flood of %s shows as %d connections of %s's budget, want only the client's", door.name, other.Users, door.otherBudget)
			}
		})
	}
}

// A request whose body comes a byte a second is cut off by the ingress
// within its body grace (10 s), rather than holding its connection as long
// as the client likes.
func TestIngress_ABodyThatComesAByteASecondIsCutOff(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t, t.TempDir())
	cfg.IngressPort = -1
	a, admin := startAgent(t, cfg)
	seen := serveReplica(t, a, admin, "upload")
	c, err := net.Dial("tcp", strings.TrimPrefix(a.IngressAddr(), "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := fmt.Fprintf(c, "POST /upload/files HTTP/1.1\r\nHost: skein\r\nContent-Length: 1000\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	done := make(chan struct{})
	go func() {
		defer close(done)
		for range 1000 {
			if _, err := c.Write([]byte("x")); err != nil {
				return
			}
			select {
			case <-time.After(time.Second):
			case <-done:
			}
		}
	}()
	// Far past the grace, short of a minute.
	if err := c.SetReadDeadline(time.Now().Add(45 * time.Second)); err != nil {
		t.Fatal(err)
	}
	answer, err := io.ReadAll(c)
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		t.Fatalf("a body at a byte a second still held its connection after %s", time.Since(start).Round(time.Second))
	}
	took := time.Since(start)
	if took > 30*time.Second {
		t.Errorf("a body at a byte a second was cut off after %s, want within about the 10 s grace", took.Round(time.Second))
	}
	if strings.HasPrefix(string(answer), "HTTP/1.1 200") || seen.count() > 0 && seen.completeBodies() > 0 {
		t.Errorf("the slow body was served: %q", answer)
	}
	t.Logf("cut off after %s: %q", took.Round(100*time.Millisecond), firstLine(string(answer)))
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\r\n")
	return line
}

// serveReplica makes a public service of one replica whose process
// sleeps, and serves its port in the replica's place with what the test
// sees: what a replica of the service would get.
func serveReplica(t *testing.T, a *Agent, admin *api.Client, name string) *seenRequests {
	t.Helper()
	if _, err := admin.CreateService(context.Background(), api.ServiceCreateRequest{Name: name, Replicas: 1,
		Spec: structs.ServiceSpec{Public: true, Job: structs.JobSpec{Command: []string{"sleep", "1000"}}}}); err != nil {
		t.Fatalf("create service %s: %v", name, err)
	}
	var replica *structs.Allocation
	testutil.WaitFor(t, 30*time.Second, func() error {
		got := runningReplicas(a, name, nil)
		if len(got) != 1 {
			return fmt.Errorf("%d replicas of %s running, want 1", len(got), name)
		}
		replica = got[0]
		return nil
	})
	l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(replica.MasterPort)))
	if err != nil {
		t.Fatalf("listen on the replica's port: %v", err)
	}
	seen := &seenRequests{}
	srv := &http.Server{Handler: seen, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(func() { _ = srv.Close() })
	return seen
}
