package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestMain lets a test run this binary as the workload itself (SIGTERM
// reaches main only in a process of its own).
func TestMain(m *testing.M) {
	if os.Getenv("SKEIN_WORKLOAD_AS_MAIN") == "1" {
		main()
	}
	os.Exit(m.Run())
}

func envOf(kv map[string]string) func(string) string {
	return func(k string) string { return kv[k] }
}

func readEvents(t *testing.T, dir string) []Event {
	t.Helper()
	f, err := os.Open(filepath.Join(dir, EventsFile))
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var events []Event
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var e Event
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			t.Fatalf("event log line %q: %v", sc.Text(), err)
		}
		events = append(events, e)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return events
}

func count(events []Event, kind, alloc string) int {
	n := 0
	for _, e := range events {
		if e.Event == kind && e.Alloc == alloc {
			n++
		}
	}
	return n
}

// waitFor polls cond until it holds or the deadline passes.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// startHolder runs a workload until the test ends and waits for its start event.
func startHolder(t *testing.T, dir string, env map[string]string) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	code := make(chan int, 1)
	go func() { code <- run(ctx, []string{"--dir", dir}, envOf(env), io.Discard) }()
	t.Cleanup(func() {
		cancel()
		if c := <-code; c != exitOK {
			t.Errorf("holder %s exited %d after cancel, want %d", env["SKEIN_ALLOC_ID"], c, exitOK)
		}
	})
	waitFor(t, "the holder's start event", func() bool {
		select {
		case c := <-code:
			t.Fatalf("holder exited %d before the test ended", c)
		default:
		}
		return count(readEvents(t, dir), "start", env["SKEIN_ALLOC_ID"]) == 1
	})
}

func TestWorkload_SecondHolderIsViolation(t *testing.T) {
	first := map[string]string{"CUDA_VISIBLE_DEVICES": "GPU-aaa,GPU-bbb", "SKEIN_JOB_ID": "job1", "SKEIN_ALLOC_ID": "alloc1"}
	cases := []struct {
		name      string
		env       map[string]string
		violation string // substring of the violation; "" for none
	}{
		{"same GPU, other job", map[string]string{"CUDA_VISIBLE_DEVICES": "GPU-ccc, GPU-bbb", "SKEIN_JOB_ID": "job2", "SKEIN_ALLOC_ID": "alloc2"}, "gpu-GPU-bbb.lock: lock already held by host="},
		{"same job, other GPUs", map[string]string{"CUDA_VISIBLE_DEVICES": "GPU-ccc", "SKEIN_JOB_ID": "job1", "SKEIN_ALLOC_ID": "alloc2"}, "job-job1.lock: lock already held"},
		{"other GPUs and job", map[string]string{"CUDA_VISIBLE_DEVICES": "GPU-ccc", "SKEIN_JOB_ID": "job2", "SKEIN_ALLOC_ID": "alloc2"}, ""},
		{"no GPUs, other job", map[string]string{"CUDA_VISIBLE_DEVICES": "", "SKEIN_JOB_ID": "job2", "SKEIN_ALLOC_ID": "alloc2"}, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			startHolder(t, dir, first)
			var stderr strings.Builder
			code := run(context.Background(), []string{"--dir", dir, "--for", "1ms"}, envOf(tc.env), &stderr)
			events := readEvents(t, dir)
			if tc.violation == "" {
				if code != exitOK || count(events, "violation", "alloc2") != 0 || count(events, "stop", "alloc2") != 1 {
					t.Fatalf("exit %d, events %+v, stderr %q: want a clean start and stop", code, events, stderr.String())
				}
				return
			}
			if code != exitViolation {
				t.Fatalf("exit %d, want %d (stderr %q)", code, exitViolation, stderr.String())
			}
			var got []string
			for _, e := range events {
				if e.Event == "violation" {
					got = append(got, e.What)
				}
			}
			if len(got) != 1 || !strings.Contains(got[0], tc.violation) || !strings.Contains(got[0], "alloc=alloc1") {
				t.Fatalf("violations %q, want one containing %q and naming alloc1", got, tc.violation)
			}
			if n := count(events, "start", "alloc2"); n != 0 {
				t.Fatalf("the violating workload recorded %d start events, want 0", n)
			}
		})
	}
}

func TestWorkload_LocksFreedWhenHolderStops(t *testing.T) {
	dir := t.TempDir()
	env := map[string]string{"CUDA_VISIBLE_DEVICES": "GPU-aaa", "SKEIN_JOB_ID": "job1"}
	for i := range 2 {
		if code := run(context.Background(), []string{"--dir", dir, "--for", "1ms"}, envOf(env), io.Discard); code != exitOK {
			t.Fatalf("run %d exited %d, want %d", i, code, exitOK)
		}
	}
	events := readEvents(t, dir)
	if len(events) != 4 || count(events, "violation", "") != 0 {
		t.Fatalf("events %+v, want start, stop, start, stop", events)
	}
	if events[0].Job != "job1" || len(events[0].GPUs) != 1 || events[0].GPUs[0] != "GPU-aaa" || events[0].Host == "" {
		t.Fatalf("start event %+v: want job1 on GPU-aaa with a host name", events[0])
	}
}

func TestWorkload_SIGTERMRecordsStopAndExitsZero(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	cmd := exec.Command(exe, "--dir", dir, "--job", "job9")
	cmd.Env = append(os.Environ(), "SKEIN_WORKLOAD_AS_MAIN=1", "CUDA_VISIBLE_DEVICES=GPU-aaa", "SKEIN_ALLOC_ID=alloc9")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill() })
	waitFor(t, "the start event", func() bool { return count(readEvents(t, dir), "start", "alloc9") == 1 })
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("workload after SIGTERM: %v, want exit 0", err)
	}
	events := readEvents(t, dir)
	if count(events, "stop", "alloc9") != 1 || events[len(events)-1].What != "signalled" || events[0].Job != "job9" {
		t.Fatalf("events %+v, want start then a signalled stop for job9", events)
	}
}

func TestWorkload_BadFlagsAreUsageErrors(t *testing.T) {
	cases := []struct {
		name string
		args []string
	}{
		{"no dir", []string{"--for", "1s"}},
		{"negative duration", []string{"--dir", "x", "--for", "-1s"}},
		{"bad duration", []string{"--dir", "x", "--for", "soon"}},
		{"stray argument", []string{"--dir", "x", "extra"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var stderr strings.Builder
			if code := run(context.Background(), tc.args, envOf(nil), &stderr); code != exitUsage {
				t.Fatalf("exit %d, want %d (stderr %q)", code, exitUsage, stderr.String())
			}
		})
	}
}

func TestWorkload_UnusableDirIsError(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "missing")
	if code := run(context.Background(), []string{"--dir", dir}, envOf(nil), io.Discard); code != exitError {
		t.Fatalf("exit %d, want %d", code, exitError)
	}
}

func TestFileSafe_KeepsNamesInsideDir(t *testing.T) {
	cases := []struct{ name, in, want string }{
		{"gpu uuid", "GPU-5f2c1d3e-0b1a-4c2d-8e9f-0123456789ab", "GPU-5f2c1d3e-0b1a-4c2d-8e9f-0123456789ab"},
		{"mig uuid with slashes", "MIG-GPU-aaa/1/0", "MIG-GPU-aaa_1_0"},
		{"traversal", "../../etc/passwd", ".._.._etc_passwd"},
		{"nul and space", "a\x00b c", "a_b_c"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := fileSafe(tc.in); got != tc.want {
				t.Fatalf("fileSafe(%q) = %q, want %q", tc.in, got, tc.want)
			}
		})
	}
}
