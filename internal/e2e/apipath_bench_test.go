package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/skein-dev/skein/api"
	"github.com/skein-dev/skein/internal/testutil"
	"github.com/skein-dev/skein/structs"
)

// BenchmarkSubmitToStartAPIPath measures B8 as a user meets it: from the
// moment a client begins a submission to the moment the job's first
// instruction runs, as the job itself tells (it writes the wall clock in
// nanoseconds to a file, `date +%s%N`), on a real one-node agent
// process with ACLs. Sequential 1-GPU jobs, each waited for before the
// next; the CLI case starts the real binary for each submission (`skein
// submit`), the HTTP case posts to /v1/jobs from this process, as curl
// would. Its figures sit beside the in-process B8's in BENCHMARKS.md:
// the difference is the process's start, the client and the API's
// transport. b.N submissions each.
func BenchmarkSubmitToStartAPIPath(b *testing.B) {
	ip := "127.0.0.98"
	p := startAgent(b, ip, testutil.JobDir(b), freePort(b, ip), freePort(b, ip), "--gpus", "sim:1xH100-80")
	dir := testutil.SharedDir(b)
	hc := &http.Client{Timeout: 10 * time.Second, Transport: tokenTransport{token: adminToken(b), next: &http.Transport{}}}
	submitHTTP := func(argv []string) error {
		body, err := json.Marshal(api.SubmitRequest{RequestID: structs.NewID(), Spec: structs.JobSpec{Command: argv, GPUs: 1, Workdir: dir}})
		if err != nil {
			return err
		}
		resp, err := hc.Post(p.addr+"/v1/jobs", "application/json", bytes.NewReader(body))
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK && resp.StatusCode != http.StatusCreated {
			return fmt.Errorf("POST /v1/jobs: %s", resp.Status)
		}
		return nil
	}
	submitCLI := func(argv []string) error {
		cmd := exec.Command(skeinBin, append([]string{"submit", "--gpus", "1", "--workdir", dir, "--"}, argv...)...)
		cmd.Env = append(append(os.Environ(), "SKEIN_ADDR="+p.addr), p.env...)
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("skein submit: %w: %s", err, out)
		}
		return nil
	}
	measure := func(name string, submit func([]string) error) {
		d := make([]time.Duration, 0, b.N)
		for i := range b.N {
			file := filepath.Join(dir, fmt.Sprintf("%s-%d", name, i))
			t0 := time.Now()
			if err := submit([]string{"sh", "-c", "date +%s%N > " + file + ".tmp && mv " + file + ".tmp " + file}); err != nil {
				b.Fatal(err)
			}
			var started int64
			testutil.WaitFor(b, 30*time.Second, func() error {
				data, err := os.ReadFile(file)
				if err != nil {
					return err
				}
				started, err = strconv.ParseInt(strings.TrimSpace(string(data)), 10, 64)
				return err
			})
			d = append(d, time.Unix(0, started).Sub(t0))
			// The job ends and frees its GPU before the next is submitted.
			testutil.WaitFor(b, 30*time.Second, func() error {
				out, err := p.skein(b, "jobs")
				if err == nil && strings.Contains(out, "running") {
					err = fmt.Errorf("a job still runs")
				}
				return err
			})
		}
		slices.Sort(d)
		ms := func(q float64) float64 { return float64(testutil.Percentile(d, q)) / float64(time.Millisecond) }
		b.ReportMetric(ms(0.50), name+"-p50-ms")
		b.ReportMetric(ms(0.99), name+"-p99-ms")
	}
	b.ResetTimer()
	measure("http", submitHTTP)
	measure("cli", submitCLI)
}
