package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// freePort is a port nothing listens on at the moment.
func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(b)
}

// startReplica runs a serving workload until cancel and returns its base
// URL. The port is picked free and then bound by the workload, so another
// process may take it in between: then it tries another.
func startReplica(t *testing.T, dir string, args []string, env map[string]string) (string, context.CancelFunc, <-chan int) {
	t.Helper()
	for range 5 {
		port := freePort(t)
		env["PORT"] = strconv.Itoa(port)
		ctx, cancel := context.WithCancel(context.Background())
		code := make(chan int, 1)
		go func() {
			code <- run(ctx, append([]string{"--dir", dir, "--serve-port-env", "PORT"}, args...), envOf(env), io.Discard)
		}()
		base := fmt.Sprintf("http://127.0.0.1:%d", port)
		up := false
		waitFor(t, "the replica to answer or exit", func() bool {
			select {
			case c := <-code:
				if c != exitError {
					t.Fatalf("replica exited %d before it served", c)
				}
				return true // the port was taken meanwhile
			default:
			}
			resp, err := http.Get(base + "/health")
			if err == nil {
				resp.Body.Close()
				up = true
			}
			return up
		})
		if up {
			return base, cancel, code
		}
		cancel()
	}
	t.Fatal("no free port in 5 tries")
	return "", nil, nil
}

func TestWorkload_ServesAsAReplica(t *testing.T) {
	dir := t.TempDir()
	sick := filepath.Join(dir, "sick")
	env := map[string]string{"SKEIN_ALLOC_ID": "a1", "SKEIN_JOB_ID": "j1"}
	base, cancel, code := startReplica(t, dir, []string{"--unhealthy-if", sick}, env)
	if st, body := get(t, base+"/health"); st != http.StatusOK || body != "ok\n" {
		t.Errorf("/health = %d %q, want 200 ok", st, body)
	}
	if err := os.WriteFile(sick, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if st, _ := get(t, base+"/health"); st != http.StatusServiceUnavailable {
		t.Errorf("/health with %s present = %d, want 503", sick, st)
	}
	if st, body := get(t, base+"/v1/completions?ms=10"); st != http.StatusOK || body != "alloc=a1 path=/v1/completions\n" {
		t.Errorf("/v1/completions = %d %q, want the alloc and the path as received", st, body)
	}
	if _, body := get(t, base+"/metrics"); !strings.Contains(body, "skein_workload_in_flight 0\n") {
		t.Errorf("/metrics = %q, want the in-flight gauge at 0", body)
	}

	// /stream flushes each line as it goes: the first arrives long before the last is written.
	resp, err := http.Get(base + "/stream?n=20")
	if err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(resp.Body).ReadString('\n')
	resp.Body.Close()
	if err != nil || line != "chunk 0 alloc=a1\n" {
		t.Errorf("first streamed line %q, %v", line, err)
	}

	cancel()
	if c := <-code; c != exitOK {
		t.Fatalf("exit %d after SIGTERM, want %d", c, exitOK)
	}
	if _, err := http.Get(base + "/health"); err == nil {
		t.Error("still serving after the workload stopped")
	}
}

func TestWorkload_ServeNeedsAPort(t *testing.T) {
	dir := t.TempDir()
	if c := run(context.Background(), []string{"--dir", dir, "--serve-port-env", "PORT"}, envOf(nil), io.Discard); c != exitUsage {
		t.Errorf("exit %d without $PORT, want %d", c, exitUsage)
	}
}

func TestWorkload_ReportsSimulatedGPUUtilisationPerRequest(t *testing.T) {
	dir := t.TempDir()
	util := filepath.Join(dir, "sim-gpu-util")
	env := map[string]string{"SKEIN_ALLOC_ID": "a1", "SKEIN_JOB_ID": "j1", simUtilEnv: util}
	base, cancel, code := startReplica(t, dir, []string{"--sim-gpu-util-per-request", "40"}, env)
	reads := func(want string) {
		t.Helper()
		waitFor(t, "utilisation "+want, func() bool {
			b, err := os.ReadFile(util)
			return err == nil && string(b) == want+"\n"
		})
	}
	reads("0")
	// Three slow requests: 120 %, reported as 100.
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan struct{}, 3)
	for range 3 {
		go func() {
			defer func() { done <- struct{}{} }()
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, base+"/work?ms=60000", nil)
			if resp, err := http.DefaultClient.Do(req); err == nil {
				resp.Body.Close()
			}
		}()
	}
	reads("100")
	stop()
	for range 3 {
		<-done
	}
	reads("0")
	if st, _ := get(t, base+"/work?ms=1"); st != http.StatusOK {
		t.Errorf("/work = %d", st)
	}
	reads("0")
	cancel()
	if c := <-code; c != exitOK {
		t.Fatalf("exit %d, want %d", c, exitOK)
	}
}

func TestWorkload_SimGPUUtilNeedsServingAndAPercent(t *testing.T) {
	dir := t.TempDir()
	env := envOf(map[string]string{"PORT": "1", simUtilEnv: filepath.Join(dir, "u")})
	for _, args := range [][]string{
		{"--sim-gpu-util-per-request", "25"},
		{"--serve-port-env", "PORT", "--sim-gpu-util-per-request", "101"},
		{"--serve-port-env", "PORT", "--sim-gpu-util-per-request", "-1"},
	} {
		if c := run(context.Background(), append([]string{"--dir", dir}, args...), env, io.Discard); c != exitUsage {
			t.Errorf("%v: exit %d, want %d", args, c, exitUsage)
		}
	}
}
