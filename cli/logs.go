package cli

import (
	"context"
	"fmt"
	"io"
	"math"
	"os"
	"os/signal"
	"sync"

	ucli "github.com/urfave/cli/v2"

	"github.com/skein-dev/skein/api"
)

func logsCommand() *ucli.Command {
	return &ucli.Command{
		Name:  "logs",
		Usage: "print a job's output: its stdout on stdout, its stderr on stderr",
		Description: "Prints what the node keeps of each stream: its newest output, up to half of the agent's\n" +
			"--log-max. When older output was dropped, a line on stderr says how much, before the stream.\n" +
			"With --tail N only the last N lines of each stream (of its last 1 MiB) are printed, and with\n" +
			"-f what follows them.",
		ArgsUsage: "ID",
		Flags: []ucli.Flag{
			&ucli.BoolFlag{Name: "follow", Aliases: []string{"f"}, Usage: "keep printing until the allocation ends"},
			&ucli.IntFlag{Name: "rank", Usage: "rank of a multi-node job"},
			&ucli.IntFlag{Name: "tail", Usage: "print only the last `N` lines of each stream"},
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
	lines := c.Int("tail")
	if c.IsSet("tail") && (lines < 1 || lines > api.MaxLogLines) {
		return fmt.Errorf("--tail %d: want a number of lines in 1..%d", lines, api.MaxLogLines)
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
	notes := &lockedWriter{mu: &outMu, w: c.App.ErrWriter}
	var (
		wg    sync.WaitGroup
		errMu sync.Mutex
		first error // the first failure; later ones follow from cancel
	)
	for _, s := range streams {
		wg.Go(func() {
			opts := api.LogOptions{Rank: rank, Stream: s.name, Follow: c.Bool("follow"), Lines: lines}
			if err := printStream(ctx, cl, args[0], opts, s.w, notes); err != nil {
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

// printStream copies one stream to w, after a line on notes when the node's
// log cap dropped part of it.
func printStream(ctx context.Context, cl *api.Client, id string, opts api.LogOptions, w, notes io.Writer) error {
	ls, err := cl.OpenLogs(ctx, id, opts)
	if err != nil {
		return err
	}
	defer ls.Close()
	if ls.Dropped > 0 {
		capped := "log cap"
		if ls.LogMax > 0 {
			capped += " " + formatBytes(ls.LogMax)
		}
		fmt.Fprintf(notes, "skein: %s of earlier %s was dropped (%s, --log-max)\n", formatBytes(ls.Dropped), opts.Stream, capped)
	}
	if _, err := io.Copy(w, ls); err != nil && ctx.Err() == nil {
		return fmt.Errorf("read logs: %w", err)
	}
	return nil
}

// formatBytes renders a count of bytes for people: "512 B", "2.4 GiB",
// "100 MiB".
func formatBytes(n int64) string {
	units := []string{"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"}
	v, i := float64(n), 0
	for v >= 1024 && i < len(units)-1 {
		v /= 1024
		i++
	}
	if v == math.Trunc(v) {
		return fmt.Sprintf("%d %s", int64(v), units[i])
	}
	return fmt.Sprintf("%.1f %s", v, units[i])
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
