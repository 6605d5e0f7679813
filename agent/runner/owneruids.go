package runner

import (
	"errors"
	"fmt"
	"hash/fnv"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
)

// Owners without a local account. Jobs of one such owner must not share
// an account with another's: a process may read the environment (and so
// the secrets) of any process of its own uid, signal it, and write its
// files. Each such owner therefore runs as a uid of its own, taken from a
// range of the node's (Config.JobUIDs, --job-uid-range), with a group of
// the same number and no home; the job user (--job-user) is left for jobs
// without an owner, or for every such owner where the node sets no range.
//
// An owner's uid is the range's start plus a hash of its name, modulo the
// range's size, or the next free one where another owner has that one:
// most owners get the same uid on every node, and no two owners the same
// one on a node. The node keeps what it gave in ownerUIDsFile, so an owner
// keeps its uid across agent restarts and the files its jobs left.

// UIDRange is an inclusive range of uids.
type UIDRange struct {
	Min, Max uint32
}

// DefaultJobUIDs is the range owners without a local account take their
// uids from: above the ranges systemd gives containers (nspawn's end at
// 1879048191), below 2^31, which some tools take for a signed number.
var DefaultJobUIDs = UIDRange{Min: 2_000_000_000, Max: 2_099_999_999}

// ParseUIDRange reads MIN-MAX.
func ParseUIDRange(s string) (UIDRange, error) {
	lo, hi, ok := strings.Cut(s, "-")
	a, err1 := strconv.ParseUint(lo, 10, 32)
	b, err2 := strconv.ParseUint(hi, 10, 32)
	switch {
	case !ok || err1 != nil || err2 != nil:
		return UIDRange{}, fmt.Errorf("uid range %q: want MIN-MAX", s)
	case a == 0 || b < a || b >= 1<<32-1:
		return UIDRange{}, fmt.Errorf("uid range %q: want 1 <= MIN <= MAX < 4294967295", s)
	}
	return UIDRange{Min: uint32(a), Max: uint32(b)}, nil
}

func (u UIDRange) String() string { return fmt.Sprintf("%d-%d", u.Min, u.Max) }

func (u UIDRange) size() uint64 { return uint64(u.Max) - uint64(u.Min) + 1 }

// ownerUIDsFile, in the allocation directory, holds the uid given to each
// owner without a local account (a name no allocation can have).
const ownerUIDsFile = ".owner-uids.json"

// errUIDsExhausted: every uid of the range is some owner's.
var errUIDsExhausted = errors.New("every uid of the node's --job-uid-range is another owner's")

// ownerUIDs gives owners without a local account uids of their own.
type ownerUIDs struct {
	span UIDRange
	path string

	mu    sync.Mutex
	byOwn map[string]uint32
	taken map[uint32]string
}

// newOwnerUIDs reads what the node gave before, from dir.
func newOwnerUIDs(span UIDRange, dir string) (*ownerUIDs, error) {
	o := &ownerUIDs{span: span, path: filepath.Join(dir, ownerUIDsFile),
		byOwn: make(map[string]uint32), taken: make(map[uint32]string)}
	if _, err := readJSON(o.path, &o.byOwn); err != nil {
		return nil, fmt.Errorf("read the owners' uids: %w", err)
	}
	for owner, uid := range o.byOwn {
		o.taken[uid] = owner
	}
	return o, nil
}

// account is the account owner's jobs run as: its own uid, given now if
// it has none yet (and kept on disk before it is used).
func (o *ownerUIDs) account(owner string) (Account, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	uid, ok := o.byOwn[owner]
	if !ok {
		h := fnv.New32a()
		h.Write([]byte(owner))
		n := o.span.size()
		start := uint64(h.Sum32()) % n
		for i := range n {
			cand := uint32(uint64(o.span.Min) + (start+i)%n)
			if _, used := o.taken[cand]; !used {
				uid, ok = cand, true
				break
			}
		}
		if !ok {
			return Account{}, fmt.Errorf("owner %q: %w", owner, errUIDsExhausted)
		}
		o.byOwn[owner], o.taken[uid] = uid, owner
		if err := writeJSONAtomic(o.path, o.byOwn); err != nil {
			delete(o.byOwn, owner)
			delete(o.taken, uid)
			return Account{}, fmt.Errorf("record owner %q's uid: %w", owner, err)
		}
	}
	return Account{Name: owner, UID: uid, GID: uid, Groups: []uint32{uid}, Home: noHome, Shell: defaultShell}, nil
}

// noHome is the HOME of an account that has none, as nobody's is.
const noHome = "/nonexistent"
