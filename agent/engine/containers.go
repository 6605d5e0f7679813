package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"path"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/events"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/image"
	"github.com/docker/docker/api/types/mount"
	"github.com/docker/docker/client"
	"github.com/docker/docker/pkg/stdcopy"
	"golang.org/x/sys/unix"

	"github.com/skein-dev/skein/structs"
)

// Labels every container skein runs carries: the allocation it runs and
// the runner's allocation directory (several agents may share one engine;
// each cleans up only its own).
const (
	LabelAlloc    = "skein.alloc"
	LabelAllocDir = "skein.alloc-dir"
)

// Errors of the container operations, matched with errors.Is.
var (
	// ErrImageNotFound: the engine does not hold the image and, when
	// pulling, the registry has no such image.
	ErrImageNotFound = errors.New("image not found")
	// ErrUnreachable: the engine did not answer.
	ErrUnreachable = errors.New("engine unreachable")
	// ErrNoContainer: no container has that ID or name.
	ErrNoContainer = errors.New("no such container")
	// ErrNotRunning: the container is not running (Signal).
	ErrNotRunning = errors.New("container not running")
	// ErrNameInUse: another container has the name (Create).
	ErrNameInUse = errors.New("container name in use")
)

// GPUMode is how a container is handed its GPUs.
type GPUMode string

// GPU modes.
const (
	// GPUsNone passes no devices (simulated GPUs, or a job without GPUs).
	GPUsNone GPUMode = ""
	// GPUsNVIDIA sends the NVIDIA device request (`--gpus device=UUID,...`).
	GPUsNVIDIA GPUMode = "nvidia"
	// GPUsCDI names the GPUs as CDI devices (nvidia.com/gpu=UUID).
	GPUsCDI GPUMode = "cdi"
)

// ContainerSpec is one container to run for an allocation.
type ContainerSpec struct {
	// Name is the container's name; Labels are set on it as given
	// (LabelAlloc and LabelAllocDir at least).
	Name   string
	Labels map[string]string
	Image  string
	// Cmd is the container's command; the image's entrypoint, if any,
	// runs it.
	Cmd []string
	Env []string
	// Workdir is the working directory inside the container; "" keeps
	// the image's.
	Workdir string
	// User is "UID:GID" and GroupAdd the supplementary group IDs; "" runs
	// as the image's user.
	User     string
	GroupAdd []string
	Mounts   []structs.Mount
	// ShmSize is /dev/shm's size in bytes; 0 is the engine's default.
	ShmSize int64
	// GPUs are the allocation's GPU UUIDs, handed over as GPUMode says;
	// the container sees no other GPU (see Create).
	GPUs    []string
	GPUMode GPUMode
	// CapAdd are the capabilities the container is given, as
	// structs.Capabilities spells them; it has no other (see Create).
	CapAdd []string
	// Limits are what the container may use of its node.
	Limits Limits
	// Network is the network mode: "host" (the default when ""), or
	// "container:NAME" to share another container's network.
	Network string
	// Host, when set, names the container this one lives inside, as a
	// process of it would (an agent that itself runs in a container):
	// it shares Host's network and process namespaces, so it dies with
	// Host, and, where the engine manages cgroups itself (the cgroupfs
	// driver), sits in Host's cgroup, so it freezes and thaws with it.
	// Network is then ignored.
	Host string
}

// Limits are a container's share of its node, which the engine holds it
// to with the container's cgroup; a zero field sets no limit.
type Limits struct {
	// MemoryBytes is the hard limit on memory, and on memory and swap
	// together: the container never swaps.
	MemoryBytes int64
	// Cpuset, when set, pins the container to those CPUs ("0-3,8");
	// otherwise CPUs is a quota of that many CPUs' time.
	CPUs   int
	Cpuset string
	// Pids is the most processes and threads the container may have.
	Pids int64
}

// PullProgress is one report of a pull in flight: Bytes of Total
// downloaded so far (Total 0: not known yet).
type PullProgress struct {
	Bytes, Total int64
}

// ContainerState is what the engine says of one container (List leaves
// ExitCode and StartedAt zero: only Inspect knows them).
type ContainerState struct {
	ID        string
	Name      string
	Labels    map[string]string
	Running   bool
	ExitCode  int
	StartedAt time.Time
	// OOMKilled is set when the kernel killed a process of the container
	// for want of memory (Inspect only).
	OOMKilled bool
}

// pullReportEvery is how often, at most, Pull reports its progress.
const pullReportEvery = 250 * time.Millisecond

// daemonSaid prefixes the client's text of an error the engine answered.
const daemonSaid = "Error response from daemon: "

// HasImage reports whether the engine holds the image ref.
func (d *Docker) HasImage(ctx context.Context, ref string) (bool, error) {
	_, err := d.c.ImageInspect(ctx, ref)
	switch {
	case err == nil:
		return true, nil
	case cerrdefs.IsNotFound(err):
		return false, nil
	}
	return false, d.fail(fmt.Sprintf("inspect image %q", ref), err)
}

// Pull pulls ref, calling progress (when not nil) as the engine reports
// how far it got: at most every pullReportEvery, and once more when the
// pull succeeded. A failure says why in words: the image does not exist
// (ErrImageNotFound), the engine did not answer (ErrUnreachable), or what
// the engine said.
func (d *Docker) Pull(ctx context.Context, ref string, progress func(PullProgress)) error {
	op := fmt.Sprintf("pull %q", ref)
	body, err := d.c.ImagePull(ctx, ref, image.PullOptions{})
	if err != nil {
		if !unanswered(err) && imageMissing(err, err.Error()) {
			return imageNotFound(ref, err)
		}
		return d.fail(op, err)
	}
	defer body.Close()
	var (
		layers   = map[string]PullProgress{}
		reported PullProgress
		last     time.Time
	)
	dec := json.NewDecoder(body)
	for {
		var m pullMessage
		if err := dec.Decode(&m); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			if ctx.Err() != nil {
				return fmt.Errorf("%s: %w", op, ctx.Err())
			}
			return d.fail(op, err)
		}
		if msg := m.err(); msg != "" {
			if imageMissing(nil, msg) {
				return imageNotFound(ref, errors.New(msg))
			}
			return fmt.Errorf("%s: %s", op, msg)
		}
		m.apply(layers)
		if now := progressSum(layers); progress != nil && now != reported && time.Since(last) >= pullReportEvery {
			progress(now)
			reported, last = now, time.Now()
		}
	}
	if progress != nil {
		progress(progressSum(layers))
	}
	return nil
}

// pullMessage is one message of the engine's pull stream.
type pullMessage struct {
	ID       string `json:"id"`
	Status   string `json:"status"`
	Progress *struct {
		Current int64 `json:"current"`
		Total   int64 `json:"total"`
	} `json:"progressDetail"`
	Error *struct {
		Message string `json:"message"`
	} `json:"errorDetail"`
	ErrorText string `json:"error"`
}

// err is the message's error, "" when it reports none.
func (m *pullMessage) err() string {
	if m.Error != nil && m.Error.Message != "" {
		return m.Error.Message
	}
	return m.ErrorText
}

// apply records a layer's download progress: its bytes while
// downloading, and all of them once downloaded. Extraction reports
// progress too, of another count, and is left out.
func (m *pullMessage) apply(layers map[string]PullProgress) {
	if m.ID == "" {
		return
	}
	l := layers[m.ID]
	switch m.Status {
	case "Downloading":
		if m.Progress == nil {
			return
		}
		l = PullProgress{Bytes: m.Progress.Current, Total: m.Progress.Total}
	case "Download complete", "Pull complete":
		l.Bytes = l.Total
	default:
		return
	}
	layers[m.ID] = l
}

// progressSum adds up the layers' progress.
func progressSum(layers map[string]PullProgress) PullProgress {
	var sum PullProgress
	for _, l := range layers {
		sum.Bytes += l.Bytes
		sum.Total += l.Total
	}
	return sum
}

// imageMissing reports whether the engine's answer err (or, from the pull
// stream, its text msg) says that the image or its repository does not
// exist.
func imageMissing(err error, msg string) bool {
	if cerrdefs.IsNotFound(err) {
		return true
	}
	msg = strings.ToLower(msg)
	for _, s := range []string{"not found", "manifest unknown", "pull access denied", "repository does not exist", "no such image"} {
		if strings.Contains(msg, s) {
			return true
		}
	}
	return false
}

// imageNotFound is ErrImageNotFound for ref, with the engine's reason.
func imageNotFound(ref string, reason error) error {
	return &kindError{ErrImageNotFound, fmt.Errorf("image %q not found: %s", ref, strings.TrimPrefix(reason.Error(), daemonSaid))}
}

// Images lists the references (repo:tag) of the images the engine holds,
// newest first, at most limit of them; references longer than
// structs.MaxImageRefLen are left out.
func (d *Docker) Images(ctx context.Context, limit int) ([]string, error) {
	list, err := d.c.ImageList(ctx, image.ListOptions{})
	if err != nil {
		return nil, d.fail("list images", err)
	}
	sort.SliceStable(list, func(i, j int) bool { return list[i].Created > list[j].Created })
	var refs []string
	for _, img := range list {
		for _, tag := range img.RepoTags {
			if len(refs) >= limit {
				return refs, nil
			}
			if tag != "<none>:<none>" && len(tag) <= structs.MaxImageRefLen {
				refs = append(refs, tag)
			}
		}
	}
	return refs, nil
}

// Create creates the container (not started) and returns its ID. The
// container runs docker-init as PID 1, which forwards signals to the
// command, and the engine keeps no log of its output (Attach takes it).
//
// The container has no privileges: every capability is dropped but
// spec.CapAdd, and it runs with no-new-privileges, so that no setuid
// binary or file capability in the image gives any of its processes more
// than it started with. It runs as spec.User, and is held to
// spec.Limits. It is handed no device but its GPUs, and sees no other
// GPU even where the NVIDIA runtime is the engine's default and the image
// or the job asks for all of them (NVIDIA_VISIBLE_DEVICES is set to
// them, or to void). A container handed GPUs may lock unlimited memory
// (NCCL pins its buffers); one without keeps the engine's limit, since an
// engine that may not raise it (no CAP_SYS_RESOURCE) fails every start
// that asks. A mount's source must exist.
func (d *Docker) Create(ctx context.Context, spec ContainerSpec) (string, error) {
	op := fmt.Sprintf("create container %q", spec.Name)
	devices, err := deviceRequests(spec.GPUMode, spec.GPUs)
	if err != nil {
		return "", fmt.Errorf("%s: %w", op, err)
	}
	network := spec.Network
	if network == "" {
		network = "host"
	}
	mounts := make([]mount.Mount, len(spec.Mounts))
	for i, m := range spec.Mounts {
		mounts[i] = mount.Mount{Type: mount.TypeBind, Source: m.Source, Target: m.Target, ReadOnly: m.ReadOnly}
	}
	tini := true
	cfg := &container.Config{
		Image:      spec.Image,
		Cmd:        spec.Cmd,
		Env:        gpuEnv(spec.Env, spec.GPUMode, spec.GPUs),
		WorkingDir: spec.Workdir,
		User:       spec.User,
		Labels:     spec.Labels,
	}
	host := &container.HostConfig{
		NetworkMode: container.NetworkMode(network),
		Init:        &tini,
		ShmSize:     spec.ShmSize,
		GroupAdd:    spec.GroupAdd,
		Mounts:      mounts,
		LogConfig:   container.LogConfig{Type: "none"},
		SecurityOpt: []string{"no-new-privileges"},
		CapDrop:     []string{"ALL"},
		CapAdd:      spec.CapAdd,
		Resources:   resources(spec.Limits, devices),
	}
	if len(devices) > 0 {
		host.Ulimits = []*container.Ulimit{{Name: "memlock", Soft: -1, Hard: -1}}
	}
	if spec.Host != "" {
		if err := d.nest(ctx, host, spec.Host); err != nil {
			return "", fmt.Errorf("%s: %w", op, err)
		}
	}
	created, err := d.c.ContainerCreate(ctx, cfg, host, nil, nil, spec.Name)
	switch {
	case err == nil:
		return created.ID, nil
	case cerrdefs.IsConflict(err):
		return "", kind(ErrNameInUse, op, err)
	case cerrdefs.IsNotFound(err) && strings.Contains(strings.ToLower(err.Error()), "no such image"):
		return "", imageNotFound(spec.Image, err)
	}
	return "", d.fail(op, err)
}

// nest puts a container inside the running container named outer
// (ContainerSpec.Host).
func (d *Docker) nest(ctx context.Context, host *container.HostConfig, outer string) error {
	c, err := d.c.ContainerInspect(ctx, outer)
	if err != nil {
		return d.containerErr(fmt.Sprintf("inspect the host container %q", outer), err)
	}
	if c.State == nil || !c.State.Running {
		return fmt.Errorf("host container %q: %w", outer, ErrNotRunning)
	}
	host.NetworkMode = container.NetworkMode("container:" + c.ID)
	host.PidMode = container.PidMode("container:" + c.ID)
	info, err := d.c.Info(ctx)
	if err != nil {
		return d.fail("engine info", err)
	}
	if info.CgroupDriver == "cgroupfs" {
		parent := "/docker"
		if c.HostConfig != nil && c.HostConfig.CgroupParent != "" {
			parent = c.HostConfig.CgroupParent
		}
		host.CgroupParent = path.Join(parent, c.ID)
	}
	return nil
}

// resources are the engine's resources for limits and the devices.
func resources(l Limits, devices []container.DeviceRequest) container.Resources {
	r := container.Resources{DeviceRequests: devices, Memory: l.MemoryBytes, MemorySwap: l.MemoryBytes}
	switch {
	case l.Cpuset != "":
		r.CpusetCpus = l.Cpuset
	case l.CPUs > 0:
		r.NanoCPUs = int64(l.CPUs) * 1e9
	}
	if l.Pids > 0 {
		r.PidsLimit = &l.Pids
	}
	return r
}

// nvidiaVisible is the variable through which the NVIDIA runtime's hook
// picks the GPUs of a container it runs; "void" gives none.
const nvidiaVisible = "NVIDIA_VISIBLE_DEVICES"

// gpuEnv is env with NVIDIA_VISIBLE_DEVICES naming the container's GPUs,
// or void for none, whatever env or the image said: the NVIDIA runtime,
// where it is the engine's default, would otherwise hand every GPU to a
// container that asks for all of them (CUDA images do).
func gpuEnv(env []string, mode GPUMode, gpus []string) []string {
	visible := "void"
	if mode != GPUsNone && len(gpus) > 0 {
		visible = strings.Join(gpus, ",")
	}
	out := make([]string, 0, len(env)+1)
	for _, kv := range env {
		if !strings.HasPrefix(kv, nvidiaVisible+"=") && kv != nvidiaVisible {
			out = append(out, kv)
		}
	}
	return append(out, nvidiaVisible+"="+visible)
}

// deviceRequests hands the GPUs over as mode says.
func deviceRequests(mode GPUMode, gpus []string) ([]container.DeviceRequest, error) {
	switch mode {
	case GPUsNone:
		return nil, nil
	case GPUsNVIDIA:
		return []container.DeviceRequest{{Driver: "nvidia", DeviceIDs: gpus, Capabilities: [][]string{{"gpu"}}}}, nil
	case GPUsCDI:
		ids := make([]string, len(gpus))
		for i, uuid := range gpus {
			ids[i] = "nvidia.com/gpu=" + uuid
		}
		return []container.DeviceRequest{{Driver: "cdi", DeviceIDs: ids}}, nil
	}
	return nil, fmt.Errorf("GPU mode %q is none of %q, %q and %q", mode, GPUsNone, GPUsNVIDIA, GPUsCDI)
}

// Attach streams the container's standard output and error into stdout
// and stderr (both not nil) until the container ends (or ctx is done);
// the channel gets the stream's end (nil at the container's end, ctx's
// error when ctx ended it) and the connection to the engine is closed.
// Attach before Start so that no output is missed.
func (d *Docker) Attach(ctx context.Context, id string, stdout, stderr io.Writer) (<-chan error, error) {
	op := "attach to container " + id
	resp, err := d.c.ContainerAttach(ctx, id, container.AttachOptions{Stream: true, Stdout: true, Stderr: true})
	if err != nil {
		// A refused upgrade does not say why: ask whether the container
		// is there.
		if _, ierr := d.c.ContainerInspect(ctx, id); cerrdefs.IsNotFound(ierr) {
			return nil, kind(ErrNoContainer, op, ierr)
		}
		return nil, d.fail(op, err)
	}
	end := make(chan error, 1)
	stop := context.AfterFunc(ctx, resp.Close)
	go func() {
		_, err := stdcopy.StdCopy(stdout, stderr, resp.Reader)
		if !stop() {
			err = ctx.Err()
		}
		resp.Close()
		if err != nil {
			err = fmt.Errorf("%s: %w", op, err)
		}
		end <- err
	}()
	return end, nil
}

// Start starts a created container.
func (d *Docker) Start(ctx context.Context, id string) error {
	return d.containerErr("start container "+id, d.c.ContainerStart(ctx, id, container.StartOptions{}))
}

// Wait blocks until the container is not running and returns its exit
// code. A ctx that ends first ends the wait with ctx's error.
func (d *Docker) Wait(ctx context.Context, id string) (int, error) {
	op := "wait for container " + id
	exited, failed := d.c.ContainerWait(ctx, id, container.WaitConditionNotRunning)
	select {
	case r := <-exited:
		if r.Error != nil && r.Error.Message != "" {
			return 0, fmt.Errorf("%s: %s", op, r.Error.Message)
		}
		return int(r.StatusCode), nil
	case err := <-failed:
		if ctx.Err() != nil {
			return 0, fmt.Errorf("%s: %w", op, ctx.Err())
		}
		return 0, d.containerErr(op, err)
	}
}

// Signal sends sig to the container's main process; ErrNotRunning when
// the container does not run.
func (d *Docker) Signal(ctx context.Context, id string, sig syscall.Signal) error {
	name := strings.TrimPrefix(unix.SignalName(sig), "SIG")
	if name == "" {
		name = strconv.Itoa(int(sig))
	}
	op := fmt.Sprintf("signal %s to container %s", name, id)
	err := d.c.ContainerKill(ctx, id, name)
	if cerrdefs.IsConflict(err) {
		return kind(ErrNotRunning, op, err)
	}
	return d.containerErr(op, err)
}

// Inspect returns the container's state; ErrNoContainer when there is no
// such container.
func (d *Docker) Inspect(ctx context.Context, id string) (ContainerState, error) {
	c, err := d.c.ContainerInspect(ctx, id)
	if err != nil {
		return ContainerState{}, d.containerErr("inspect container "+id, err)
	}
	if c.ContainerJSONBase == nil {
		return ContainerState{}, fmt.Errorf("inspect container %s: the engine's answer has no state", id)
	}
	st := ContainerState{ID: c.ID, Name: strings.TrimPrefix(c.Name, "/")}
	if c.Config != nil {
		st.Labels = c.Config.Labels
	}
	if c.State != nil {
		st.Running = c.State.Running
		st.ExitCode = c.State.ExitCode
		st.OOMKilled = c.State.OOMKilled
		// A container never started has the zero time, which parses.
		if st.StartedAt, err = time.Parse(time.RFC3339Nano, c.State.StartedAt); err != nil {
			return ContainerState{}, fmt.Errorf("inspect container %s: started at %q: %w", id, c.State.StartedAt, err)
		}
	}
	return st, nil
}

// oomEventWait is how long KilledForMemory waits for the engine's word of
// a kill for memory that has not come by the exit.
const oomEventWait = 5 * time.Second

// KilledForMemory reports whether the kernel killed a process of the
// ended container id for want of memory. Docker marks State.OOMKilled
// only when it heard of the kill before the exit; its "oom" event it
// sends either way, on a busy machine a moment after the exit. So for an
// exit by SIGKILL (137) without the mark, KilledForMemory waits up to
// oomEventWait for the event.
func (d *Docker) KilledForMemory(ctx context.Context, id string) (bool, error) {
	st, err := d.Inspect(ctx, id)
	if err != nil || st.OOMKilled || st.Running || st.ExitCode != 128+int(syscall.SIGKILL) {
		return st.OOMKilled, err
	}
	return d.heardOOM(ctx, st)
}

// heardOOM reports whether the engine announces a kill for memory in the
// container of st, from its start until oomEventWait from now.
func (d *Docker) heardOOM(ctx context.Context, st ContainerState) (bool, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stamp := func(t time.Time) string { return fmt.Sprintf("%d.%09d", t.Unix(), t.Nanosecond()) }
	msgs, errs := d.c.Events(ctx, events.ListOptions{
		Since:   stamp(st.StartedAt),
		Until:   stamp(time.Now().Add(oomEventWait)),
		Filters: filters.NewArgs(filters.Arg("container", st.ID), filters.Arg("event", string(events.ActionOOM))),
	})
	select {
	case <-msgs:
		return true, nil
	case err := <-errs:
		if err == nil || errors.Is(err, io.EOF) {
			return false, nil // until passed without the event
		}
		return false, d.fail("engine events of container "+st.ID, err)
	}
}

// Remove removes the container and its anonymous volumes, killing it
// first if it still runs; a container that is already gone is not an
// error.
func (d *Docker) Remove(ctx context.Context, id string) error {
	err := d.c.ContainerRemove(ctx, id, container.RemoveOptions{Force: true, RemoveVolumes: true})
	if cerrdefs.IsNotFound(err) {
		return nil
	}
	return d.containerErr("remove container "+id, err)
}

// List returns the containers, running or not, that carry label key with
// value (every value when value is "").
func (d *Docker) List(ctx context.Context, key, value string) ([]ContainerState, error) {
	if key == "" {
		return nil, errors.New("list containers: the label key is empty")
	}
	label := key
	if value != "" {
		label += "=" + value
	}
	list, err := d.c.ContainerList(ctx, container.ListOptions{All: true, Filters: filters.NewArgs(filters.Arg("label", label))})
	if err != nil {
		return nil, d.fail(fmt.Sprintf("list containers labelled %q", label), err)
	}
	states := make([]ContainerState, len(list))
	for i, c := range list {
		states[i] = ContainerState{ID: c.ID, Labels: c.Labels, Running: c.State == container.StateRunning}
		if len(c.Names) > 0 {
			states[i].Name = strings.TrimPrefix(c.Names[0], "/")
		}
	}
	return states, nil
}

// containerErr is fail for an operation on one container: an engine that
// has no such container is ErrNoContainer.
func (d *Docker) containerErr(op string, err error) error {
	switch {
	case err == nil:
		return nil
	case cerrdefs.IsNotFound(err):
		return kind(ErrNoContainer, op, err)
	}
	return d.fail(op, err)
}

// fail says that op failed with err; an engine that did not answer is
// ErrUnreachable.
func (d *Docker) fail(op string, err error) error {
	if unanswered(err) {
		err = unreachableError(d.host, err)
	}
	return fmt.Errorf("%s: %w", op, err)
}

// unanswered reports whether err says the engine did not answer: no
// connection, a connection lost, or no answer within ctx's deadline.
func unanswered(err error) bool {
	return client.IsErrConnectionFailed(err) || errors.Is(err, context.DeadlineExceeded) || errors.As(err, new(*net.OpError))
}

// kindError is an error of a kind (one of the package's sentinels) in
// its own words: errors.Is matches the kind and err's chain; the text is
// err's alone.
type kindError struct{ kind, err error }

func (e *kindError) Error() string   { return e.err.Error() }
func (e *kindError) Unwrap() []error { return []error{e.kind, e.err} }

// kind is err, the engine's answer to op, as an error of kind k.
func kind(k error, op string, err error) error {
	return &kindError{k, fmt.Errorf("%s: %w", op, err)}
}
