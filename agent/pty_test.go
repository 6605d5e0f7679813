package agent

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/skein-dev/skein/agent/server"
	"github.com/skein-dev/skein/api"
	"github.com/skein-dev/skein/internal/testutil"
	"github.com/skein-dev/skein/structs"
)

// screen is what a terminal session wrote, read as it comes.
type screen struct {
	mu   sync.Mutex
	b    bytes.Buffer
	done chan error
}

func readScreen(s *api.PTYSession) *screen {
	sc := &screen{done: make(chan error, 1)}
	go func() {
		buf := make([]byte, 4096)
		for {
			n, err := s.Read(buf)
			sc.mu.Lock()
			sc.b.Write(buf[:n])
			sc.mu.Unlock()
			if err != nil {
				sc.done <- err
				return
			}
		}
	}()
	return sc
}

// tail is the screen's last 200 bytes, for a failure's message.
func (sc *screen) tail() string {
	got := sc.String()
	return got[max(0, len(got)-200):]
}

func (sc *screen) String() string {
	sc.mu.Lock()
	defer sc.mu.Unlock()
	return sc.b.String()
}

// waitFor waits until the screen shows want.
func (sc *screen) waitFor(t *testing.T, want string) {
	t.Helper()
	testutil.WaitFor(t, 10*time.Second, func() error {
		if got := sc.String(); !strings.Contains(got, want) {
			return fmt.Errorf("the screen does not show %q; its end: %q", want, sc.tail())
		}
		return nil
	})
}

// waitEnd waits for the session to end as a shell ends (io.EOF), and
// fails the test if it ends otherwise or not within 20 s.
func (sc *screen) waitEnd(t *testing.T) {
	t.Helper()
	select {
	case err := <-sc.done:
		if !errors.Is(err, io.EOF) {
			t.Fatalf("the session ended with %v; the screen's end: %q", err, sc.tail())
		}
	case <-time.After(20 * time.Second):
		t.Fatalf("the session did not end; the screen's end: %q", sc.tail())
	}
}

// ptyBound is the test clusters' API read and write bound.
const ptyBound = 3 * time.Second

// securePTYCluster is a cluster over TLS with short API bounds, which a
// session outlives; mutate (nil: none) changes each node's config more.
func securePTYCluster(cfg *Config) {
	cfg.Security = SecurityTLS
	cfg.IngressPort = -1
	cfg.APITimeouts = server.Timeouts{Read: ptyBound, Write: ptyBound}
}

// ptyUsers makes alice's and bob's submitter tokens.
func ptyUsers(t *testing.T, tc *testCluster) (alice, bob string) {
	token := func(user string) string {
		tok, err := tc.client(tc.agents[0]).CreateACLToken(context.Background(), api.ACLTokenCreateRequest{User: user, Role: structs.RoleSubmitter})
		if err != nil {
			t.Fatal(err)
		}
		return tok.Token
	}
	return token("alice"), token("bob")
}

// submitHold submits, through c, a job that fills a node and waits until
// it runs; it returns the job and the node that runs it.
func submitHold(t *testing.T, tc *testCluster, c *api.Client) (*structs.Job, string) {
	job, err := c.SubmitJob(context.Background(), api.SubmitRequest{RequestID: structs.NewID(),
		Spec: structs.JobSpec{Command: []string{"sleep", "300"}, GPUs: 4}})
	if err != nil {
		t.Fatal(err)
	}
	waitJob(t, tc.agents[0], job.ID, runningAlloc)
	var runsOn string
	for _, a := range tc.agents[0].fsm.Allocs(job.ID) {
		runsOn = a.NodeID
	}
	return job, runsOn
}

// typeIntoAShell checks a terminal session beside alice's job through
// node via: bob is refused; alice's shell sees the terminal's size and a
// resize, the session outlives the API's bounds on a connection, and it
// ends with the shell's exit code.
func typeIntoAShell(t *testing.T, via *Agent, jobID, alice, bob string) {
	ctx := context.Background()
	req := api.ExecRequest{Command: []string{"sh"}, Rows: 24, Cols: 80, Term: "xterm"}
	_, err := clientFor(t, via, bob).ExecPTY(ctx, jobID, req)
	var apiErr *api.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusForbidden {
		t.Fatalf("bob's terminal in alice's job through %s: %v, want 403", via.Name(), err)
	}

	var s *api.PTYSession
	c := clientFor(t, via, alice)
	// The node asked may not have heard yet that the job runs.
	testutil.WaitFor(t, 10*time.Second, func() error {
		s, err = c.ExecPTY(ctx, jobID, req)
		return err
	})
	defer s.Close()
	sc := readScreen(s)
	if _, err := io.WriteString(s, "stty size\n"); err != nil {
		t.Fatal(err)
	}
	sc.waitFor(t, "24 80")
	// Idle for longer than the API's bounds: a session is not cut off.
	time.Sleep(ptyBound + time.Second)
	if err := s.Resize(30, 100); err != nil {
		t.Fatal(err)
	}
	if _, err := io.WriteString(s, "stty size; echo hi; exit 3\n"); err != nil {
		t.Fatal(err)
	}
	sc.waitEnd(t)
	if got := sc.String(); !strings.Contains(got, "30 100") || !strings.Contains(got, "\nhi\r\n") {
		t.Errorf("the screen after a resize to 30x100 and echo hi: %q", sc.tail())
	}
	if s.ExitCode() != 3 {
		t.Errorf("exit code %d, want 3", s.ExitCode())
	}

	// A signal reaches the command; one a terminal does not send
	// (SIGSTOP) is dropped.
	s, err = c.ExecPTY(ctx, jobID, api.ExecRequest{Command: []string{"sh", "-c", "echo ready; exec sleep 300"}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	sc = readScreen(s)
	sc.waitFor(t, "ready")
	if err := s.Signal(int(syscall.SIGSTOP)); err != nil {
		t.Fatal(err)
	}
	if err := s.Signal(int(syscall.SIGINT)); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-sc.done:
		if !errors.Is(err, io.EOF) || s.ExitCode() != 128+int(syscall.SIGINT) {
			t.Errorf("an interrupted command: %v, exit code %d; want 130", err, s.ExitCode())
		}
	case <-time.After(20 * time.Second):
		t.Fatalf("an interrupted command still runs; the screen's end: %q", sc.tail())
	}
}

// A job's owner types into a shell under a terminal beside the job,
// through the server that does not run it, over the cluster's TLS.
func TestPTY_OwnerTypesIntoAShellThroughTheOtherNode(t *testing.T) {
	t.Parallel()
	tc := startClusterWith(t, 2, func(_ int, cfg *Config) { securePTYCluster(cfg) })
	alice, bob := ptyUsers(t, tc)
	job, runsOn := submitHold(t, tc, clientFor(t, tc.agents[0], alice))
	typeIntoAShell(t, tc.agents[1-tc.indexOf(runsOn)], job.ID, alice, bob)
}

// Through a worker, for a job on another worker: the first passes the
// session to a server, which relays it to the second.
func TestPTY_ThroughAWorkerToAJobOnAnotherWorker(t *testing.T) {
	t.Parallel()
	tc := startWorkerClusterWith(t, 3, 1, func(_ int, cfg *Config) { securePTYCluster(cfg) })
	alice, bob := ptyUsers(t, tc)
	workers := tc.workers()
	// Three jobs that fill a node each: two run on the workers.
	for range 3 {
		job, runsOn := submitHold(t, tc, clientFor(t, tc.agents[0], alice))
		if runsOn == workers[0].nodeID {
			typeIntoAShell(t, workers[1], job.ID, alice, bob)
			return
		}
	}
	t.Fatalf("no job of three landed on worker %s", workers[0].Name())
}
