package chaos

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/skein-dev/skein/structs"
)

const busybox = "/bin/busybox"

// demo is one cluster started by demo.sh under its own names.
type demo struct {
	t      *testing.T
	name   string
	env    []string
	shared string
	token  string // the cluster's API token, until demo.sh bootstraps ACLs
	// user is the submitter token demo.sh made for the user "demo": every
	// test job is that user's, and runs as demo's uid of the nodes'
	// --job-uid-range (demo has no account in the containers).
	user   string
	subnet string   // first three octets of the network's /24
	nodes  []string // a, b, c, ...
}

// jobDetail and status are the parts of `skein job --json` and
// `skein status --json` the test reads.
type jobDetail struct {
	Job         structs.Job          `json:"job"`
	Allocations []structs.Allocation `json:"allocations"`
	Nodes       map[string]string    `json:"nodes"`
}

type status struct {
	Leader     string `json:"leader"`
	NodesReady int    `json:"nodes_ready"`
}

type event struct {
	Event string `json:"event"`
	Host  string `json:"host"`
	Alloc string `json:"alloc"`
	Job   string `json:"job"`
	What  string `json:"what"`
}

// TestDemo_LeaderContainerKilled_JobsRecoverWithoutDoubleUse starts the
// 3-node demo and runs three 8-GPU workload jobs, one per node, so the
// leader surely runs one. It kills the leader's container, waits for a new
// leader and for the lost job to be queued (no other node has room), starts
// the container again and waits for every job to run. Then it checks that
// no GPU or job lock was ever held twice, that only the lost job was placed
// again, once, and that every job stops cleanly on cancel.
func TestDemo_LeaderContainerKilled_JobsRecoverWithoutDoubleUse(t *testing.T) {
	if testing.Short() {
		t.Skip("starts containers; skipped with -short")
	}
	requireDocker(t)
	d := startDemo(t, buildImage(t), 3)

	var jobs []string
	for range 3 {
		out := d.skein("a", "submit", "--gpus", "8", "--restarts", "2", "--workdir", "/tmp",
			"--", "skein-workload", "--dir", "/shared", "--for", "10m")
		jobs = append(jobs, strings.TrimSpace(out))
	}
	d.waitJobsRunning(jobs, "a", "")

	var st status
	d.skeinJSON("a", &st, "status")
	leader := st.Leader
	node, ok := strings.CutPrefix(leader, d.name+"-")
	if !ok {
		t.Fatalf("leader %q is not a node of this demo", leader)
	}
	d.docker("kill", leader)
	other := map[string]string{"a": "b", "b": "c", "c": "a"}[node]

	waitFor(t, "a new leader", 15*time.Second, func() error {
		var st status
		if err := d.tryJSON(other, &st, "status"); err != nil {
			return err
		}
		if st.Leader == "" || st.Leader == leader {
			return fmt.Errorf("leader is %q", st.Leader)
		}
		return nil
	})
	waitFor(t, "the killed leader's job to be queued", 30*time.Second, func() error {
		queued := 0
		for _, id := range jobs {
			var jd jobDetail
			if err := d.tryJSON(other, &jd, "job", id); err != nil {
				return err
			}
			if jd.Job.State == structs.JobQueued {
				queued++
			}
		}
		if queued != 1 {
			return fmt.Errorf("%d jobs queued, want 1", queued)
		}
		return nil
	})
	d.docker("start", leader)
	d.waitJobsRunning(jobs, other, "")

	for _, id := range jobs {
		d.skein(other, "cancel", id)
	}
	waitFor(t, "every job cancelled", 30*time.Second, func() error {
		for _, id := range jobs {
			var jd jobDetail
			if err := d.tryJSON(other, &jd, "job", id); err != nil {
				return err
			}
			if jd.Job.State != structs.JobCancelled {
				return fmt.Errorf("job %s is %s", id, jd.Job.State)
			}
		}
		return nil
	})

	events := d.events()
	starts, stops := map[string]bool{}, map[string]bool{}
	for _, e := range events {
		switch e.Event {
		case "violation":
			t.Errorf("violation on %s (alloc %s, job %s): %s", e.Host, e.Alloc, e.Job, e.What)
		case "start":
			starts[e.Alloc] = true
		case "stop":
			stops[e.Alloc] = true
		}
	}
	placedAgain := 0
	for _, id := range jobs {
		var jd jobDetail
		d.skeinJSON(other, &jd, "job", id)
		if jd.Job.Attempts > 1 {
			placedAgain++
		}
		for _, a := range jd.Allocations {
			lost := a.State == structs.AllocLost
			switch {
			case !starts[a.ID]:
				t.Errorf("job %s alloc %s on %s: no start event", id, a.ID, jd.Nodes[a.NodeID])
			case lost && stops[a.ID]:
				t.Errorf("job %s alloc %s on %s: lost with its container, yet it recorded a stop", id, a.ID, jd.Nodes[a.NodeID])
			case !lost && !stops[a.ID]:
				t.Errorf("job %s alloc %s on %s is %s, but recorded no stop", id, a.ID, jd.Nodes[a.NodeID], a.State)
			}
		}
		if jd.Job.Attempts > 2 {
			t.Errorf("job %s was placed %d times, want at most 2", id, jd.Job.Attempts)
			for _, a := range jd.Allocations {
				t.Logf("  alloc %s attempt %d on %s: %s (%s)", a.ID, a.Attempt, jd.Nodes[a.NodeID], a.State, a.Reason)
			}
		}
	}
	if placedAgain != 1 {
		t.Errorf("%d jobs were placed again, want 1 (the killed leader's)", placedAgain)
	}
	t.Logf("%d events, leader %s killed", len(events), leader)
}

// requireDocker skips the test unless a Docker engine answers and
// busybox-static is there to build the image from.
func requireDocker(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, "docker", "version", "--format", "{{.Server.Version}}").CombinedOutput()
	if err != nil {
		t.Skipf("no Docker engine answers: docker version: %v: %s", err, bytes.TrimSpace(out))
	}
	if _, err := os.Stat(busybox); err != nil {
		t.Skipf("%s is needed for the image (apt-get install busybox-static): %v", busybox, err)
	}
}

// buildImage builds the image from chaos/Dockerfile under a tag of its own
// and removes it when the test ends.
func buildImage(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	ctxDir := t.TempDir()
	for _, b := range []struct{ out, pkg string }{{"skein", "."}, {"skein-workload", "./chaos/workload"}} {
		cmd := exec.Command("go", "build", "-tags", "hashicorpmetrics", "-o", filepath.Join(ctxDir, b.out), b.pkg)
		cmd.Dir = root
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("go build %s: %v\n%s", b.pkg, err, out)
		}
	}
	bb, err := os.ReadFile(busybox)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(ctxDir, "busybox"), bb, 0o755); err != nil {
		t.Fatal(err)
	}
	tag := "skein-chaos-test:" + randomHex(t, 4)
	t.Cleanup(func() { _, _ = exec.Command("docker", "rmi", "-f", tag).CombinedOutput() })
	if out, err := exec.Command("docker", "build", "-q", "-t", tag, "-f", filepath.Join(root, "chaos", "Dockerfile"), ctxDir).CombinedOutput(); err != nil {
		t.Fatalf("docker build: %v\n%s", err, out)
	}
	return tag
}

// startDemo runs demo.sh up for nodes nodes (3 to 5) with names, subnet
// and token of its own, no published ports, and a shared directory in
// t.TempDir; demo.sh down runs when the test ends.
func startDemo(t *testing.T, image string, nodes int) *demo {
	t.Helper()
	d := &demo{t: t, name: "skeintest" + randomHex(t, 3), shared: filepath.Join(t.TempDir(), "shared"), token: randomHex(t, 16)}
	for i := range nodes {
		d.nodes = append(d.nodes, string(rune('a'+i)))
	}
	base := []string{
		"SKEIN_DEMO_NAME=" + d.name,
		"SKEIN_DEMO_IMAGE=" + image,
		"SKEIN_DEMO_PORT=",
		"SKEIN_DEMO_TOKEN=" + d.token,
		"SKEIN_DEMO_SHARED=" + d.shared,
		fmt.Sprintf("SKEIN_DEMO_NODES=%d", nodes),
		"SKEIN_DEMO_ENGINE=1",
	}
	t.Cleanup(func() {
		if t.Failed() {
			for _, n := range d.nodes {
				out, _ := exec.Command("docker", "logs", "--tail", "30", d.name+"-"+n).CombinedOutput()
				t.Logf("docker logs %s-%s:\n%s", d.name, n, out)
			}
		}
		if out, err := d.script("down"); err != nil {
			t.Errorf("demo.sh down: %v\n%s", err, out)
		}
	})
	// A subnet may clash with a network already on the host: try others.
	for try := 0; ; try++ {
		var octet [1]byte
		if _, err := rand.Read(octet[:]); err != nil {
			t.Fatal(err)
		}
		d.subnet = fmt.Sprintf("172.30.%d", octet[0])
		d.env = append(base, "SKEIN_DEMO_SUBNET="+d.subnet)
		out, err := d.script("up")
		if err == nil {
			t.Logf("demo.sh up:\n%s", out)
			tok, err := os.ReadFile(filepath.Join(d.shared, "user.token"))
			if err != nil {
				t.Fatalf("demo.sh up made no user token: %v", err)
			}
			d.user = strings.TrimSpace(string(tok))
			return d
		}
		if !strings.Contains(out, "overlap") || try == 4 {
			t.Fatalf("demo.sh up: %v\n%s", err, out)
		}
	}
}

func (d *demo) script(arg string) (string, error) {
	cmd := exec.Command("./demo.sh", arg)
	cmd.Env = append(os.Environ(), d.env...)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

func (d *demo) docker(args ...string) string {
	d.t.Helper()
	out, err := exec.Command("docker", args...).CombinedOutput()
	if err != nil {
		d.t.Fatalf("docker %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// try runs the skein CLI inside node's container, with the user token
// (read from the shared directory there, so it is on no command line).
func (d *demo) try(node string, args ...string) (string, error) {
	var stdout, stderr bytes.Buffer
	sh := []string{"exec", d.name + "-" + node, "sh", "-c", `SKEIN_TOKEN=$(cat /shared/user.token) exec skein "$@"`, "sh"}
	cmd := exec.Command("docker", append(sh, args...)...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("skein %s on %s: %w: %s", strings.Join(args, " "), node, err, bytes.TrimSpace(stderr.Bytes()))
	}
	return stdout.String(), nil
}

func (d *demo) skein(node string, args ...string) string {
	d.t.Helper()
	out, err := d.try(node, args...)
	if err != nil {
		d.t.Fatal(err)
	}
	return out
}

func (d *demo) tryJSON(node string, v any, args ...string) error {
	out, err := d.try(node, append(args, "--json")...)
	if err != nil {
		return err
	}
	if err := json.Unmarshal([]byte(out), v); err != nil {
		return fmt.Errorf("skein %s --json: %w", strings.Join(args, " "), err)
	}
	return nil
}

func (d *demo) skeinJSON(node string, v any, args ...string) {
	d.t.Helper()
	if err := d.tryJSON(node, v, args...); err != nil {
		d.t.Fatal(err)
	}
}

// waitJobsRunning waits, asking node, until every job is running with one
// live allocation, none of them on the node named dead.
func (d *demo) waitJobsRunning(jobs []string, node, dead string) {
	d.t.Helper()
	// A minute, for a busy machine: jobs usually run again within
	// seconds of their node's return.
	waitFor(d.t, "every job running", time.Minute, func() error {
		for _, id := range jobs {
			var jd jobDetail
			if err := d.tryJSON(node, &jd, "job", id); err != nil {
				return err
			}
			if jd.Job.State != structs.JobRunning {
				return fmt.Errorf("job %s is %s: %s", id, jd.Job.State, jd.Job.Reason)
			}
			live := 0
			for _, a := range jd.Allocations {
				if a.State == structs.AllocRunning && jd.Nodes[a.NodeID] != dead {
					live++
				}
			}
			if live != 1 {
				return fmt.Errorf("job %s has %d running allocations off %q, want 1", id, live, dead)
			}
		}
		return nil
	})
}

func (d *demo) events() []event {
	d.t.Helper()
	f, err := os.Open(filepath.Join(d.shared, "events.log"))
	if err != nil {
		d.t.Fatal(err)
	}
	defer f.Close()
	var events []event
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var e event
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			d.t.Fatalf("events.log line %q: %v", sc.Text(), err)
		}
		events = append(events, e)
	}
	if err := sc.Err(); err != nil {
		d.t.Fatal(err)
	}
	return events
}

// waitFor polls cond until it returns nil, failing with its last error
// after timeout.
func waitFor(t *testing.T, what string, timeout time.Duration, cond func() error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		err := cond()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s: %v", timeout, what, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func randomHex(t *testing.T, n int) string {
	t.Helper()
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}
