package agent

import (
	"context"

	"github.com/skein-dev/skein/api"
)

// execInJob runs a command beside one of this node's running
// allocations (skein exec), through the runner.
func (a *Agent) execInJob(ctx context.Context, allocID string, argv []string) (api.ExecResult, error) {
	res, err := a.runner.Exec(ctx, allocID, argv)
	return api.ExecResult{ExitCode: res.ExitCode, Output: res.Output}, err
}
