package cli

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/skein-dev/skein/internal/testutil"
)

func TestCLI_ServiceUpdateRollsOutAgainstARealAgent(t *testing.T) {
	t.Parallel()
	startRealAgent(t)
	if r := runCLI(t, "serve", "--name", "web", "--replicas", "2", "--", "sleep", "1000"); r.code != exitOK {
		t.Fatalf("serve: %d %q", r.code, r.stderr)
	}
	waitService(t, "web", "2/2 healthy")

	r := runCLI(t, "service", "update", "web", "--env", "MODEL=v2", "--", "sleep", "2000")
	if r.code != exitOK || !strings.HasPrefix(r.stdout, "service web: rolling out version 2 over version 1 (max surge 1, max unavailable 0)") {
		t.Fatalf("update: %d %q %q", r.code, r.stdout, r.stderr)
	}
	testutil.WaitFor(t, 60*time.Second, func() error {
		r := runCLI(t, "service", "web")
		for _, want := range []string{"Version:       2 (rolled out over version 1)", "Command:     sleep 2000", "MODEL=v2", "State:         2/2 healthy"} {
			if !strings.Contains(r.stdout, want) {
				return fmt.Errorf("service output lacks %q:\n%s", want, r.stdout)
			}
		}
		if strings.Contains(r.stdout, "stopping") {
			return fmt.Errorf("old replicas still stopping:\n%s", r.stdout)
		}
		return nil
	})
}
