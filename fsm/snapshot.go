package fsm

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"time"

	"github.com/hashicorp/raft"

	"github.com/skein-dev/skein/structs"
)

// Versions of the snapshot format. Version 1 holds nodes, jobs and
// allocations; version 2 adds the trust records; version 3 the limits;
// version 4 the ACL records; version 5 the services; version 6 the
// event log; version 7 the drains (a node's drain, a job evicted or
// replaced by one, an allocation's stop signal: fields of existing
// records, which an older binary would drop); version 8 the fair-share
// records (accounts, QoS and weights, usage); version 9 the job number
// counter and the partitions' settings.
// Snapshot writes the oldest version that holds the state, so a binary that
// predates a version still reads a cluster that uses none of its records;
// Restore reads them all.
const (
	minSnapshotVersion       = 1
	trustSnapshotVersion     = 2
	limitsSnapshotVersion    = 3
	aclSnapshotVersion       = 4
	serviceSnapshotVersion   = 5
	eventSnapshotVersion     = 6
	drainSnapshotVersion     = 7
	fairshareSnapshotVersion = 8
	numberSnapshotVersion    = 9
	snapshotVersion          = numberSnapshotVersion // the newest
)

// SnapshotVersion is the newest snapshot format this binary reads (and
// writes, when the state needs it).
const SnapshotVersion = snapshotVersion

// Record types of a snapshot.
const (
	recordNode  = "node"
	recordJob   = "job"
	recordAlloc = "alloc"

	recordTrust     = "trust"
	recordJoinToken = "join_token"
	recordAdmission = "admission"

	recordLimits = "limits"

	recordACL      = "acl"
	recordACLToken = "acl_token"
	recordACLUser  = "acl_user"

	recordService = "service"

	recordEventLog = "event_log"
	recordEvent    = "event"

	recordAccounts   = "accounts"
	recordUsageClock = "usage_clock"
	recordUsage      = "usage"
	recordJobNumbers = "job_numbers"
	recordPartition  = "partition"
)

// header is the first line of a snapshot.
type header struct {
	Version int    `json:"version"`
	Index   uint64 `json:"index"`
}

// record is every other line of a snapshot: one object, named by Type.
type record struct {
	Type  string              `json:"type"`
	Node  *structs.Node       `json:"node,omitempty"`
	Job   *structs.Job        `json:"job,omitempty"`
	Alloc *structs.Allocation `json:"alloc,omitempty"`

	Trust     *structs.Trust     `json:"trust,omitempty"`
	JoinToken *structs.JoinToken `json:"join_token,omitempty"`
	Admission *structs.Admission `json:"admission,omitempty"`

	Limits *structs.LimitTable `json:"limits,omitempty"`

	ACL      *structs.ACLState `json:"acl,omitempty"`
	ACLToken *structs.ACLToken `json:"acl_token,omitempty"`
	ACLUser  *structs.ACLUser  `json:"acl_user,omitempty"`

	Service *structs.Service `json:"service,omitempty"`

	EventLog *eventLogRecord `json:"event_log,omitempty"`
	Event    *structs.Event  `json:"event,omitempty"`

	Accounts   *structs.AccountTable `json:"accounts,omitempty"`
	UsageClock *usageClockRecord     `json:"usage_clock,omitempty"`
	Usage      *structs.UsageRecord  `json:"usage,omitempty"`
	JobNumbers *jobNumbersRecord     `json:"job_numbers,omitempty"`
	Partition  *structs.Partition    `json:"partition,omitempty"`
}

// usageClockRecord is when usage was last charged.
type usageClockRecord struct {
	At time.Time `json:"at"`
}

// jobNumbersRecord is the newest job number given, which may be higher
// than every job's the snapshot holds (their jobs are gone): a number is
// never given twice.
type jobNumbersRecord struct {
	Last uint64 `json:"last"`
}

// eventLogRecord is what the event log keeps besides its events: the
// cursor of the newest event it let go of.
type eventLogRecord struct {
	Dropped structs.EventCursor `json:"dropped"`
}

// snapshot is a deep copy of the state, in the order it is written: nodes,
// then jobs, then allocations, each by ID; then the trust state, join
// tokens by ID and admissions by node ID; then the limits; then the ACL
// state, tokens by ID and users by name; then the services by name; then
// the event log, oldest event first.
type snapshot struct {
	index  uint64
	nodes  []*structs.Node
	jobs   []*structs.Job
	allocs []*structs.Allocation

	trust      *structs.Trust
	joinTokens []structs.JoinToken
	admissions []structs.Admission

	limits *structs.LimitTable

	acl       *structs.ACLState
	aclTokens []structs.ACLToken
	aclUsers  []structs.ACLUser

	services []*structs.Service

	lastJobNumber uint64
	partitions    []structs.Partition

	eventsDropped structs.EventCursor
	events        []structs.Event

	accounts *structs.AccountTable
	usageAt  time.Time
	usage    []structs.UsageRecord
}

var _ raft.FSMSnapshot = (*snapshot)(nil)

// Snapshot copies the state for Raft to persist while Apply goes on.
func (f *FSM) Snapshot() (raft.FSMSnapshot, error) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.st.snapshot(), nil
}

// Hash returns the SHA-256, in hex, of the snapshot records of the current
// state. It leaves out the applied index, so a refused entry leaves it as it
// was; replicas at the same Index must have the same Hash. It leaves out
// the event log too: that is a record of changes, not state anything is
// decided on (fsm/DESIGN.md, "Events are made by Apply").
func (f *FSM) Hash() string {
	_, h := f.IndexedHash()
	return h
}

// IndexedHash is Hash together with the applied index it describes, read
// under one lock, so replicas can be compared at equal indexes.
func (f *FSM) IndexedHash() (uint64, string) {
	f.mu.RLock()
	snap := f.st.snapshot()
	f.mu.RUnlock()
	h := sha256.New()
	w := bufio.NewWriter(h)
	if err := snap.writeRecords(json.NewEncoder(w)); err != nil {
		// Everything in state was decoded from JSON, so it encodes again.
		panic(fmt.Sprintf("fsm: encode state: %v", err))
	}
	if err := w.Flush(); err != nil {
		panic(fmt.Sprintf("fsm: hash state: %v", err))
	}
	return snap.index, hex.EncodeToString(h.Sum(nil))
}

func (s *state) snapshot() *snapshot {
	snap := &snapshot{index: s.index}
	for _, id := range slices.Sorted(maps.Keys(s.nodes)) {
		snap.nodes = append(snap.nodes, s.nodes[id].Copy())
	}
	for _, id := range slices.Sorted(maps.Keys(s.jobs)) {
		snap.jobs = append(snap.jobs, s.jobs[id].Copy())
	}
	for _, id := range slices.Sorted(maps.Keys(s.allocs)) {
		snap.allocs = append(snap.allocs, s.allocs[id].Copy())
	}
	if s.trust != nil {
		snap.trust = copyTrust(s.trust)
	}
	for _, id := range slices.Sorted(maps.Keys(s.joinTokens)) {
		snap.joinTokens = append(snap.joinTokens, s.joinTokens[id])
	}
	for _, id := range slices.Sorted(maps.Keys(s.admissions)) {
		snap.admissions = append(snap.admissions, s.admissions[id])
	}
	snap.limits = s.limits.Copy()
	if s.acl != nil {
		a := *s.acl
		snap.acl = &a
	}
	for _, id := range slices.Sorted(maps.Keys(s.aclTokens)) {
		snap.aclTokens = append(snap.aclTokens, s.aclTokens[id])
	}
	for _, name := range slices.Sorted(maps.Keys(s.aclUsers)) {
		snap.aclUsers = append(snap.aclUsers, s.aclUsers[name])
	}
	for _, name := range slices.Sorted(maps.Keys(s.services)) {
		snap.services = append(snap.services, s.services[name].Copy())
	}
	snap.accounts = s.accounts.Copy()
	snap.usageAt = s.usageAt
	snap.usage = s.usageRecords()
	snap.lastJobNumber = s.lastJobNumber
	for _, name := range slices.Sorted(maps.Keys(s.partitions)) {
		snap.partitions = append(snap.partitions, s.partitions[name])
	}
	snap.eventsDropped = s.events.dropped
	snap.events = make([]structs.Event, s.events.len())
	for i := range snap.events {
		snap.events[i] = *s.events.at(i)
	}
	return snap
}

// version is the oldest snapshot version that holds everything in snap.
func (snap *snapshot) version() int {
	if snap.lastJobNumber > 0 || len(snap.partitions) > 0 {
		return numberSnapshotVersion
	}
	if snap.accounts != nil || !snap.usageAt.IsZero() || len(snap.usage) > 0 {
		return fairshareSnapshotVersion
	}
	if snap.hasDrain() {
		return drainSnapshotVersion
	}
	if len(snap.events) > 0 || !snap.eventsDropped.IsZero() {
		return eventSnapshotVersion
	}
	if len(snap.services) > 0 {
		return serviceSnapshotVersion
	}
	if snap.acl != nil {
		return aclSnapshotVersion
	}
	if snap.limits != nil {
		return limitsSnapshotVersion
	}
	if snap.trust != nil || len(snap.joinTokens) > 0 || len(snap.admissions) > 0 {
		return trustSnapshotVersion
	}
	return minSnapshotVersion
}

// hasDrain reports whether snap holds anything of a drain.
func (snap *snapshot) hasDrain() bool {
	return slices.ContainsFunc(snap.nodes, func(n *structs.Node) bool { return n.Drain != nil }) ||
		slices.ContainsFunc(snap.jobs, func(j *structs.Job) bool {
			return j.Evicted != "" || j.Evictions > 0 || j.ReplacedBy != ""
		}) ||
		slices.ContainsFunc(snap.allocs, func(a *structs.Allocation) bool { return a.StopSignal != "" })
}

// Persist writes the snapshot as newline-delimited JSON: the header, then one
// record per node, job, allocation, trust state, join token and admission,
// the limits if any were set, the ACL records, the services and the event
// log.
func (snap *snapshot) Persist(sink raft.SnapshotSink) error {
	if err := snap.write(sink); err != nil {
		_ = sink.Cancel()
		return fmt.Errorf("persist snapshot: %w", err)
	}
	if err := sink.Close(); err != nil {
		return fmt.Errorf("persist snapshot: %w", err)
	}
	return nil
}

// Release does nothing: the snapshot holds only its own copies.
func (snap *snapshot) Release() {}

func (snap *snapshot) write(w io.Writer) error {
	bw := bufio.NewWriter(w)
	enc := json.NewEncoder(bw)
	if err := enc.Encode(header{Version: snap.version(), Index: snap.index}); err != nil {
		return err
	}
	if err := snap.writeRecords(enc); err != nil {
		return err
	}
	if err := snap.writeEvents(enc); err != nil {
		return err
	}
	return bw.Flush()
}

// writeEvents writes the event log, if it holds anything: what it let go
// of, then each event, oldest first.
func (snap *snapshot) writeEvents(enc *json.Encoder) error {
	if len(snap.events) == 0 && snap.eventsDropped.IsZero() {
		return nil
	}
	if err := enc.Encode(record{Type: recordEventLog, EventLog: &eventLogRecord{Dropped: snap.eventsDropped}}); err != nil {
		return err
	}
	for i := range snap.events {
		if err := enc.Encode(record{Type: recordEvent, Event: &snap.events[i]}); err != nil {
			return err
		}
	}
	return nil
}

func (snap *snapshot) writeRecords(enc *json.Encoder) error {
	for _, n := range snap.nodes {
		if err := enc.Encode(record{Type: recordNode, Node: n}); err != nil {
			return err
		}
	}
	for _, j := range snap.jobs {
		if err := enc.Encode(record{Type: recordJob, Job: j}); err != nil {
			return err
		}
	}
	for _, a := range snap.allocs {
		if err := enc.Encode(record{Type: recordAlloc, Alloc: a}); err != nil {
			return err
		}
	}
	if snap.trust != nil {
		if err := enc.Encode(record{Type: recordTrust, Trust: snap.trust}); err != nil {
			return err
		}
	}
	for i := range snap.joinTokens {
		if err := enc.Encode(record{Type: recordJoinToken, JoinToken: &snap.joinTokens[i]}); err != nil {
			return err
		}
	}
	for i := range snap.admissions {
		if err := enc.Encode(record{Type: recordAdmission, Admission: &snap.admissions[i]}); err != nil {
			return err
		}
	}
	if snap.limits != nil {
		if err := enc.Encode(record{Type: recordLimits, Limits: snap.limits}); err != nil {
			return err
		}
	}
	if snap.acl != nil {
		if err := enc.Encode(record{Type: recordACL, ACL: snap.acl}); err != nil {
			return err
		}
	}
	for i := range snap.aclTokens {
		if err := enc.Encode(record{Type: recordACLToken, ACLToken: &snap.aclTokens[i]}); err != nil {
			return err
		}
	}
	for i := range snap.aclUsers {
		if err := enc.Encode(record{Type: recordACLUser, ACLUser: &snap.aclUsers[i]}); err != nil {
			return err
		}
	}
	for _, svc := range snap.services {
		if err := enc.Encode(record{Type: recordService, Service: svc}); err != nil {
			return err
		}
	}
	if snap.lastJobNumber > 0 {
		if err := enc.Encode(record{Type: recordJobNumbers, JobNumbers: &jobNumbersRecord{Last: snap.lastJobNumber}}); err != nil {
			return err
		}
	}
	for i := range snap.partitions {
		if err := enc.Encode(record{Type: recordPartition, Partition: &snap.partitions[i]}); err != nil {
			return err
		}
	}
	return snap.writeFairShare(enc)
}

// writeFairShare writes the account table, when set, then when usage was
// last charged and each usage record, by account then user.
func (snap *snapshot) writeFairShare(enc *json.Encoder) error {
	if snap.accounts != nil {
		if err := enc.Encode(record{Type: recordAccounts, Accounts: snap.accounts}); err != nil {
			return err
		}
	}
	if snap.usageAt.IsZero() && len(snap.usage) == 0 {
		return nil
	}
	if err := enc.Encode(record{Type: recordUsageClock, UsageClock: &usageClockRecord{At: snap.usageAt}}); err != nil {
		return err
	}
	for i := range snap.usage {
		if err := enc.Encode(record{Type: recordUsage, Usage: &snap.usage[i]}); err != nil {
			return err
		}
	}
	return nil
}

// Restore replaces the state with a snapshot. It reads and checks the whole
// snapshot first; on any error the current state stays as it was.
func (f *FSM) Restore(rc io.ReadCloser) error {
	defer func() { _ = rc.Close() }()
	st, err := readSnapshot(rc)
	if err != nil {
		return fmt.Errorf("restore: %w", err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.st = st
	f.fire()
	f.fireEvents()
	f.logger.Info("restored snapshot", "index", st.index, "nodes", len(st.nodes), "jobs", len(st.jobs), "allocs", len(st.allocs),
		"services", len(st.services))
	return nil
}

func readSnapshot(r io.Reader) (*state, error) {
	st, _, err := readSnapshotVersion(r)
	return st, err
}

// readSnapshotVersion is readSnapshot that also returns the snapshot's
// version.
func readSnapshotVersion(r io.Reader) (*state, int, error) {
	dec := json.NewDecoder(bufio.NewReader(r))
	var h header
	if err := dec.Decode(&h); err != nil {
		return nil, 0, fmt.Errorf("%w: header: %w", ErrBadSnapshot, err)
	}
	if h.Version < minSnapshotVersion || h.Version > snapshotVersion {
		return nil, 0, fmt.Errorf("%w: version %d, want %d to %d", ErrBadSnapshot, h.Version, minSnapshotVersion, snapshotVersion)
	}
	st := newState()
	st.index = h.Index
	// What changed the trust state is not recorded: as of this index.
	st.viewTrustIndex = h.Index
	for n := 1; ; n++ {
		var rec record
		err := dec.Decode(&rec)
		if errors.Is(err, io.EOF) {
			return st, h.Version, nil
		}
		if err != nil {
			return nil, 0, fmt.Errorf("%w: record %d: %w", ErrBadSnapshot, n, err)
		}
		if (h.Version < trustSnapshotVersion && isTrustRecord(rec.Type)) ||
			(h.Version < limitsSnapshotVersion && rec.Type == recordLimits) ||
			(h.Version < aclSnapshotVersion && isACLRecord(rec.Type)) ||
			(h.Version < serviceSnapshotVersion && rec.Type == recordService) ||
			(h.Version < eventSnapshotVersion && isEventRecord(rec.Type)) ||
			(h.Version < fairshareSnapshotVersion && isFairShareRecord(rec.Type)) ||
			(h.Version < numberSnapshotVersion && (rec.Type == recordJobNumbers || rec.Type == recordPartition)) {
			return nil, 0, fmt.Errorf("%w: record %d: %s record in a version %d snapshot", ErrBadSnapshot, n, rec.Type, h.Version)
		}
		if err := st.restoreRecord(&rec); err != nil {
			return nil, 0, fmt.Errorf("%w: record %d: %w", ErrBadSnapshot, n, err)
		}
	}
}

// isFairShareRecord reports whether a record type is one of version 8's.
func isFairShareRecord(typ string) bool {
	return typ == recordAccounts || typ == recordUsageClock || typ == recordUsage
}

// isEventRecord reports whether a record type is one of version 6's.
func isEventRecord(typ string) bool { return typ == recordEventLog || typ == recordEvent }

// isACLRecord reports whether a record type is one of version 4's.
func isACLRecord(typ string) bool {
	return typ == recordACL || typ == recordACLToken || typ == recordACLUser
}

// isTrustRecord reports whether a record type is one of version 2's.
func isTrustRecord(typ string) bool {
	return typ == recordTrust || typ == recordJoinToken || typ == recordAdmission
}

// restoreRecord adds one snapshot record to a state being restored, checking
// what Apply would have guaranteed: unique IDs and job numbers, allocations of known jobs,
// no GPU held twice, one valid trust state and join tokens and admissions
// only after it, services with an ID and a valid name, each once.
func (s *state) restoreRecord(rec *record) error {
	switch rec.Type {
	case recordNode:
		n := rec.Node
		switch {
		case n == nil || n.ID == "":
			return errors.New("node record without node id")
		case s.nodes[n.ID] != nil:
			return fmt.Errorf("node %s twice", n.ID)
		}
		s.nodes[n.ID] = n
		if n.Drain != nil {
			s.draining[n.ID] = true
		}
	case recordJob:
		j := rec.Job
		switch {
		case j == nil || j.ID == "":
			return errors.New("job record without job id")
		case s.jobs[j.ID] != nil:
			return fmt.Errorf("job %s twice", j.ID)
		case j.RequestID != "" && s.jobByRequest[j.RequestID] != "":
			return fmt.Errorf("request id %s used by two jobs", j.RequestID)
		case j.Number != 0 && s.numberJobs[j.Number] != "":
			return fmt.Errorf("job number %d used by two jobs", j.Number)
		}
		s.addJob(j)
	case recordAlloc:
		a := rec.Alloc
		switch {
		case a == nil || a.ID == "":
			return errors.New("alloc record without alloc id")
		case s.allocs[a.ID] != nil:
			return fmt.Errorf("alloc %s twice", a.ID)
		case s.jobs[a.JobID] == nil:
			return fmt.Errorf("alloc %s of unknown job %s", a.ID, a.JobID)
		}
		if a.Live() {
			for _, g := range a.GPUs {
				if holder, ok := s.gpuHolder[g]; ok {
					return fmt.Errorf("GPU %s held by allocs %s and %s", g, holder, a.ID)
				}
			}
		}
		s.addAlloc(a)
	case recordTrust:
		switch {
		case rec.Trust == nil || rec.Trust.Founder == "":
			return errors.New("trust record without founder")
		case s.trust != nil:
			return errors.New("trust state twice")
		}
		if err := validateTrust(rec.Trust); err != nil {
			return fmt.Errorf("trust state: %w", err)
		}
		s.trust = rec.Trust
	case recordJoinToken:
		tok := rec.JoinToken
		switch {
		case tok == nil || tok.ID == "":
			return errors.New("join token record without token id")
		case s.trust == nil:
			return fmt.Errorf("join token %s before the trust state", tok.ID)
		case hasKey(s.joinTokens, tok.ID):
			return fmt.Errorf("join token %s twice", tok.ID)
		}
		s.joinTokens[tok.ID] = *tok
	case recordAdmission:
		a := rec.Admission
		switch {
		case a == nil || a.NodeID == "":
			return errors.New("admission record without node id")
		case s.trust == nil:
			return fmt.Errorf("admission of node %s before the trust state", a.NodeID)
		case hasKey(s.admissions, a.NodeID):
			return fmt.Errorf("admission of node %s twice", a.NodeID)
		}
		s.admissions[a.NodeID] = *a
	case recordLimits:
		switch {
		case rec.Limits == nil:
			return errors.New("limits record without limits")
		case s.limits != nil:
			return errors.New("limits twice")
		}
		if err := rec.Limits.ValidateTable(); err != nil {
			return fmt.Errorf("limits: %w", err)
		}
		if !rec.Limits.IsZero() {
			s.limits = rec.Limits
		}
	case recordACL:
		switch {
		case rec.ACL == nil:
			return errors.New("acl record without acl state")
		case s.acl != nil:
			return errors.New("acl state twice")
		}
		s.acl = rec.ACL
	case recordACLToken:
		tok := rec.ACLToken
		switch {
		case tok == nil:
			return errors.New("acl token record without token")
		case s.acl == nil:
			return fmt.Errorf("acl token %s before the acl state", tok.ID)
		case hasKey(s.aclTokens, tok.ID):
			return fmt.Errorf("acl token %s twice", tok.ID)
		case len(s.aclTokens) >= structs.MaxACLTokens:
			return fmt.Errorf("more than %d acl tokens", structs.MaxACLTokens)
		}
		if err := tok.Validate(); err != nil {
			return fmt.Errorf("acl token %s: %w", tok.ID, err)
		}
		s.aclTokens[tok.ID] = *tok
	case recordACLUser:
		u := rec.ACLUser
		switch {
		case u == nil:
			return errors.New("acl user record without user")
		case s.acl == nil:
			return fmt.Errorf("acl user %s before the acl state", u.Name)
		case hasKey(s.aclUsers, u.Name):
			return fmt.Errorf("acl user %s twice", u.Name)
		}
		if err := structs.ValidateUserName(u.Name); err != nil {
			return fmt.Errorf("acl user: %w", err)
		}
		s.aclUsers[u.Name] = *u
	case recordService:
		svc := rec.Service
		switch {
		case svc == nil || svc.ID == "":
			return errors.New("service record without service id")
		case hasKey(s.services, svc.Name):
			return fmt.Errorf("service %s twice", svc.Name)
		}
		if err := structs.ValidateServiceName(svc.Name); err != nil {
			return fmt.Errorf("service %s: %w", structs.ShortID(svc.ID), err)
		}
		for _, o := range s.services {
			if o.ID == svc.ID {
				return fmt.Errorf("services %s and %s have one id", o.Name, svc.Name)
			}
		}
		s.services[svc.Name] = svc
	case recordEventLog:
		switch {
		case rec.EventLog == nil:
			return errors.New("event log record without event log")
		case s.eventLogSeen:
			return errors.New("event log twice")
		}
		s.eventLogSeen = true
		s.events.dropped = rec.EventLog.Dropped
	case recordEvent:
		return s.restoreEvent(rec.Event)
	case recordAccounts, recordUsageClock, recordUsage:
		return s.restoreFairShare(rec)
	case recordJobNumbers:
		switch {
		case rec.JobNumbers == nil:
			return errors.New("job numbers record without job numbers")
		case s.jobNumbersSeen:
			return errors.New("job numbers twice")
		}
		s.jobNumbersSeen = true
		s.lastJobNumber = max(s.lastJobNumber, rec.JobNumbers.Last)
	case recordPartition:
		p := rec.Partition
		switch {
		case p == nil:
			return errors.New("partition record without partition")
		case hasKey(s.partitions, p.Name):
			return fmt.Errorf("partition %s twice", p.Name)
		}
		if err := p.Validate(); err != nil {
			return fmt.Errorf("partition %s: %w", p.Name, err)
		}
		s.partitions[p.Name] = *p
	default:
		return fmt.Errorf("unknown record type %q", rec.Type)
	}
	return nil
}

// restoreEvent adds one event to a state being restored: after the event
// log record, after every event before it and what the log let go of, of
// an entry the snapshot holds, and no more than MaxEvents.
func (s *state) restoreEvent(e *structs.Event) error {
	switch {
	case e == nil:
		return errors.New("event record without event")
	case !s.eventLogSeen:
		return fmt.Errorf("event %s before the event log", e.Cursor())
	case e.Cursor().Compare(s.events.lastCursor()) <= 0 || e.Cursor().Compare(s.events.dropped) <= 0:
		return fmt.Errorf("event %s out of order", e.Cursor())
	case e.Index > s.index:
		return fmt.Errorf("event %s after the snapshot's index %d", e.Cursor(), s.index)
	case s.events.len() >= MaxEvents:
		return fmt.Errorf("more than %d events", MaxEvents)
	case len(e.Reason) > structs.MaxEventReasonLen:
		return fmt.Errorf("event %s: reason longer than %d bytes", e.Cursor(), structs.MaxEventReasonLen)
	}
	s.events.push(*e)
	return nil
}

// hasKey reports whether m holds k.
func hasKey[V any](m map[string]V, k string) bool {
	_, ok := m[k]
	return ok
}
