package endpoint

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/skein-dev/skein/fsm"
	"github.com/skein-dev/skein/structs"
)

// written is one entry a fakeWriter applied.
type written struct {
	typ   structs.MessageType
	entry any
}

// fakeWriter is the leader, or another node, without Raft: on the leader
// it records each entry and answers what answer returns; elsewhere it
// records what would be passed on, as the JSON the leader would get.
type fakeWriter struct {
	leads     bool
	answer    func(typ structs.MessageType, entry any) (any, error)
	applied   []written
	forwarded []string // bodies passed on; "" for the request as it came
}

func (f *fakeWriter) Leads() bool { return f.leads }

func (f *fakeWriter) Write(typ structs.MessageType, forward any, entry func() (any, error)) (any, error) {
	return f.Lead(forward, func() (any, error) {
		e, err := entry()
		if err != nil {
			return nil, err
		}
		f.applied = append(f.applied, written{typ, e})
		if f.answer == nil {
			return nil, fmt.Errorf("fake writer: no answer for %v", typ)
		}
		return f.answer(typ, e)
	})
}

func (f *fakeWriter) Lead(forward any, do func() (any, error)) (any, error) {
	if !f.leads {
		body := ""
		if forward != nil {
			b, err := json.Marshal(forward)
			if err != nil {
				return nil, err
			}
			body = string(b)
		}
		f.forwarded = append(f.forwarded, body)
		return nil, ErrForwarded
	}
	return do()
}

// only is the one entry f applied, of type typ.
func (f *fakeWriter) only(t *testing.T, typ structs.MessageType) any {
	t.Helper()
	if len(f.applied) != 1 || f.applied[0].typ != typ {
		t.Fatalf("applied %+v, want one entry of type %v", f.applied, typ)
	}
	return f.applied[0].entry
}

// nothing fails t if f wrote or passed on anything.
func (f *fakeWriter) nothing(t *testing.T) {
	t.Helper()
	if len(f.applied) != 0 || len(f.forwarded) != 0 {
		t.Fatalf("applied %+v, forwarded %q; want no write", f.applied, f.forwarded)
	}
}

// fakeState is the state, as maps: jobs by ID, services by name, nodes.
type fakeState struct {
	jobs        map[string]*structs.Job
	services    map[string]*structs.Service
	nodes       []*structs.Node
	users       map[string]structs.ACLUser
	partitions  map[string]structs.Partition
	limitErr    error // CheckSubmitLimits's answer
	limitChecks int
}

func newFakeState() *fakeState {
	return &fakeState{jobs: map[string]*structs.Job{}, services: map[string]*structs.Service{},
		users: map[string]structs.ACLUser{}, partitions: map[string]structs.Partition{}}
}

// FindJob finds a job by its ID or a prefix of it; each call returns a
// copy, as the FSM does.
func (s *fakeState) FindJob(ref string) (*structs.Job, error) {
	var found []*structs.Job
	for id, j := range s.jobs {
		if id == ref {
			c := *j
			return &c, nil
		}
		if strings.HasPrefix(id, ref) {
			found = append(found, j)
		}
	}
	switch len(found) {
	case 0:
		return nil, fmt.Errorf("%w: %s", fsm.ErrJobNotFound, ref)
	case 1:
		c := *found[0]
		return &c, nil
	}
	return nil, fmt.Errorf("%w: %s", fsm.ErrAmbiguousID, ref)
}

func (s *fakeState) ArrayTasks(arrayID string) ([]*structs.Job, error) {
	var tasks []*structs.Job
	for _, j := range s.jobs {
		if j.ArrayID == arrayID {
			c := *j
			tasks = append(tasks, &c)
		}
	}
	if len(tasks) == 0 {
		return nil, fmt.Errorf("%w: %s", fsm.ErrJobNotFound, arrayID)
	}
	return tasks, nil
}

func (s *fakeState) JobByRequestID(rid string) (*structs.Job, bool) {
	for _, j := range s.jobs {
		if j.RequestID == rid {
			c := *j
			return &c, true
		}
	}
	return nil, false
}

func (s *fakeState) Partition(name string) (structs.Partition, bool) {
	p, ok := s.partitions[name]
	return p, ok
}

func (s *fakeState) Nodes() []*structs.Node { return s.nodes }

func (s *fakeState) ACLUser(name string) (structs.ACLUser, bool) {
	u, ok := s.users[name]
	return u, ok
}

func (s *fakeState) CheckSubmitLimits(string, structs.JobSpec) error {
	s.limitChecks++
	return s.limitErr
}

func (s *fakeState) CheckSubmitAccount(string, structs.JobSpec) error { return nil }

func (s *fakeState) Service(name string) (*structs.Service, bool) {
	svc, ok := s.services[name]
	if !ok {
		return nil, false
	}
	c := *svc
	return &c, true
}

func (s *fakeState) Services() []*structs.Service {
	var out []*structs.Service
	for name := range s.services {
		svc, _ := s.Service(name)
		out = append(out, svc)
	}
	return out
}

// ServiceReplicas, Allocs and Node find none: the fake state holds no
// replica.
func (s *fakeState) ServiceReplicas(string) []*structs.Job { return nil }
func (s *fakeState) Allocs(string) []*structs.Allocation   { return nil }
func (s *fakeState) Node(string) (*structs.Node, bool)     { return nil, false }

// NodeLiveAllocs finds none: the fake state holds no allocation.
func (s *fakeState) NodeLiveAllocs(string) []*structs.Allocation { return nil }

// The policy's reads: an empty account table, limits and usage as set.

func (s *fakeState) FairShare() fsm.FairShare {
	return fsm.FairShare{Accounts: &structs.AccountTable{}}
}

func (s *fakeState) Limits() *structs.LimitTable { return &structs.LimitTable{} }

func (s *fakeState) LimitUsage(string) fsm.LimitUsage { return fsm.LimitUsage{} }

func (s *fakeState) LimitUsages() (map[string]fsm.LimitUsage, int) {
	return map[string]fsm.LimitUsage{}, 0
}

func (s *fakeState) Partitions() []structs.Partition {
	var out []structs.Partition
	for _, p := range s.partitions {
		out = append(out, p)
	}
	return out
}

// aclState holds tokens and users, for the ACL endpoints.
type aclState struct {
	tokens []structs.ACLToken
	users  []structs.ACLUser
}

func (s aclState) ACLTokens() []structs.ACLToken { return s.tokens }
func (s aclState) ACLUsers() []structs.ACLUser   { return s.users }

// JobsPage pages the jobs by ID (the FSM's order is by submission; the
// fake's jobs are named in that order).
func (s *fakeState) JobsPage(after fsm.JobCursor, limit int, keep func(*structs.Job) bool) ([]*structs.Job, bool) {
	var out []*structs.Job
	for _, id := range slices.Sorted(maps.Keys(s.jobs)) {
		c := *s.jobs[id]
		if !keep(&c) {
			continue
		}
		if len(out) == limit {
			return out, true
		}
		out = append(out, &c)
	}
	return out, false
}
