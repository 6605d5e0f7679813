package cgroup

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Errors of this package.
var (
	ErrNoCgroups   = errors.New("no usable cgroup hierarchy")
	ErrBadName     = errors.New("invalid group name")
	ErrBadLimit    = errors.New("invalid limit")
	ErrNotEmpty    = errors.New("processes left in the group")
	ErrNoGroupFile = errors.New("the group lacks a control file")
)

// Version is a cgroup version: V1 or V2.
type Version int

// The cgroup versions.
const (
	V1 Version = 1
	V2 Version = 2
)

func (v Version) String() string {
	switch v {
	case V1:
		return "cgroup v1"
	case V2:
		return "cgroup v2"
	}
	return "cgroup v" + strconv.Itoa(int(v))
}

// NVIDIAMajor is the device major of NVIDIA's GPU device nodes:
// /dev/nvidiaN is (195, N), and nvidiactl (195, 255).
const NVIDIAMajor = 195

// CFSPeriod is the period a CPU quota is counted over.
const CFSPeriod = 100 * time.Millisecond

// MinPidsMax is the lowest process limit a group takes: a job needs its
// own process, a shell's few, and the supervisor's thread that starts it
// in v1.
const MinPidsMax = 8

// Limits are what one allocation's group allows.
type Limits struct {
	// CPUs is the number of CPUs' time the group may use, as a quota per
	// CFSPeriod; 0: no quota.
	CPUs int
	// Cpuset, when set, is the CPUs the group's processes run on, as the
	// kernel writes lists ("0-3,8").
	Cpuset string
	// MemoryBytes is the most memory, swap included, the group may hold;
	// 0: no limit.
	MemoryBytes int64
	// PidsMax is the most processes and threads the group may hold; 0:
	// no limit.
	PidsMax int64
	// DenyDevices are the character devices the group's processes may not
	// open (nor read, write, or make with mknod).
	DenyDevices []Device
}

// Device is one character device, by major and minor number.
type Device struct {
	Major uint32 `json:"major"`
	Minor uint32 `json:"minor"`
}

func (d Device) String() string { return fmt.Sprintf("c %d:%d", d.Major, d.Minor) }

// Check says which limit is out of range, if any.
func (l Limits) Check() error {
	switch {
	case l.CPUs < 0:
		return fmt.Errorf("%w: cpus %d is negative", ErrBadLimit, l.CPUs)
	case l.MemoryBytes < 0:
		return fmt.Errorf("%w: memory %d bytes is negative", ErrBadLimit, l.MemoryBytes)
	case l.PidsMax != 0 && l.PidsMax < MinPidsMax:
		return fmt.Errorf("%w: pids_max %d is below the minimum %d", ErrBadLimit, l.PidsMax, MinPidsMax)
	case strings.ContainsAny(l.Cpuset, " \n"):
		return fmt.Errorf("%w: cpuset %q", ErrBadLimit, l.Cpuset)
	}
	return nil
}

// Stats are what a group's processes used, all of them together, since
// the group was made.
type Stats struct {
	// MemoryPeakBytes is the most memory the group held at once (0 where
	// the kernel keeps no peak: v2 before Linux 5.19).
	MemoryPeakBytes int64 `json:"memory_peak_bytes,omitempty"`
	// CPU is the CPU time used, user and system.
	CPU time.Duration `json:"cpu_ns,omitempty"`
	// Throttled is how long the quota held the group back, over
	// ThrottledPeriods periods.
	Throttled        time.Duration `json:"throttled_ns,omitempty"`
	ThrottledPeriods int64         `json:"throttled_periods,omitempty"`
	// OOMKills counts processes the kernel killed for the memory limit.
	OOMKills int64 `json:"oom_kills,omitempty"`
}

// Hierarchy is where a node makes its allocations' groups: the parent
// group, in the unified hierarchy (V2) or in each controller's (V1). It
// is a plain record, written into each allocation's spec, so that a
// supervisor finds it without looking again.
type Hierarchy struct {
	Version Version `json:"version"`
	// Dir is the parent group's directory in v2, and Mount the unified
	// hierarchy's root, above it.
	Dir   string `json:"dir,omitempty"`
	Mount string `json:"mount,omitempty"`
	// Parent is the parent group's path below each hierarchy's root.
	Parent string `json:"parent,omitempty"`
	// Dirs are the parent group's directory in each v1 controller's
	// hierarchy that groups use, by controller name.
	Dirs map[string]string `json:"dirs,omitempty"`
}

// The v1 controllers a group needs, and those it uses when mounted.
var (
	v1Required = []string{"memory", "cpu", "pids", "devices"}
	v1Optional = []string{"cpuacct", "freezer", "cpuset"}
	v2Required = []string{"cpu", "memory", "pids"}
)

// A mount is one cgroup filesystem in mountinfo.
type mount struct {
	dir     string
	version Version
	// controllers of a v1 mount (from its options); nil for v2.
	controllers []string
}

// Detect finds the node's cgroup hierarchy from mountinfo
// (/proc/self/mountinfo), parent being the path of the node's parent
// group below the hierarchy's root ("skein"): v2 when the unified
// hierarchy offers cpu, memory and pids, else v1 when memory, cpu, pids
// and devices are mounted. It creates nothing; Prepare does.
func Detect(mountinfo, parent string) (*Hierarchy, error) {
	parent, err := cleanParent(parent)
	if err != nil {
		return nil, err
	}
	f, err := os.Open(mountinfo)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrNoCgroups, err)
	}
	defer f.Close()
	mounts, err := parseMountinfo(f)
	if err != nil {
		return nil, fmt.Errorf("%w: read %s: %w", ErrNoCgroups, mountinfo, err)
	}
	var why []string
	for _, m := range mounts {
		if m.version != V2 {
			continue
		}
		have, err := readWords(filepath.Join(m.dir, "cgroup.controllers"))
		if err != nil {
			why = append(why, err.Error())
			continue
		}
		if missing := missingFrom(have, v2Required); len(missing) > 0 {
			why = append(why, fmt.Sprintf("cgroup v2 at %s lacks %s", m.dir, strings.Join(missing, ", ")))
			continue
		}
		return &Hierarchy{Version: V2, Dir: filepath.Join(m.dir, parent), Mount: m.dir, Parent: parent}, nil
	}
	dirs := make(map[string]string)
	for _, m := range mounts {
		for _, c := range m.controllers {
			if _, ok := dirs[c]; !ok && (slices.Contains(v1Required, c) || slices.Contains(v1Optional, c)) {
				dirs[c] = filepath.Join(m.dir, parent)
			}
		}
	}
	var have []string
	for c := range dirs {
		have = append(have, c)
	}
	if missing := missingFrom(have, v1Required); len(missing) > 0 {
		why = append(why, "cgroup v1 lacks "+strings.Join(missing, ", "))
		return nil, fmt.Errorf("%w: %s", ErrNoCgroups, strings.Join(why, "; "))
	}
	return &Hierarchy{Version: V1, Dirs: dirs, Parent: parent}, nil
}

// cleanParent checks a parent group's path: relative, without ".."; "/"
// and "" are the hierarchy's root itself.
func cleanParent(parent string) (string, error) {
	p := filepath.Clean("/" + parent)
	if strings.Contains(parent, "..") || strings.ContainsAny(parent, "\n ") {
		return "", fmt.Errorf("%w: parent %q", ErrBadName, parent)
	}
	return strings.TrimPrefix(p, "/"), nil
}

// parseMountinfo returns the cgroup filesystems of a mountinfo file.
func parseMountinfo(r io.Reader) ([]mount, error) {
	var out []mount
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		// id parent major:minor root mountpoint options [optional...] - fstype source superoptions
		pre, post, ok := strings.Cut(sc.Text(), " - ")
		if !ok {
			continue
		}
		f, g := strings.Fields(pre), strings.Fields(post)
		if len(f) < 5 || len(g) < 3 {
			continue
		}
		dir := unescapeMount(f[4])
		switch g[0] {
		case "cgroup2":
			out = append(out, mount{dir: dir, version: V2})
		case "cgroup":
			var cs []string
			for o := range strings.SplitSeq(g[2], ",") {
				if o != "rw" && o != "ro" && !strings.Contains(o, "=") {
					cs = append(cs, o)
				}
			}
			out = append(out, mount{dir: dir, version: V1, controllers: cs})
		}
	}
	return out, sc.Err()
}

// unescapeMount undoes mountinfo's octal escapes (\040 for a space).
func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

func missingFrom(have, want []string) []string {
	var missing []string
	for _, w := range want {
		if !slices.Contains(have, w) {
			missing = append(missing, w)
		}
	}
	return missing
}

// Describe says in a few words where groups are made: "cgroup v2 at
// /sys/fs/cgroup/skein/n1", or "cgroup v1: skein/n1 in memory, cpu, ...".
func (h *Hierarchy) Describe() string {
	if h.Version == V2 {
		return fmt.Sprintf("%s at %s", h.Version, h.Dir)
	}
	return fmt.Sprintf("%s: %s in %s", h.Version, h.Parent, strings.Join(h.controllers(), ", "))
}

// controllers are the v1 controllers the hierarchy uses, in a fixed order.
func (h *Hierarchy) controllers() []string {
	var cs []string
	for _, c := range append(slices.Clone(v1Required), v1Optional...) {
		if _, ok := h.Dirs[c]; ok {
			cs = append(cs, c)
		}
	}
	return cs
}

// Prepare makes the parent group (and, in v2, hands the controllers down
// to it), then makes and removes one group in it: a hierarchy Prepare
// accepts can confine jobs. It may be called again; what exists is kept.
func (h *Hierarchy) Prepare() error {
	if err := h.prepare(); err != nil {
		return fmt.Errorf("%w: %w", ErrNoCgroups, err)
	}
	probe := fmt.Sprintf("probe-%d", os.Getpid())
	g, err := h.Create(probe, Limits{PidsMax: MinPidsMax, MemoryBytes: 64 << 20, CPUs: 1})
	if err != nil {
		return fmt.Errorf("%w: make a group: %w", ErrNoCgroups, err)
	}
	if err := g.Remove(); err != nil {
		return fmt.Errorf("%w: remove a group: %w", ErrNoCgroups, err)
	}
	return nil
}

// LimitParent holds every group under the parent, all together, to
// bytes of memory, swap included: what a node offers its jobs. A job with
// no limit of its own is held to what is left of it.
func (h *Hierarchy) LimitParent(bytes int64) error {
	if bytes <= 0 {
		return fmt.Errorf("%w: parent memory %d bytes", ErrBadLimit, bytes)
	}
	if h.Version == V2 {
		if err := writeFile(h.Dir, "memory.max", strconv.FormatInt(bytes, 10)); err != nil {
			return err
		}
		if err := writeFile(h.Dir, "memory.swap.max", "0"); err != nil && !errors.Is(err, ErrNoGroupFile) {
			return err
		}
		return nil
	}
	return limitMemoryV1(h.Dirs["memory"], bytes)
}

// Group returns the group of the given name under the parent, made or
// not: what a supervisor or the runner finds again by name.
func (h *Hierarchy) Group(name string) (*Group, error) {
	if err := checkName(name); err != nil {
		return nil, err
	}
	g := &Group{version: h.Version, name: name}
	if h.Version == V2 {
		g.dir = filepath.Join(h.Dir, name)
		return g, nil
	}
	g.dirs = make(map[string]string, len(h.Dirs))
	for c, d := range h.Dirs {
		g.dirs[c] = filepath.Join(d, name)
	}
	return g, nil
}

// Open is the group name as Create made it, for a process to join: in a
// v1 hierarchy, only the controllers it was made in (cpuset only where
// its CPUs are pinned). A group that is not there is an error.
func (h *Hierarchy) Open(name string) (*Group, error) {
	g, err := h.Group(name)
	if err != nil {
		return nil, err
	}
	if g.version == V2 {
		if _, err := os.Stat(g.dir); err != nil {
			return nil, fmt.Errorf("cgroup %s: %w", name, err)
		}
		return g, nil
	}
	for c, d := range g.dirs {
		if _, err := os.Stat(d); errors.Is(err, fs.ErrNotExist) {
			delete(g.dirs, c)
		} else if err != nil {
			return nil, fmt.Errorf("cgroup %s: %w", name, err)
		}
	}
	if len(g.dirs) == 0 {
		return nil, fmt.Errorf("cgroup %s: %w", name, fs.ErrNotExist)
	}
	return g, nil
}

// Create makes the group name under the parent with the given limits. A
// group of that name left from before is emptied and taken over.
func (h *Hierarchy) Create(name string, l Limits) (*Group, error) {
	if err := l.Check(); err != nil {
		return nil, err
	}
	g, err := h.Group(name)
	if err != nil {
		return nil, err
	}
	if g.version == V2 {
		err = g.createV2(l)
	} else {
		err = g.createV1(l)
	}
	if err != nil {
		_ = g.Remove()
		return nil, fmt.Errorf("make cgroup %s: %w", name, err)
	}
	return g, nil
}

// checkName accepts a name that is one path component.
func checkName(name string) error {
	if name == "" || name == "." || name == ".." || strings.ContainsAny(name, "/\n ") || len(name) > 200 {
		return fmt.Errorf("%w %q", ErrBadName, name)
	}
	return nil
}

// Group is one allocation's control group.
type Group struct {
	version Version
	name    string
	// dir is the group's directory in v2; dirs its directory in each v1
	// controller's hierarchy.
	dir  string
	dirs map[string]string
}

// Name is the group's name under its parent.
func (g *Group) Name() string { return g.name }

// Version is the cgroup version the group lives in.
func (g *Group) Version() Version { return g.version }

// Procs lists the processes in the group.
func (g *Group) Procs() ([]int, error) {
	data, err := os.ReadFile(filepath.Join(g.procsDir(), "cgroup.procs"))
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, nil
		}
		return nil, err
	}
	var pids []int
	for f := range strings.FieldsSeq(string(data)) {
		if pid, err := strconv.Atoi(f); err == nil {
			pids = append(pids, pid)
		}
	}
	return pids, nil
}

// procsDir is the directory whose cgroup.procs lists the group's
// processes: in v1 the freezer's (the hierarchy Kill works through) or
// else the memory controller's.
func (g *Group) procsDir() string {
	if g.version == V2 {
		return g.dir
	}
	if d, ok := g.dirs["freezer"]; ok {
		return d
	}
	return g.dirs["memory"]
}

// Remove removes the group's directories. Processes still in it keep it
// (ErrNotEmpty); Kill first. A group already gone is not an error.
func (g *Group) Remove() error {
	var first error
	for _, d := range g.allDirs() {
		err := os.Remove(d)
		for i := 0; errors.Is(err, syscall.EBUSY) && i < 50; i++ {
			// The last process has died but the kernel has not let go of
			// the group yet.
			time.Sleep(10 * time.Millisecond)
			err = os.Remove(d)
		}
		switch {
		case err == nil, errors.Is(err, fs.ErrNotExist):
		case errors.Is(err, syscall.EBUSY):
			if first == nil {
				first = fmt.Errorf("remove %s: %w", d, ErrNotEmpty)
			}
		case first == nil:
			first = fmt.Errorf("remove cgroup: %w", err)
		}
	}
	return first
}

// allDirs are the group's directories.
func (g *Group) allDirs() []string {
	if g.version == V2 {
		return []string{g.dir}
	}
	ds := make([]string, 0, len(g.dirs))
	for _, c := range slices.Sorted(maps.Keys(g.dirs)) {
		ds = append(ds, g.dirs[c])
	}
	return ds
}

// writeFile writes one control file; its name leads the error.
func writeFile(dir, name, value string) error {
	f, err := os.OpenFile(filepath.Join(dir, name), os.O_WRONLY|os.O_TRUNC, 0)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("%s: %w", name, ErrNoGroupFile)
		}
		return fmt.Errorf("%s: %w", name, err)
	}
	_, err = f.WriteString(value)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("write %q to %s: %w", value, name, err)
	}
	return nil
}

// readWords reads a control file as space-separated words.
func readWords(path string) ([]string, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return strings.Fields(string(data)), nil
}

// readInt reads a control file holding one number.
func readInt(path string) (int64, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	s := strings.TrimSpace(string(data))
	if s == "max" {
		return -1, nil
	}
	return strconv.ParseInt(s, 10, 64)
}

// readKeyed reads a control file of "key value" lines.
func readKeyed(path string) (map[string]int64, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	out := make(map[string]int64)
	for line := range strings.SplitSeq(string(data), "\n") {
		k, v, ok := strings.Cut(strings.TrimSpace(line), " ")
		if !ok {
			continue
		}
		if n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64); err == nil {
			out[k] = n
		}
	}
	return out, nil
}
