package cli

import (
	"bytes"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"

	ucli "github.com/urfave/cli/v2"

	"github.com/skein-dev/skein/agent"
	"github.com/skein-dev/skein/api"
	"github.com/skein-dev/skein/structs"
)

// secretsNote is what every command that writes a backup says of it.
const secretsNote = "it holds secrets (ACL token and join token hashes, the gossip keyring, jobs' secret env): keep it where only admins read it"

func snapshotCommand() *ucli.Command {
	return &ucli.Command{
		Name:  "snapshot",
		Usage: "back up the cluster's state, look into a backup, restore one",
		Subcommands: []*ucli.Command{{
			Name:  "save",
			Usage: "write a backup of the whole state (jobs, services, users, tokens, trust) to FILE",
			Description: "The leader's state, with every write acknowledged before it. FILE is written\n" +
				"with mode 0600 and replaced whole, never left half written. An admin's.",
			ArgsUsage: "FILE",
			Action:    snapshotSaveAction,
		}, {
			Name:        "inspect",
			Usage:       "check a backup file whole and say what it holds (no agent needed)",
			ArgsUsage:   "FILE",
			Flags:       []ucli.Flag{&ucli.BoolFlag{Name: "json", Usage: "print JSON"}},
			Action:      snapshotInspectAction,
			Description: "Reads every record as a restore would; a damaged file is refused with the record at fault.",
		}, {
			Name:  "restore",
			Usage: "replace the cluster's whole state with a backup",
			Description: "FILE is checked whole first. The leader installs it and every server gets it;\n" +
				"what was written since the backup is gone: jobs submitted since are forgotten\n" +
				"and their processes stopped, jobs of the backup that ended since run again\n" +
				"once their nodes report them lost. Nodes keep running the jobs the backup\n" +
				"holds as running, once each. An admin's.",
			ArgsUsage: "FILE",
			Flags:     []ucli.Flag{&ucli.BoolFlag{Name: "json", Usage: "print JSON"}},
			Action:    snapshotRestoreAction,
		}},
	}
}

func snapshotSaveAction(c *ucli.Context) error {
	args, cl, err := commandClient(c, "FILE")
	if err != nil {
		return err
	}
	path := args[0]
	var buf bytes.Buffer
	index, err := cl.SaveSnapshot(c.Context, &buf)
	if err != nil {
		return err
	}
	if err := writeFileAtomic(path, buf.Bytes()); err != nil {
		return err
	}
	_, err = fmt.Fprintf(c.App.Writer, "saved the state at index %d to %s (%d bytes, mode 0600); %s\n", index, path, buf.Len(), secretsNote)
	return err
}

// writeFileAtomic writes data to path with mode 0600: into a new file
// beside it, synced, then renamed over it.
func writeFileAtomic(path string, data []byte) error {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	tmp := f.Name()
	defer os.Remove(tmp)
	if err := f.Chmod(0o600); err != nil {
		f.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

func snapshotInspectAction(c *ucli.Context) error {
	args, err := cmdArgs(c, "FILE")
	if err != nil {
		return err
	}
	f, err := os.Open(args[0])
	if err != nil {
		return err
	}
	defer f.Close()
	sum, err := agent.InspectSnapshot(f)
	if err != nil {
		return fmt.Errorf("%s: %w", args[0], err)
	}
	if c.Bool("json") {
		return printJSON(c.App.Writer, sum)
	}
	return printSummary(c.App.Writer, sum)
}

func snapshotRestoreAction(c *ucli.Context) error {
	args, cl, err := commandClient(c, "FILE")
	if err != nil {
		return err
	}
	data, err := os.ReadFile(args[0])
	if err != nil {
		return err
	}
	if len(data) > api.MaxSnapshotBytes {
		return fmt.Errorf("%s: %d bytes, more than a restore takes (%d)", args[0], len(data), api.MaxSnapshotBytes)
	}
	if _, err := agent.InspectSnapshot(bytes.NewReader(data)); err != nil {
		return fmt.Errorf("%s: %w", args[0], err)
	}
	sum, err := cl.RestoreSnapshot(c.Context, data)
	if err != nil {
		return err
	}
	if c.Bool("json") {
		return printJSON(c.App.Writer, sum)
	}
	if _, err := fmt.Fprintf(c.App.Writer, "restored %s: the cluster's state is now the backup's, at index %d\n", args[0], sum.Index); err != nil {
		return err
	}
	return printSummary(c.App.Writer, *sum)
}

// printSummary says what a backup holds, one line a kind.
func printSummary(w io.Writer, s structs.SnapshotSummary) error {
	var jobs []string
	for _, st := range slices.Sorted(maps.Keys(s.Jobs)) {
		jobs = append(jobs, fmt.Sprintf("%d %s", s.Jobs[st], st))
	}
	if len(jobs) == 0 {
		jobs = []string{"none"}
	}
	newest := "-"
	if !s.Newest.IsZero() {
		newest = s.Newest.UTC().Format("2006-01-02T15:04:05Z")
	}
	rows := [][]string{
		{"format version", fmt.Sprint(s.Version)},
		{"raft index", fmt.Sprint(s.Index)},
		{"bytes", fmt.Sprint(s.Bytes)},
		{"sha256", s.SHA256},
		{"newest event", newest},
		{"nodes", fmt.Sprint(s.Nodes)},
		{"jobs", strings.Join(jobs, ", ")},
		{"live allocations", fmt.Sprint(s.LiveAllocs)},
		{"services", fmt.Sprint(s.Services)},
		{"ACL", fmt.Sprintf("%v, %d tokens, %d users", s.ACL, s.ACLTokens, s.ACLUsers)},
		{"trust", fmt.Sprintf("%v, %d join tokens", s.Trust, s.JoinTokens)},
		{"events", fmt.Sprint(s.Events)},
	}
	return printTable(w, []string{"WHAT", "IN THE BACKUP"}, rows)
}
