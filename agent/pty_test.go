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
	"testing"
	"time"

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
			return fmt.Errorf("the screen does not show %q; its end: %q", want, got[max(0, len(got)-200):])
		}
		return nil
	})
}

// A job's owner types into a shell under a terminal beside the job,
// through the node that does not run it, over the cluster's TLS: the
// shell sees the terminal's size and a resize, and the session ends
// with the shell's exit code. Another user is refused.
func TestPTY_OwnerTypesIntoAShellThroughTheOtherNode(t *testing.T) {
	tc := startClusterWith(t, 2, func(_ int, cfg *Config) {
		cfg.Security = SecurityTLS
		cfg.IngressPort = -1
	})
	ctx := context.Background()
	admin := tc.client(tc.agents[0])
	token := func(user string) string {
		tok, err := admin.CreateACLToken(ctx, api.ACLTokenCreateRequest{User: user, Role: structs.RoleSubmitter})
		if err != nil {
			t.Fatal(err)
		}
		return tok.Token
	}
	alice, bob := token("alice"), token("bob")
	job, err := clientFor(t, tc.agents[0], alice).SubmitJob(ctx, api.SubmitRequest{RequestID: structs.NewID(),
		Spec: structs.JobSpec{Command: []string{"sleep", "300"}, GPUs: 4}})
	if err != nil {
		t.Fatal(err)
	}
	waitJob(t, tc.agents[0], job.ID, runningAlloc)
	var runsOn string
	for _, a := range tc.agents[0].fsm.Allocs(job.ID) {
		runsOn = a.NodeID
	}
	other := tc.agents[1-tc.indexOf(runsOn)]
	req := api.ExecRequest{Command: []string{"sh"}, Rows: 24, Cols: 80, Term: "xterm"}

	_, err = clientFor(t, other, bob).ExecPTY(ctx, job.ID, req)
	var apiErr *api.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusForbidden {
		t.Fatalf("bob's terminal in alice's job through %s: %v, want 403", other.Name(), err)
	}

	var s *api.PTYSession
	// The node asked may not have heard yet that the job runs.
	testutil.WaitFor(t, 10*time.Second, func() error {
		s, err = clientFor(t, other, alice).ExecPTY(ctx, job.ID, req)
		return err
	})
	defer s.Close()
	sc := readScreen(s)
	if _, err := io.WriteString(s, "stty size\n"); err != nil {
		t.Fatal(err)
	}
	sc.waitFor(t, "24 80")
	if err := s.Resize(30, 100); err != nil {
		t.Fatal(err)
	}
	if _, err := io.WriteString(s, "stty size; echo hi; exit 3\n"); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-sc.done:
		if !errors.Is(err, io.EOF) {
			t.Fatalf("the session ended with %v; the screen's end: %q", err, sc.String()[max(0, len(sc.String())-200):])
		}
	case <-time.After(20 * time.Second):
		t.Fatalf("the session did not end; the screen's end: %q", sc.String()[max(0, len(sc.String())-200):])
	}
	got := sc.String()
	if !strings.Contains(got, "30 100") || !strings.Contains(got, "\nhi\r\n") {
		t.Errorf("the screen after a resize to 30x100 and echo hi: %q", got[max(0, len(got)-200):])
	}
	if s.ExitCode() != 3 {
		t.Errorf("exit code %d, want 3", s.ExitCode())
	}
}
