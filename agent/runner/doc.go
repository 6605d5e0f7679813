// Package runner is a skein node's local job runner: it starts one job for
// each allocation the node owns, captures its output, stops it on request,
// enforces its time limit and reports every state change.
//
// Every allocation runs under a small supervisor process: the skein binary
// re-executed with a hidden subcommand (see Supervise), in its own session so
// that it outlives the agent. The supervisor starts the job, waits for it,
// stops it (SIGTERM, then SIGKILL after the kill grace) and writes the outcome
// atomically to status.json in the allocation's directory. That directory is
// the only record: the agent can die and come back, and Restore re-adopts
// live supervisors from it.
//
// The time limit is the supervisor's too, counted from the job's start: the
// spec's signal goes to the job that long before the limit, and at the limit
// the job is stopped and recorded as timed_out. An agent restart or a new
// leader therefore neither resets nor loses it.
//
// How a job runs is its driver's business (driver.go). The runner names the
// driver in spec.json; the supervisor asks that driver to start the job and
// then reaches the job only through the handle it got back: signal it, wait
// for its end, and record in job.pid what finds it again. Everything else
// (time limit, lease, stop requests and their grace, the outcome) is the
// supervisor's, the same for every driver. When a supervisor dies, the
// runner asks the spec's driver to kill whatever the job left. The process
// driver (driver_process.go) runs the job as a process in its own process
// group: signals go to the whole group, and the group is killed when its
// leader exits. A spec that names no driver was written before specs named
// one, and runs a process.
//
// A task whose job names an image runs in a container on the node's engine
// (Config.ContainerSocket), through the container driver
// (driver_container.go); it and CleanContainers (containers.go) reach the
// engine only through agent/engine. The runner resolves everything into
// spec.json's container section: the image and pull policy, the mounts
// (checked as below; the scheduler filters by the allowed directories
// already), the capabilities (each must be one of Config.AllowCaps; the
// scheduler filters by them too), the shm size, the GPUs and how they are
// handed over, the container the runner itself runs in if any
// (Config.ContainerHost), and the account by number (containers.go). The
// supervisor pulls the image as the policy says, recording the pull's
// progress in pull.json, which the runner reports while the allocation is
// pending; a stop or an expired lease cancels a pull in flight. It then
// creates the container skein-<allocID>, labelled with its allocation and
// the runner's allocation directory, attaches its output to the logs and
// starts it. Signals go to the container's main process, and the engine's
// exit code 128+N is a death by signal N when the supervisor sent N. Once
// the container has ended and its output is in, it is removed, unless it
// failed by itself and Config.KeepFailed keeps it. An orphan is removed by
// the ID job.pid records, or by name when its supervisor died before it
// wrote job.pid; CleanContainers removes whatever else of this runner's is
// left on the engine for an allocation no supervisor looks after.
//
// A container has no privileges. It runs as the job's account by number,
// never as the image's user: as root only when the account is root and an
// admin allowed it (Job.AllowRoot), and a spec without an account is not
// run. Every capability is dropped but those the job names, and it runs
// with no-new-privileges, so a setuid-root binary or a file capability in
// the image gives nothing: the job keeps its uid and cannot become root,
// and a file of another account behind a mount stays that account's. The
// engine (Docker, up to today's releases) gives an account other than root
// an added capability only in its bounding set, where it cannot use it
// (the engine makes no capability ambient); a job running as root has it
// in effect. The container is held by its cgroup to spec.json's limits:
// memory, with swap (the limit on both is the same, so it never swaps),
// a quota of its CPUs or, when the node pins jobs, its CPU set, and its
// processes. It is handed no device but its own GPUs, through the
// engine's device request or CDI, none for simulated GPUs, and
// NVIDIA_VISIBLE_DEVICES names them (void for none), so that an NVIDIA
// runtime set as the engine's default hands it no other GPU whatever the
// image asks. A container the kernel killed for memory (the engine says
// so in the container's state or, when it heard of the kill only after
// the exit, in its "oom" event) ends failed, "out of memory: used X of
// its Y limit" (oom.go); the engine knows no peak, so X is the limit the
// kernel killed at. One killed in its first moments, before the engine
// watched it, ends "exited with code 137": nothing tells the two apart.
//
// A mount is mounted as it was checked (container_mounts.go). Its source
// must lie under one of Config.AllowMounts, by path component; the allowed
// directory's own links are resolved (the node's choice, which only root
// may change: an allowed directory and those above it must be root's),
// and below it the source is reached without a symbolic link anywhere,
// even one leading back inside: the source is opened from / one component
// at a time, each beneath the last (openat2 RESOLVE_BENEATH and
// RESOLVE_NO_SYMLINKS; openat O_NOFOLLOW on kernels without it), and must
// be a directory or a plain file. The runner does so when it writes the
// spec, so that a bad mount fails the start at once; the supervisor does
// so again before it creates the container, so that a swap since is
// refused, and holds what it opened (O_PATH descriptors). It binds each
// (through /proc/self/fd, in its own mount namespace) at
// <AllocDir>/.mounts/<allocID>/<n>, which only root reaches, and hands the
// engine that path: a swap of the source after the open changes nothing,
// since the bind is of the file opened and no user can touch the path.
// It first checks that the engine sees the bind: the kernel names the
// process listening on the engine's socket (SO_PEERCRED), and that
// process's root (/proc/<pid>/root) must lead to the same device and
// inode there. This holds where the engine's process is in the
// supervisor's PID namespace and its mount namespace is the supervisor's
// or receives its mounts, and the supervisor is root, as with an agent on
// the host and its engine. The engine cannot be handed /proc/<pid>/fd/<n>
// itself: the runtime mounts from the container's new mount namespace,
// where the kernel refuses to bind a mount of another (EINVAL). Where the
// check fails (an agent in a container with the host's engine, another
// PID namespace, a runner that is not root), the engine gets the source's
// path, which it looks up again when the container starts; that is safe
// only when nobody but root can replace anything on it, so a source is
// refused, saying where, when a directory on its way from / is not root's,
// others may write it (unless it is sticky and the next step root's) or
// it has an access control list. The binds are undone and the
// descriptors closed once the engine has started the container (or
// failed to), which keeps its own mounts; a supervisor that died with
// binds in place leaves them to the runner, whose orphan cleanup undoes
// them before it records the allocation lost. Nothing in .mounts is ever
// removed but an empty mount point, and no allocation's name is .mounts,
// so removing an allocation's directory never reaches into a bind.
//
// Exec runs a command beside a running job, as the job would run it (a
// service replica's exec health check): through the driver spec.json
// names, as a process of the job's account with its environment and
// working directory, or in the job's container through the engine's exec.
// ExecPTY runs a command beside a running job under a terminal: a
// process job's under a pseudo-terminal of the node's, in a session of
// its own; a container job's in its container under the engine's
// terminal (engine.TTYExec), whose process group the runner signals
// from the host.
// Signal sends a running job a signal without stopping it (scancel
// --signal), from the runner, past the supervisor: to the job's control
// group or its process group (once its leader is seen to be the one
// job.pid recorded), or to its container's main process through the
// engine; the job's end, if the signal ends it, is the supervisor's to
// see and report as any other.
//
// A process job is confined (confine.go): the runner resolves what its
// allocation may use into spec.json's limits (its CPUs as a quota or as
// CPUs of its own, which the runner picks apart from its other jobs'; its
// memory; its process limit, the node's or the job's own below it; the
// device minors of the node's GPUs that are not its own) and names the
// cgroup hierarchy its group goes in (agent/cgroup). The supervisor makes
// the group, named after the allocation, before it starts the job, starts
// the job in it, sends the job's signals to every process in it, kills
// whatever is left in it when the job's leader has exited, records what
// the group counted (peak memory, CPU time, throttling, OOM kills) in
// status.json, which says "out of memory" for a job the kernel killed for
// its limit, and removes it. A runner that kills what a dead supervisor
// left kills the group too. A node that cannot confine (no cgroups, not
// root) starts no job unless Config.AllowUnconfined lets it run them
// unconfined. A job in a container is confined by its engine instead.
//
// A job runs as its owner (structs.Job.Owner): the local account of that
// name when the node has one, as Slurm maps users, else the job user
// (Config.JobUser, --job-user, default nobody). An owner whose account is
// uid 0 runs as root only when an admin allowed it (Job.AllowRoot); else
// the allocation fails to start. The runner resolves the account once,
// when it writes spec.json, and records it there; the supervisor, which
// stays root, starts the job with that uid, primary group and
// supplementary groups (account.go). A runner that is not root cannot
// switch users and runs every job as itself, and says so at start.
//
// A job's environment is never the agent's: it starts from a fixed PATH
// and its account's HOME, USER, LOGNAME and SHELL, takes from the agent's
// environment only what Config.JobEnvAllow names (by default the locale
// and time zone), then its own --env and skein's variables (env.go). The
// agent's secrets never reach it. A container job gets the same but the
// host's PATH, HOME and SHELL: the image's stay, and so does the image's
// working directory unless the job names one (no work/ is made for it).
//
// The job's stdout and stderr are pipes that the supervisor copies into
// the allocation's logs (logs.go), so that their size is the supervisor's
// to bound: each stream keeps half of the allocation's log cap (spec.json,
// the agent's --log-max), its newest output, in two files. When <stream>.log
// reaches a quarter of the cap it becomes <stream>.log.1, the older .1 goes,
// and <stream>.log.meta counts what went. A reader (OpenLog) reads the .1,
// then the current file, following it across rotations if asked; one for
// the end of a stream (OpenLogTail) seeks there, finding the last lines by
// reading back from the end in blocks, so its cost is that of the end, not
// of the log. Files are made and renamed through
// the directory's descriptor and never through a link. The copy keeps the
// order of each stream, reads ahead of a slow disk into a bounded buffer and
// discards output, counted, rather than hold the job up when the disk takes
// nothing for a while; once the job is over it drains the pipes, for at most
// a moment when something the job left outside its process group still
// holds them, and only then is the outcome recorded. A job whose
// supervisor died has nobody reading its pipes: its next write fails
// (SIGPIPE), if the runner has not killed it first. A container's output
// reaches the pipes through the engine's attach stream, which the
// supervisor waits for, a moment at most, once the container has ended.
//
// A supervisor is alive exactly while it holds an exclusive flock on
// supervisor.lock. The runner takes that lock before it forks and the
// supervisor inherits it, so there is no moment at which a supervisor exists
// without holding it, and because status.json is written before the lock is
// released, "lock free and no status.json" reliably means the supervisor died
// without a result. Signals go to the pid in supervisor.pid only when its
// start time in /proc still matches, so a reused pid is never signalled.
//
// Layout of <AllocDir>/<allocID>/. AllocDir and each allocation's own
// directory are root's and 0711: a job passes through them to its work/,
// and no one else may list them. Every control file is root's and 0600,
// so that no other user reads a spec (it holds its job's secret env) and
// no job rewrites what the root runner trusts (a rewritten job.pid would
// have it kill any process). The logs are root's too: the job's output
// reaches them only through the supervisor's pipes, so the log cap holds
// whatever the job does, and its owner reads them through the API. Only
// work/ and sim-gpu-util belong to the job's account:
//
//	spec.json        what to run (driver, account, argv, final env, workdir, time
//	                 limit and signal, kill grace, a container's section, the
//	                 limits and the cgroup hierarchy), and the Raft index that
//	                 created the allocation
//	supervisor.lock  held by the live supervisor
//	supervisor.pid   supervisor pid and start time
//	supervisor.log   the supervisor's own diagnostics
//	job.pid          once started: the job's start time and how its driver finds it
//	                 (a process: pid, process group and /proc start time; a
//	                 container: its ID and name)
//	pull.json        while a container's image is pulled: how far it got
//	                 (rewritten at most once a second, and at the end)
//	stdout.log       the job's standard output, the newest part (at most a quarter
//	                 of the log cap; root's, 0600)
//	stdout.log.1     the part before it, once the log was rotated (as much again)
//	stdout.log.meta  once output was dropped: how many bytes, and the cap
//	stderr.log       the job's standard error, and stderr.log.1 and .meta likewise
//	stop.json        why a stop was requested, written before signalling
//	status.json      the outcome, written once when the job is over
//	sim-gpu-util     a process job's on simulated GPUs: the utilisation it
//	                 writes for the node's telemetry (SimGPUUtilEnv; the job's
//	                 account, 0600)
//	work/            a process job's working directory when its spec names none
//	                 (the job's account, 0700)
//
// Beside them, AllocDir/.mounts (root's, 0700) holds each starting
// container's bound mount sources for a moment (see above).
//
// The agent keeps AllocDir in its data dir, which is 0711 for that reason;
// everything else there is root's alone. A directory made before jobs ran
// as their owners (0700, all root's) is still adopted and swept.
//
// The directory stays after the job is over, with its logs, until the
// state no longer holds the allocation (its job's retention passed); then
// Sweep removes it.
package runner
