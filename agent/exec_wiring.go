package agent

import (
	"context"
	"syscall"

	"github.com/skein-dev/skein/agent/server"
	"github.com/skein-dev/skein/api"
	"github.com/skein-dev/skein/structs"
)

// execInJob runs a command beside one of this node's running
// allocations (skein exec), through the runner.
func (a *Agent) execInJob(ctx context.Context, allocID string, argv []string) (api.ExecResult, error) {
	res, err := a.runner.Exec(ctx, allocID, argv)
	return api.ExecResult{ExitCode: res.ExitCode, Output: res.Output}, err
}

// execPTYInJob runs a command under a terminal beside one of this node's
// running allocations (skein exec -it), through the runner.
func (a *Agent) execPTYInJob(ctx context.Context, allocID string, argv []string, term string, rows, cols uint16) (server.PTYProcess, error) {
	p, err := a.runner.ExecPTY(ctx, allocID, argv, term, rows, cols)
	if err != nil {
		return nil, err
	}
	return p, nil
}

// signalJob sends a signal to what one of this node's running
// allocations runs (scancel --signal), through the runner.
func (a *Agent) signalJob(allocID, signal string) error {
	n, err := structs.JobSignalNumber(signal)
	if err != nil {
		return err
	}
	return a.runner.Signal(allocID, syscall.Signal(n))
}
