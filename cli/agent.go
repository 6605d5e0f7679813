package cli

import (
	"fmt"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/hashicorp/go-hclog"
	ucli "github.com/urfave/cli/v2"

	"github.com/skein-dev/skein/agent"
	"github.com/skein-dev/skein/agent/runner"
	"github.com/skein-dev/skein/structs"
)

func agentCommand() *ucli.Command {
	return &ucli.Command{
		Name:  "agent",
		Usage: "run a skein node (one per machine)",
		Description: "Runs the agent in the foreground until interrupted. With --dev it is a one-node\n" +
			"cluster on loopback with data in a temporary directory and simulated GPUs when\n" +
			"NVML is absent: the quickest way to try skein.",
		Flags: []ucli.Flag{
			&ucli.StringFlag{Name: configFlag, Usage: "read settings from the YAML `FILE`: keys are these long flags (data-dir: /var/lib/skein, join: [HOST, ...]); the command line and the environment override it"},
			&ucli.BoolFlag{Name: printConfigFlag, Usage: "print the effective settings (command line, environment, --config, defaults) as YAML that --config takes, secrets left out, and exit"},
			&ucli.BoolFlag{Name: "dev", Usage: "one node, loopback only, temporary data, simulated GPUs if NVML is absent"},
			&ucli.StringFlag{Name: "name", Usage: "node name (default: the host name)"},
			&ucli.StringFlag{Name: "data-dir", Usage: "where state, logs and job output live (required outside --dev)", EnvVars: []string{"SKEIN_DATA_DIR"}},
			&ucli.StringFlag{Name: "bind", Usage: "IP address to listen on (default 0.0.0.0; 127.0.0.1 with --dev)"},
			&ucli.StringFlag{Name: "advertise", Usage: "IP address other nodes reach this one at (default: the bind address)"},
			&ucli.IntFlag{Name: "http-port", Value: agent.DefaultHTTPPort, Usage: "HTTP API port"},
			&ucli.IntFlag{Name: "raft-port", Value: agent.DefaultRaftPort, Usage: "Raft port"},
			&ucli.IntFlag{Name: "gossip-port", Value: agent.DefaultGossipPort, Usage: "gossip port (TCP and UDP)"},
			&ucli.StringFlag{Name: "ingress-port", Value: strconv.Itoa(agent.DefaultIngressPort), Usage: "`PORT` of the ingress, which serves the cluster's services (/NAME/... or Host: NAME.DOMAIN) on the bind address, HTTPS in a cluster with TLS; none runs no ingress"},
			&ucli.StringSliceFlag{Name: "join", Usage: "gossip address `HOST[:PORT]` of any member to join (repeatable; retried until one answers)"},
			&ucli.IntFlag{Name: "bootstrap-expect", Usage: "wait for `N` nodes, then form one cluster with them as voters"},
			&ucli.IntFlag{Name: "voters", Value: 3, Usage: "Raft voters to keep (odd); other nodes hold the state as non-voters"},
			&ucli.IntFlag{Name: "standbys", Value: agent.DefaultStandbys, Usage: "non-voting servers to keep besides the voters (`N`); every other node is a worker outside Raft that watches a server for its work. -1: every node is a server"},
			&ucli.StringFlag{Name: "encrypt", Usage: "gossip encryption key from `skein keygen`", EnvVars: []string{"SKEIN_ENCRYPT"}},
			&ucli.DurationFlag{Name: "raft-timeout", Value: agent.DefaultRaftTimeout, Usage: "Raft heartbeat and election timeout: how long a leader whose process is silent on a machine that answers (starved, frozen) is waited for; a crashed or unreachable one is replaced sooner"},
			&ucli.DurationFlag{Name: "stop-after", Value: agent.DefaultStopAfter, Usage: "stop local jobs after this long without the leader"},
			&ucli.DurationFlag{Name: "down-after", Value: agent.DefaultDownAfter, Usage: "run a silent node's jobs elsewhere after this long (must exceed --stop-after)"},
			&ucli.StringFlag{Name: "gpus", Value: "auto", Usage: "GPU inventory: auto, nvml, none or sim:COUNTxMODEL[-MEMGB][:TOPOLOGY] (TOPOLOGY: nvswitch, nvlink-pairs, pcie)"},
			&ucli.DurationFlag{Name: "gpu-clean-period", Value: agent.DefaultGPUCleanPeriod, Usage: "a failed GPU returns to service after this long without a new fault"},
			&ucli.BoolFlag{Name: "allow-foreign-gpu-use", Usage: "place jobs on GPUs that processes skein did not start are using (they are still shown)"},
			&ucli.StringSliceFlag{Name: "label", Usage: "node label `k=v` (repeatable), matched by submit --constraint"},
			&ucli.StringFlag{Name: "mail-prog", Usage: "the program that sends the mail jobs ask for with --mail-type, as Slurm's MailProg: `PROG` -s SUBJECT USER, the body on stdin (the leader's runs; default: no mail)"},
			&ucli.StringSliceFlag{Name: "partition", Usage: "a Slurm partition the node is in (`NAME`, repeatable; default: " + structs.DefaultPartition + ", marked * in sinfo), which sbatch -p and submit --partition name"},
			&ucli.IntFlag{Name: "cpus", Usage: "CPUs to offer to jobs (default: all)"},
			&ucli.StringFlag{Name: "memory", Usage: "memory to offer to jobs, like 512G (default: all)"},
			&ucli.IntFlag{Name: "link-mbps", Usage: "speed of this node's network link in Mb/s (default: read from /sys/class/net); rank 0 of a gang goes to the fastest node"},
			&ucli.StringFlag{Name: "container-socket", Value: agent.DefaultContainerSocket, Usage: "`PATH` or unix://PATH of the container engine's API socket, probed and shown in skein nodes; none probes none"},
			&ucli.StringSliceFlag{Name: "allow-mount", Usage: "host `DIR` under which image jobs may mount directories (--mount SRC:DST); repeat or comma-separate (default: none)"},
			&ucli.StringSliceFlag{Name: "allow-cap", Usage: "Linux capability `NAME` (NET_BIND_SERVICE, with or without CAP_) image jobs may ask their containers to be given (--allow-cap); repeat or comma-separate (default: none: containers have no capability)"},
			&ucli.StringFlag{Name: "shm-size", Usage: "image jobs' /dev/shm when they give no --shm-size, like 64G (default: half the node's memory)"},
			&ucli.BoolFlag{Name: "keep-failed", Usage: "keep the containers of failed image jobs for debugging (default: remove every finished container)"},
			&ucli.StringFlag{Name: "in-container", Usage: "the agent itself runs in container `NAME` on its engine: image jobs' containers live inside it (its network, processes and cgroup), as its own processes do"},
			&ucli.StringFlag{Name: "master-ports", Usage: "`MIN-MAX` ports to give gangs with rank 0 here as MASTER_PORT (default 29500-29999)"},
			&ucli.DurationFlag{Name: "usage-half-life", Value: structs.DefaultUsageHalfLife, Usage: "fair share: how long the GPU time an account used takes to count for half (give every server the same)"},
			&ucli.DurationFlag{Name: "node-gc", Value: agent.DefaultNodeGC, Usage: "forget a node down or left this long, with nothing running on it (the leader's applies; 0: never)"},
			&ucli.BoolFlag{Name: "recover", Usage: "once, on a surviving server of a cluster that lost most of its voters for good: rebuild the cluster from this node's state, alone (see docs/operations.md)"},
			&ucli.DurationFlag{Name: "snapshot-every", Usage: "on a server, write a backup of the state this often (like 1h; as skein snapshot save writes one; default: never)"},
			&ucli.StringFlag{Name: "snapshot-dir", Usage: "where --snapshot-every writes its backups, mode 0600 (default: DATA-DIR/snapshots)"},
			&ucli.IntFlag{Name: "snapshot-keep", Value: agent.DefaultSnapshotKeep, Usage: "how many of --snapshot-every's backups to keep, the newest"},
			&ucli.DurationFlag{Name: "job-retention", Value: agent.DefaultJobRetention, Usage: "keep a finished job, its allocations and their logs this long, then remove them (give every node the same)"},
			&ucli.DurationFlag{Name: "kill-grace", Value: 10 * time.Second, Usage: "time between SIGTERM and SIGKILL when stopping a job"},
			&ucli.IntFlag{Name: "max-conns", Usage: "API connections to hold at once from clients that are not the cluster's nodes, which have a reserve of their own (default: sized from the file-descriptor limit)"},
			&ucli.IntFlag{Name: "ingress-max-conns", Usage: "ingress connections to hold at once from clients, apart from the API's (default: sized from the file-descriptor limit, twice --max-conns)"},
			&ucli.IntFlag{Name: "max-writes", Value: agent.DefaultMaxWrites, Usage: "submitters' writes (jobs, services) the leader carries out at once (`N`); one more is answered 429 with Retry-After, which clients wait out"},
			&ucli.IntFlag{Name: "max-conns-per-client", Usage: "connections to hold at once from one client address, at the API and at the ingress each (default: an eighth of --max-conns, at most 256)"},
			&ucli.StringFlag{Name: "job-user", Value: runner.DefaultJobUser, Usage: "run the jobs of owners without a local account of their name as `USER` (a name or UID[:GID], never root; used only when the agent runs as root)"},
			&ucli.StringFlag{Name: "job-uid-range", Value: runner.DefaultJobUIDs.String(), Usage: "`MIN-MAX` uids that owners without a local account run as, a uid of their own each, so that none reads another's secrets or signals its jobs (none: they all run as --job-user)"},
			&ucli.BoolFlag{Name: "allow-unconfined", Usage: "run jobs unconfined where this node cannot confine them (no cgroups, the agent not root); without it such a node takes no jobs (default with --dev)"},
			&ucli.IntFlag{Name: "job-pids-max", Usage: "most processes and threads one job may hold (`N`; a job may ask for fewer with submit --pids-max; default 16384, or a quarter of the kernel's pid_max if less)"},
			&ucli.StringFlag{Name: "cpu-limit", Value: "quota", Usage: "how a job's --cpus is held: quota (that many CPUs' time, on any CPU) or cpuset (CPUs of its own)"},
			&ucli.StringFlag{Name: "cgroup-parent", Value: agent.DefaultCgroupParent, Usage: "cgroup `PATH` below each hierarchy's root that holds this node's group, and its jobs' groups in that"},
			&ucli.StringFlag{Name: "job-env-allow", Value: strings.Join(runner.DefaultJobEnvAllow, ","), Usage: "variables of the agent's environment that jobs get, `NAME[,NAME...]` (NAME* is a prefix; \"\" for none)"},
			&ucli.StringFlag{Name: "log-max", Value: structs.FormatMiB(agent.DefaultLogMaxMiB), Usage: "most disk one allocation's stdout and stderr keep, at least 1M: each stream keeps its newest output and skein logs says how much went " +
				"(the default keeps the recent tens of MiB of a training run, and a thousand finished allocations fit in 100G)"},
			&ucli.BoolFlag{Name: "insecure", Usage: "allow an API beyond loopback without a token"},
			&ucli.StringFlag{Name: "token-file", Usage: "read the API token from `FILE` (like skein --token-file; env SKEIN_TOKEN_FILE)"},
			&ucli.StringFlag{Name: "join-token-file", Usage: "join a secure cluster with the token in `FILE` from skein join-token create (env SKEIN_JOIN_TOKEN: the token itself)"},
			&ucli.BoolFlag{Name: "tls", Usage: "make the cluster secure (CA, mutual TLS, encrypted gossip) even on loopback"},
			&ucli.BoolFlag{Name: "insecure-cluster", Usage: "run a plaintext cluster beyond loopback: no CA, no TLS, no admission (labs only)"},
			&ucli.DurationFlag{Name: "cert-ttl", Value: agent.DefaultCertTTL, Usage: "how long node certificates are valid; nodes renew theirs when two thirds have passed"},
			&ucli.StringFlag{Name: "log-level", Value: "info", Usage: "trace, debug, info, warn or error"},
		},
		Action: runAgent,
	}
}

func runAgent(c *ucli.Context) error {
	cfg, origins, err := agentConfig(c)
	if err != nil {
		return err
	}
	if err := cfg.Check(); err != nil {
		return origins.withOrigin(c, usagef(c, "%v", err))
	}
	if c.Bool(printConfigFlag) {
		return printAgentConfig(c)
	}
	logger := cfg.Logger
	a, err := agent.New(cfg)
	if err != nil {
		return err
	}
	fmt.Fprintf(c.App.Writer, "skein agent %q serving %s (data in %s)\n", a.Name(), a.HTTPAddr(), a.DataDir())
	if addr := a.IngressAddr(); addr != "" {
		fmt.Fprintf(c.App.Writer, "services at %s/NAME/\n", addr)
	}
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
	defer signal.Stop(sig)
	select {
	case s := <-sig:
		logger.Info("shutting down", "signal", s.String())
	case <-a.Done():
		logger.Info("left the cluster; exiting")
	}
	a.Shutdown()
	return nil
}

// agentConfig maps the agent command's flags, the configuration file
// --config names and the global token flags to an agent configuration;
// it also returns where the file set what it set.
func agentConfig(c *ucli.Context) (agent.Config, configOrigins, error) {
	if c.NArg() > 0 {
		return agent.Config{}, nil, usagef(c, "agent takes no arguments, got %q", c.Args().First())
	}
	origins, err := loadAgentConfigFile(c)
	if err != nil {
		return agent.Config{}, nil, err
	}
	cfg, err := agentFlagsConfig(c, origins)
	return cfg, origins, origins.withOrigin(c, err)
}

// agentFlagsConfig maps the agent command's flags, and the global token
// flags, to an agent configuration.
func agentFlagsConfig(c *ucli.Context, origins configOrigins) (agent.Config, error) {
	partitions := slices.Compact(slices.Sorted(slices.Values(c.StringSlice("partition"))))
	for _, p := range partitions {
		if err := structs.ValidatePartitionName(p); err != nil {
			return agent.Config{}, usagef(c, "--partition: %v", err)
		}
	}
	labels := map[string]string{}
	for _, kv := range c.StringSlice("label") {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return agent.Config{}, usagef(c, "--label %q: want key=value", kv)
		}
		labels[k] = v
	}
	var memMiB structs.SizeMiB
	if err := decodeFlag(c, "memory", &memMiB, structs.ParseSizeMiB); err != nil {
		return agent.Config{}, err
	}
	var logMax structs.SizeMiB
	if err := decodeFlag(c, "log-max", &logMax, structs.ParseSizeMiB); err != nil {
		return agent.Config{}, err
	}
	if c.IsSet("log-max") && logMax < agent.MinLogMaxMiB {
		return agent.Config{}, usagef(c, "--log-max %q: must be at least %s", c.String("log-max"), structs.FormatMiB(agent.MinLogMaxMiB))
	}
	var shmSize structs.SizeMiB
	if err := decodeFlag(c, "shm-size", &shmSize, structs.ParseSizeMiB); err != nil {
		return agent.Config{}, err
	}
	var masterPorts structs.PortRange
	if err := decodeFlag(c, "master-ports", &masterPorts, structs.ParsePortRange); err != nil {
		return agent.Config{}, err
	}
	ingressPort, err := agentIngressPort(c)
	if err != nil {
		return agent.Config{}, err
	}
	allowCaps, err := agentAllowCaps(c)
	if err != nil {
		return agent.Config{}, err
	}
	level := hclog.LevelFromString(c.String("log-level"))
	if level == hclog.NoLevel {
		return agent.Config{}, usagef(c, "--log-level %q: want trace, debug, info, warn or error", c.String("log-level"))
	}
	token, err := apiToken(c)
	if err != nil {
		return agent.Config{}, err
	}
	joinToken, err := agentJoinToken(c)
	if err != nil {
		return agent.Config{}, err
	}
	security, err := agentSecurity(c)
	if err != nil {
		return agent.Config{}, err
	}
	for _, name := range []string{"max-conns", "ingress-max-conns", "max-conns-per-client"} {
		if n := c.Int(name); n < 0 {
			return agent.Config{}, usagef(c, "--%s %d: must be positive (0 or unset: sized from the file-descriptor limit)", name, n)
		}
	}
	if n := c.Int("max-writes"); n < 1 || n > agent.MaxMaxWrites {
		return agent.Config{}, usagef(c, "--max-writes %d: want 1 to %d", n, agent.MaxMaxWrites)
	}
	if c.Duration("cert-ttl") <= 0 {
		return agent.Config{}, usagef(c, "--cert-ttl %s: must be positive", c.Duration("cert-ttl"))
	}
	if n := c.Int("standbys"); n < -1 || n > agent.MaxStandbys {
		return agent.Config{}, usagef(c, "--standbys %d: want -1 (every node a server) or 0 to %d", n, agent.MaxStandbys)
	}
	logger := hclog.New(&hclog.LoggerOptions{Name: "skein", Level: level, Output: c.App.ErrWriter})
	cfg := agent.Config{
		Dev:             c.Bool("dev"),
		Name:            c.String("name"),
		DataDir:         c.String("data-dir"),
		BindAddr:        c.String("bind"),
		AdvertiseAddr:   c.String("advertise"),
		HTTPPort:        c.Int("http-port"),
		RaftPort:        c.Int("raft-port"),
		GossipPort:      c.Int("gossip-port"),
		Join:            c.StringSlice("join"),
		BootstrapExpect: c.Int("bootstrap-expect"),
		Voters:          c.Int("voters"),
		Servers:         servers(c.Int("voters"), c.Int("standbys")),
		EncryptKey:      c.String("encrypt"),
		StopAfter:       c.Duration("stop-after"),
		RaftTimeout:     c.Duration("raft-timeout"),
		DownAfter:       c.Duration("down-after"),
		GPUs:            c.String("gpus"),
		GPUCleanPeriod:  c.Duration("gpu-clean-period"),
		Labels:          labels,
		Partitions:      partitions,
		MailProg:        c.String("mail-prog"),
		CPUs:            c.Int("cpus"),
		MemoryMiB:       int64(memMiB),
		LinkMbps:        c.Int("link-mbps"),
		MasterPorts:     masterPorts,
		ContainerSocket: c.String("container-socket"),
		Token:           token,
		Insecure:        c.Bool("insecure"),
		KillGrace:       c.Duration("kill-grace"),
		Logger:          logger,
	}
	// Set apart so the literal above keeps its alignment.
	cfg.JobRetention = c.Duration("job-retention")
	cfg.UsageHalfLife = c.Duration("usage-half-life")
	cfg.NodeGC = c.Duration("node-gc")
	if cfg.NodeGC == 0 {
		cfg.NodeGC = -1 // --node-gc 0: never
	}
	cfg.Recover = c.Bool("recover")
	cfg.SnapshotEvery = c.Duration("snapshot-every")
	cfg.SnapshotDir = c.String("snapshot-dir")
	cfg.SnapshotKeep = c.Int("snapshot-keep")
	cfg.AllowForeignGPUUse = c.Bool("allow-foreign-gpu-use")
	cfg.Security = security
	cfg.JoinToken = joinToken
	cfg.CertTTL = c.Duration("cert-ttl")
	cfg.MaxConns = c.Int("max-conns")
	cfg.IngressMaxConns = c.Int("ingress-max-conns")
	cfg.MaxConnsPerClient = c.Int("max-conns-per-client")
	cfg.MaxWrites = c.Int("max-writes")
	cfg.JobUser = c.String("job-user")
	cfg.JobEnvAllow = envAllowList(c.String("job-env-allow"))
	if r := c.String("job-uid-range"); r == "none" {
		cfg.ShareJobUser = true
	} else if cfg.JobUIDs, err = runner.ParseUIDRange(r); err != nil {
		return cfg, usagef(c, "--job-uid-range: %v", err)
	}
	cfg.AllowUnconfined = c.Bool("allow-unconfined") || c.Bool("dev")
	cfg.JobPidsMax = int64(c.Int("job-pids-max"))
	cfg.CgroupParent = c.String("cgroup-parent")
	switch c.String("cpu-limit") {
	case "quota":
	case "cpuset":
		cfg.PinCPUs = true
	default:
		return cfg, usagef(c, "--cpu-limit %q: want quota or cpuset", c.String("cpu-limit"))
	}
	warnSecretsInArgs(c, logger, origins)
	cfg.LogMaxMiB = int64(logMax)
	cfg.AllowMounts = slices.DeleteFunc(c.StringSlice("allow-mount"), func(d string) bool { return d == "" })
	cfg.AllowCaps = allowCaps
	cfg.ShmSizeMiB = int64(shmSize)
	cfg.KeepFailed = c.Bool("keep-failed")
	cfg.ContainerHost = c.String("in-container")
	cfg.IngressPort = ingressPort
	return cfg, nil
}

// agentAllowCaps reads --allow-cap: names, repeated or comma-separated
// (no capability's name holds a comma), spelled as the API spells them.
func agentAllowCaps(c *ucli.Context) ([]string, error) {
	var caps []string
	for _, v := range c.StringSlice("allow-cap") {
		for _, name := range strings.Split(v, ",") {
			if name == "" {
				continue
			}
			capName, err := structs.ParseCap(name)
			if err != nil {
				return nil, usagef(c, "--allow-cap: %v", err)
			}
			caps = append(caps, capName)
		}
	}
	return caps, nil
}

// agentIngressPort maps --ingress-port to the agent's: a port, or 0 for
// none.
func agentIngressPort(c *ucli.Context) (int, error) {
	s := c.String("ingress-port")
	if s == "none" {
		return 0, nil
	}
	p, err := strconv.Atoi(s)
	if err != nil || p < 0 || p > 65535 {
		return 0, usagef(c, "--ingress-port %q: want a port from 1 to 65535, or none (0 is none too)", s)
	}
	return p, nil
}

// envAllowList splits --job-env-allow; "" allows nothing.
func envAllowList(s string) []string {
	list := []string{}
	for _, name := range strings.Split(s, ",") {
		if name = strings.TrimSpace(name); name != "" {
			list = append(list, name)
		}
	}
	return list
}

// warnSecretsInArgs warns of secrets given on the agent's command line:
// every local user, every job included, can read it in /proc/PID/cmdline.
// The environment and files (origins: those --config set) are not
// readable there.
func warnSecretsInArgs(c *ucli.Context, logger hclog.Logger, origins configOrigins) {
	for _, s := range []struct{ flag, env, instead string }{
		{flag: "token", env: "SKEIN_TOKEN", instead: "--token-file or SKEIN_TOKEN"},
		{flag: "encrypt", env: "SKEIN_ENCRYPT", instead: "SKEIN_ENCRYPT"},
	} {
		if v, set := lineageString(c, s.flag); set && os.Getenv(s.env) != v && origins[s.flag] == "" {
			logger.Warn("a secret on the command line is readable by every local user and job",
				"flag", "--"+s.flag, "use", s.instead)
		}
	}
}

// joinTokenEnv holds a join token itself, for agents started by a service
// manager that keeps secrets in the environment.
const joinTokenEnv = "SKEIN_JOIN_TOKEN"

// agentJoinToken returns the join token from --join-token-file or
// SKEIN_JOIN_TOKEN; both is a usage error, neither is "".
func agentJoinToken(c *ucli.Context) (string, error) {
	env := strings.TrimSpace(os.Getenv(joinTokenEnv))
	if !c.IsSet("join-token-file") {
		return env, nil
	}
	if env != "" {
		return "", usagef(c, "--join-token-file and %s are both set: use one", joinTokenEnv)
	}
	return readSecretFile("--join-token-file", c.String("join-token-file"))
}

// agentSecurity maps --tls and --insecure-cluster to a security mode.
func agentSecurity(c *ucli.Context) (agent.Security, error) {
	switch tls, insecure := c.Bool("tls"), c.Bool("insecure-cluster"); {
	case tls && insecure:
		return "", usagef(c, "--tls and --insecure-cluster contradict each other: give one")
	case tls:
		return agent.SecurityTLS, nil
	case insecure:
		return agent.SecurityInsecure, nil
	}
	return agent.SecurityAuto, nil
}

// servers is the agent's Servers for --voters and --standbys: 0 (every
// node a server) for --standbys -1.
func servers(voters, standbys int) int {
	if standbys == -1 {
		return 0
	}
	return voters + standbys
}
