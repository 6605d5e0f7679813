package agent

import (
	"fmt"

	"github.com/skein-dev/skein/structs"
)

// everyServerApplies refuses an entry of a type some server of the Raft
// configuration does not apply (structs.ErrUpgradeFirst): mid-upgrade, a
// server of the release before would stop on it. What a server applies
// is what its gossip says (none: a release before it did, which applies
// up to structs.LegacyLogVersion); a server gossip does not know is not
// counted. Entries old servers may skip, and the types every release
// applies, are never refused, so the check costs nothing on the usual
// writes.
func (a *Agent) everyServerApplies(t structs.MessageType) error {
	if t&structs.IgnoreUnknownTypeFlag != 0 || int(t) <= structs.LegacyLogVersion {
		return nil
	}
	if a.peers == nil {
		return nil
	}
	servers, err := a.raft.Servers()
	if err != nil {
		return nil // the write itself will say what is wrong
	}
	inRaft := map[string]bool{}
	for _, s := range servers {
		inRaft[s.ID] = true
	}
	for _, m := range a.peers.Members() {
		if inRaft[m.ID] && m.Protocol.AppliesLog() < int(t) {
			return fmt.Errorf("%w: server %s runs skein %s, which does not apply %s entries (log version %d, %d needed): upgrade it, then try again",
				structs.ErrUpgradeFirst, m.Name, m.Protocol.String(), t, m.Protocol.AppliesLog(), int(t))
		}
	}
	return nil
}
