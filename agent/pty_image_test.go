package agent

import (
	"context"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/skein-dev/skein/api"
	"github.com/skein-dev/skein/internal/testutil"
	"github.com/skein-dev/skein/structs"
)

// A terminal beside an image job, end to end through the agent and the
// engine: the command runs in the job's container under the engine's
// terminal, sees its size and a resize, and its exit code comes back.
func TestPTY_InAnImageJobsContainer(t *testing.T) {
	_, c, image := imageAgent(t)
	ctx := context.Background()
	job, err := c.SubmitJob(ctx, api.SubmitRequest{RequestID: structs.NewID(),
		Spec: structs.JobSpec{Image: image, Command: []string{"sleep", "3600"}}})
	if err != nil {
		t.Fatal(err)
	}
	var s *api.PTYSession
	testutil.WaitFor(t, 30*time.Second, func() error {
		s, err = c.ExecPTY(ctx, job.ID, api.ExecRequest{Command: []string{"sh"}, Rows: 24, Cols: 80, Term: "xterm"})
		return err
	})
	defer s.Close()
	sc := readScreen(s)
	if err := s.Resize(30, 100); err != nil {
		t.Fatal(err)
	}
	if _, err := io.WriteString(s, `echo "size $(stty size) $TERM"; exit 3`+"\n"); err != nil {
		t.Fatal(err)
	}
	sc.waitEnd(t)
	if got := sc.String(); !strings.Contains(got, "size 30 100 xterm") {
		t.Errorf("the screen after a resize to 30x100: %q", sc.tail())
	}
	if s.ExitCode() != 3 {
		t.Errorf("exit code %d, want 3", s.ExitCode())
	}
}
