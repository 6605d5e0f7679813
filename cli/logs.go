package cli

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sync"

	ucli "github.com/urfave/cli/v2"

	"github.com/skein-dev/skein/api"
)

func logsCommand() *ucli.Command {
	return &ucli.Command{
		Name:      "logs",
		Usage:     "print a job's output: its stdout on stdout, its stderr on stderr",
		ArgsUsage: "ID",
		Flags: []ucli.Flag{
			&ucli.BoolFlag{Name: "follow", Aliases: []string{"f"}, Usage: "keep printing until the allocation ends"},
			&ucli.IntFlag{Name: "rank", Usage: "rank of a multi-node job"},
		},
		Action: logsAction,
	}
}

func logsAction(c *ucli.Context) error {
	args, err := cmdArgs(c, "ID")
	if err != nil {
		return err
	}
	rank := c.Int("rank")
	if rank < 0 {
		return fmt.Errorf("--rank %d: must not be negative", rank)
	}
	cl, err := newClient(c)
	if err != nil {
		return err
	}
	sigCtx, stop := signal.NotifyContext(c.Context, os.Interrupt)
	defer stop()
	ctx, cancel := context.WithCancel(sigCtx)
	defer cancel()

	// One lock for both writers: they may be the same terminal or buffer.
	var outMu sync.Mutex
	streams := []struct {
		name string
		w    io.Writer
	}{
		{api.StreamStdout, &lockedWriter{mu: &outMu, w: c.App.Writer}},
		{api.StreamStderr, &lockedWriter{mu: &outMu, w: c.App.ErrWriter}},
	}
	var (
		wg    sync.WaitGroup
		errMu sync.Mutex
		first error // the first failure; later ones follow from cancel
	)
	for _, s := range streams {
		wg.Go(func() {
			opts := api.LogOptions{Rank: rank, Stream: s.name, Follow: c.Bool("follow")}
			if err := cl.Logs(ctx, args[0], opts, s.w); err != nil {
				errMu.Lock()
				if first == nil {
					first = err
				}
				errMu.Unlock()
				cancel() // no point following one stream when the other failed
			}
		})
	}
	wg.Wait()
	if sigCtx.Err() != nil {
		return nil // interrupted: the user has seen what they wanted
	}
	return first
}

// lockedWriter serialises writes to w with a lock shared between writers.
type lockedWriter struct {
	mu *sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}
