package agent

import (
	"fmt"

	"github.com/skein-dev/skein/cluster"
	"github.com/skein-dev/skein/structs"
)

// everyNodeApplies refuses an entry of a type some node of the cluster
// does not apply (structs.ErrUpgradeFirst): mid-upgrade, a server of the
// release before would stop on it, and a worker of it would refuse the
// views that carry what it made (they are written in the snapshot
// format). What a node applies is what its gossip says (nothing: a
// release before nodes said, which applies up to
// structs.LegacyLogVersion); a node that left, was revoked or that gossip
// has forgotten is not counted.
// Entries old nodes may skip, and the types every release applies, are
// never refused, so the check costs nothing on the usual writes.
func (a *Agent) everyNodeApplies(t structs.MessageType) error {
	if t&structs.IgnoreUnknownTypeFlag != 0 || int(t) <= structs.LegacyLogVersion || a.peers == nil {
		return nil
	}
	for _, m := range a.peers.Members() {
		gone := m.Status == cluster.StatusLeft.String() || m.Status == cluster.StatusRevoked.String()
		if !gone && m.Protocol.AppliesLog() < int(t) {
			return fmt.Errorf("%w: node %s runs skein %s, which does not apply %s entries (log version %d, %d needed): upgrade it, then try again",
				structs.ErrUpgradeFirst, m.Name, m.Protocol.String(), t, m.Protocol.AppliesLog(), int(t))
		}
	}
	return nil
}
