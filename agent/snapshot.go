package agent

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/skein-dev/skein/fsm"
	"github.com/skein-dev/skein/structs"
)

// InspectSnapshot reads a backup of the cluster's state (skein snapshot
// save, or a periodic snapshot), checks it whole as a restore would, and
// says what it holds. It needs no agent: the CLI reads a file with it.
func InspectSnapshot(r io.Reader) (structs.SnapshotSummary, error) {
	return fsm.Inspect(r)
}

// checkSnapshots checks the periodic backups' settings and fills in
// their defaults.
func checkSnapshots(cfg *Config) error {
	switch {
	case cfg.SnapshotEvery < 0 || (cfg.SnapshotEvery > 0 && cfg.SnapshotEvery < 100*time.Millisecond):
		return fmt.Errorf("--snapshot-every %s: must be at least 100ms (or 0: never)", cfg.SnapshotEvery)
	case cfg.SnapshotKeep < 0:
		return fmt.Errorf("--snapshot-keep %d: must be 1 or more", cfg.SnapshotKeep)
	case cfg.SnapshotEvery == 0 && cfg.SnapshotDir != "":
		return fmt.Errorf("--snapshot-dir %s: set --snapshot-every too", cfg.SnapshotDir)
	}
	if cfg.SnapshotKeep == 0 {
		cfg.SnapshotKeep = DefaultSnapshotKeep
	}
	if cfg.SnapshotEvery > 0 && cfg.SnapshotDir == "" && cfg.DataDir != "" {
		cfg.SnapshotDir = filepath.Join(cfg.DataDir, "snapshots")
	}
	return nil
}

// snapshotPrefix and snapshotSuffix frame the name of a periodic backup:
// skein-20261206T051900Z-1234.snap, the time it was written and the
// index of the state it holds.
const (
	snapshotPrefix = "skein-"
	snapshotSuffix = ".snap"
)

// snapshotLoop writes a backup of the state every SnapshotEvery while
// this node is a server (a worker's state is not the cluster's), and
// keeps the newest SnapshotKeep.
func (a *Agent) snapshotLoop() {
	tick := time.NewTicker(a.cfg.SnapshotEvery)
	defer tick.Stop()
	for {
		select {
		case <-a.ctx.Done():
			return
		case <-tick.C:
		}
		if !a.holdsState() {
			continue
		}
		path, err := a.writeBackup(time.Now().UTC())
		if err != nil {
			a.logger.Warn("periodic snapshot failed", "dir", a.cfg.SnapshotDir, "error", err)
			continue
		}
		a.logger.Debug("periodic snapshot written", "path", path)
		if err := pruneBackups(a.cfg.SnapshotDir, a.cfg.SnapshotKeep); err != nil {
			a.logger.Warn("remove old periodic snapshots", "dir", a.cfg.SnapshotDir, "error", err)
		}
	}
}

// writeBackup writes the state into a new file of SnapshotDir (made
// 0700), mode 0600, whole or not at all, and returns its path.
func (a *Agent) writeBackup(at time.Time) (string, error) {
	dir := a.cfg.SnapshotDir
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", err
	}
	f, err := os.CreateTemp(dir, ".writing-*")
	if err != nil {
		return "", err
	}
	tmp := f.Name()
	defer os.Remove(tmp)
	w := bufio.NewWriter(f)
	index, err := a.fsm.WriteSnapshot(w)
	if err == nil {
		err = w.Flush()
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return "", err
	}
	path := filepath.Join(dir, fmt.Sprintf("%s%s-%d%s", snapshotPrefix, at.Format("20060102T150405.000Z"), index, snapshotSuffix))
	return path, os.Rename(tmp, path)
}

// pruneBackups removes all but the newest keep periodic backups of dir.
// Their names sort by the time they were written.
func pruneBackups(dir string, keep int) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	var names []string
	for _, e := range entries {
		if n := e.Name(); e.Type().IsRegular() && strings.HasPrefix(n, snapshotPrefix) && strings.HasSuffix(n, snapshotSuffix) {
			names = append(names, n)
		}
	}
	slices.Sort(names)
	var errs []error
	for len(names) > keep {
		if err := os.Remove(filepath.Join(dir, names[0])); err != nil {
			errs = append(errs, err)
		}
		names = names[1:]
	}
	return errors.Join(errs...)
}

// SnapshotVersion is the newest snapshot format this binary reads, as
// skein version says.
const SnapshotVersion = fsm.SnapshotVersion
