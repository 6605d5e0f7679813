package structs

import (
	"errors"
	"fmt"
)

// Version is the skein release; builds stamp it with -ldflags
// "-X github.com/skein-dev/skein/structs.Version=...".
var Version = "0.1.0-dev"

// APIVersion numbers the HTTP API under /v1/, the users' and the nodes'
// alike. Within one number, changes are additive: new routes and new
// fields, which older readers ignore; a change an older peer or client
// could not read takes the next number.
const APIVersion = 1

// LegacyLogVersion is the log version of a node that does not say its
// own: the binaries before nodes announced their versions applied the
// message types up to LeaderElectedType.
const LegacyLogVersion = int(LeaderElectedType)

// LogVersion is the newest Raft log entry this binary applies: the
// highest message type it knows. A leader writes an entry of a newer
// type only once every node applies it (ErrUpgradeFirst otherwise), so
// nodes of two releases run together.
func LogVersion() int {
	highest := 0
	for t := MessageType(1); t < IgnoreUnknownTypeFlag; t++ {
		if t.String() != "unknown" {
			highest = int(t)
		}
	}
	return highest
}

// Protocol is what a node speaks: its release, the API version, the
// newest log entry it applies and the newest snapshot format it reads.
// Zero fields: a node of a release before nodes said (LegacyLogVersion).
type Protocol struct {
	Release  string `json:"release,omitempty"`
	API      int    `json:"api,omitempty"`
	Log      int    `json:"log,omitempty"`
	Snapshot int    `json:"snapshot,omitempty"`
}

// String is the protocol as skein version and skein nodes show it.
func (p Protocol) String() string {
	if p.API == 0 && p.Log == 0 {
		return fmt.Sprintf("%s (api 1, log %d: before versions were announced)", orUnknown(p.Release), LegacyLogVersion)
	}
	return fmt.Sprintf("%s (api %d, log %d, snapshot %d)", orUnknown(p.Release), p.API, p.Log, p.Snapshot)
}

// AppliesLog reports the newest log entry the node applies.
func (p Protocol) AppliesLog() int {
	if p.Log == 0 {
		return LegacyLogVersion
	}
	return p.Log
}

func orUnknown(s string) string {
	if s == "" {
		return "unknown"
	}
	return s
}

// ErrUpgradeFirst refuses a write of an entry type some node does not
// apply yet: the cluster runs two releases, mid-upgrade.
var ErrUpgradeFirst = errors.New("upgrade every node first")
