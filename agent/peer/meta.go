package peer

import (
	"bytes"
	"encoding/json"
	"sync"
	"sync/atomic"

	"github.com/skein-dev/skein/api"
	"github.com/skein-dev/skein/cluster"
	"github.com/skein-dev/skein/structs"
)

// Meta is what a node tells every other node by gossip, kept short:
// memberlist allows cluster.MaxAppMetaBytes. GPUsFree are the placeable
// GPUs no live allocation holds; bit i of Unhealthy is set while GPU i is
// unhealthy as the node itself sees it, ahead of the commit.
type Meta struct {
	Name      string `json:"n"`
	HTTP      string `json:"h"`
	GPUsFree  int    `json:"f"`
	GPUsTotal int    `json:"t"`
	Unhealthy uint64 `json:"u,omitempty"`
	Version   string `json:"v"`
	// Keyring is the gossip keyring generation the node installed (secure
	// clusters); a rotation moves on once every live node has the last.
	Keyring uint64 `json:"k,omitempty"`
	// Server is set while the node is in the Raft configuration: it holds
	// the state and answers other nodes' view watches.
	Server bool `json:"s,omitempty"`
	// API, Log and Snapshot are the versions the node speaks
	// (structs.Protocol); zero from a node of a release before they were
	// announced.
	API      int `json:"a,omitempty"`
	Log      int `json:"l,omitempty"`
	Snapshot int `json:"sv,omitempty"`
}

// Announcer holds the encoded metadata this node announces and says when
// it changed, so that one loop can broadcast it.
type Announcer struct {
	mu      sync.Mutex
	last    Meta
	meta    atomic.Pointer[[]byte]
	changed chan struct{}
}

// NewAnnouncer returns an Announcer announcing m.
func NewAnnouncer(m Meta) *Announcer {
	a := &Announcer{changed: make(chan struct{}, 1)}
	a.Set(m)
	return a
}

// Set replaces the announced metadata, keeping the keyring generation
// (SetKeyring); it reports whether it changed.
func (a *Announcer) Set(m Meta) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	m.Keyring = a.last.Keyring
	return a.set(m)
}

// SetKeyring announces the keyring generation this node installed.
func (a *Announcer) SetKeyring(gen uint64) {
	a.mu.Lock()
	defer a.mu.Unlock()
	m := a.last
	m.Keyring = gen
	a.set(m)
}

func (a *Announcer) set(m Meta) bool {
	a.last = m
	b, err := json.Marshal(m)
	if err != nil {
		return false
	}
	if old := a.meta.Load(); old != nil && string(*old) == string(b) {
		return false
	}
	a.meta.Store(&b)
	select {
	case a.changed <- struct{}{}:
	default: // a broadcast is already due; it will carry the new value
	}
	return true
}

// Bytes is memberlist's view of the metadata.
func (a *Announcer) Bytes() []byte {
	if b := a.meta.Load(); b != nil {
		return *b
	}
	return nil
}

// Changed receives after the metadata changed.
func (a *Announcer) Changed() <-chan struct{} { return a.changed }

// UnhealthyMask is the mask of unhealthy GPUs a member's gossip metadata
// announces (0 for metadata that cannot be read).
func UnhealthyMask(m cluster.Member) uint64 {
	if !bytes.Contains(m.Meta, []byte(`"u":`)) {
		return 0 // the common case, read without decoding (omitempty)
	}
	var meta struct {
		Unhealthy uint64 `json:"u,omitempty"`
	}
	_ = json.Unmarshal(m.Meta, &meta) // a peer's odd metadata announces nothing
	return meta.Unhealthy
}

// decodeMembers is the gossip view with each member's metadata decoded.
func decodeMembers(members []cluster.Member, self string) []api.Member {
	var out []api.Member
	for _, m := range members {
		var meta Meta
		_ = json.Unmarshal(m.Meta, &meta) // a peer's odd metadata only leaves fields empty
		out = append(out, api.Member{
			ID:         m.ID,
			Name:       meta.Name,
			Addr:       m.Addr,
			Status:     m.Status.String(),
			HTTP:       meta.HTTP,
			GPUsFree:   meta.GPUsFree,
			GPUsTotal:  meta.GPUsTotal,
			Unhealthy:  meta.Unhealthy,
			Version:    meta.Version,
			Protocol:   structs.Protocol{Release: meta.Version, API: meta.API, Log: meta.Log, Snapshot: meta.Snapshot},
			Keyring:    meta.Keyring,
			Server:     meta.Server,
			IsThisNode: m.ID == self,
		})
	}
	return out
}
