package cluster

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/hashicorp/raft"
)

// recoveredFile, in the raft directory, records a recovery: when, at
// which index, and the configuration it replaced.
const recoveredFile = "recovered.json"

// ErrRecover is returned when a recovery is refused.
var ErrRecover = errors.New("recover")

// recovery is what recoveredFile holds.
type recovery struct {
	At       time.Time `json:"at"`
	Index    uint64    `json:"index"`
	Replaced []string  `json:"replaced"`
}

// recoverAlone rewrites the Raft configuration in the stores to this
// node alone, a voter, keeping every entry they hold (raft's
// RecoverCluster): the node then leads a cluster of one, which other
// nodes join as they would any. It is for a quorum lost for good: the
// voters it drops must never come back with their old state, or two
// clusters would claim the same jobs.
//
// It refuses without Raft state, and it refuses a second time once the
// cluster it rebuilt has grown back past this node alone (an agent
// restarted with --recover left in its settings): recovering then would
// split the cluster in two.
func recoverAlone(conf *raft.Config, fsm raft.FSM, existing bool, dir string, logs raft.LogStore, stable raft.StableStore,
	snaps raft.SnapshotStore, trans raft.Transport) error {
	if !existing {
		return fmt.Errorf("%w: the data directory holds no Raft state to recover from", ErrRecover)
	}
	// GetConfiguration marks the config it is given as not to start
	// raft: hand it a copy.
	peek := *conf
	current, err := raft.GetConfiguration(&peek, fsm, logs, stable, snaps, trans)
	if err != nil {
		return fmt.Errorf("%w: read the Raft configuration: %w", ErrRecover, err)
	}
	var prev recovery
	if b, err := os.ReadFile(filepath.Join(dir, recoveredFile)); err == nil && json.Unmarshal(b, &prev) == nil && len(current.Servers) > 1 {
		return fmt.Errorf("%w: this node already recovered the cluster at index %d (%s), and %d servers are in it since: start it without --recover "+
			"(should the quorum be lost again, remove %s first)",
			ErrRecover, prev.Index, prev.At.Format(time.RFC3339), len(current.Servers), filepath.Join(dir, recoveredFile))
	}
	var replaced []string
	for _, s := range current.Servers {
		replaced = append(replaced, fmt.Sprintf("%s %s (%s)", s.ID, s.Address, s.Suffrage))
	}
	alone := raft.Configuration{Servers: []raft.Server{{Suffrage: raft.Voter, ID: conf.LocalID, Address: trans.LocalAddr()}}}
	if err := raft.RecoverCluster(conf, fsm, logs, stable, snaps, trans, alone); err != nil {
		return fmt.Errorf("%w: %w", ErrRecover, err)
	}
	last, err := logs.LastIndex()
	if err != nil {
		return fmt.Errorf("%w: read the last index: %w", ErrRecover, err)
	}
	rec, _ := json.Marshal(recovery{At: time.Now().UTC(), Index: last, Replaced: replaced})
	if err := os.WriteFile(filepath.Join(dir, recoveredFile), rec, 0o600); err != nil {
		return fmt.Errorf("%w: record the recovery: %w", ErrRecover, err)
	}
	conf.Logger.Warn("RECOVERED: the Raft configuration is now this node alone; the voters it had must never return with their old data",
		"replaced", replaced, "last_index", last)
	return nil
}
