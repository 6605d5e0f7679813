package cli

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/skein-dev/skein/api"
	"github.com/skein-dev/skein/structs"
)

// cancelAgent is slurmAgent answering cancels as the agent does: a
// queued job ends at once, a running one is stopping; an unknown prefix
// is not found.
func cancelAgent(t *testing.T) *fakeAgent {
	t.Helper()
	return cancelAgentAs(t, api.WhoAmI{Role: structs.RoleAdmin})
}

// cancelAgentAs is cancelAgent, its token's user who.
func cancelAgentAs(t *testing.T, who api.WhoAmI) *fakeAgent {
	t.Helper()
	f := slurmAgent(t)
	f.reply("GET /v1/acl/whoami", http.StatusOK, who)
	f.handle("DELETE /v1/jobs/{id}", func(w http.ResponseWriter, r *http.Request) {
		id := r.PathValue("id")
		for _, j := range slurmJobs(time.Now()) {
			if strings.HasPrefix(j.ID, id) {
				if j.State == structs.JobQueued {
					j.State = structs.JobCancelled
				} else if !j.State.Terminal() {
					j.StopRequested = true
				}
				writeJSON(w, http.StatusOK, j)
				return
			}
		}
		writeJSON(w, http.StatusNotFound, api.ErrorBody{Error: "job " + id + ": no such job"})
	})
	return f
}

// cancelled lists the IDs the agent was asked to cancel.
func cancelled(f *fakeAgent) []string {
	var ids []string
	for _, req := range f.requests() {
		if req.Method == http.MethodDelete {
			ids = append(ids, strings.TrimPrefix(req.Path, "/v1/jobs/"))
		}
	}
	return ids
}

func TestScancel_IDsAndFilters(t *testing.T) {
	for _, tc := range []struct {
		name      string
		args      []string
		code      int
		cancelled string // the DELETE requests
		stdout    string
		stderr    string
	}{
		{"ids as given, prefixes resolved by the agent", []string{"aaaa", "bbbbbbbb"}, exitOK,
			"aaaa bbbbbbbb", "cancelled aaaaaaaa\nstopping bbbbbbbb\n", ""},
		{"an unknown id fails but the others go on", []string{"0000", "cccc"}, exitError,
			"0000 cccc", "stopping cccccccc\n", "scancel: error: job 0000: no such job\n"},
		{"a user's jobs still going", []string{"-u", "bob"}, exitOK,
			"bbbbbbbb2222", "stopping bbbbbbbb\n", ""},
		{"filters combine", []string{"-u", "alice", "-t", "R"}, exitOK,
			"cccccccc3333", "stopping cccccccc\n", ""},
		{"by name", []string{"--name", "wait"}, exitOK,
			"aaaaaaaa1111", "cancelled aaaaaaaa\n", ""},
		{"completing counts as going", []string{"-t", "CG"}, exitOK,
			"dddddddd4444", "stopping dddddddd\n", ""},
		{"filters narrow ids", []string{"-t", "PENDING", "aaaa", "bbbb"}, exitOK,
			"aaaaaaaa1111", "cancelled aaaaaaaa\n", ""},
		{"an id no filtered job has", []string{"-n", "cpu", "cccc", "eeee"}, exitError,
			"cccccccc3333", "stopping cccccccc\n", "scancel: error: job eeee: no such job still going\n"},
		{"a filter that selects nothing", []string{"-n", "nosuch"}, exitOK, "", "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := cancelAgent(t)
			r := runCLI(t, append([]string{"--addr", f.URL, "scancel"}, tc.args...)...)
			if r.code != tc.code || r.stdout != tc.stdout || r.stderr != tc.stderr {
				t.Errorf("scancel %q: %d %q %q, want %d %q %q", tc.args, r.code, r.stdout, r.stderr, tc.code, tc.stdout, tc.stderr)
			}
			if got := strings.Join(cancelled(f), " "); got != tc.cancelled {
				t.Errorf("cancelled %q, want %q", got, tc.cancelled)
			}
		})
	}
}

func TestScancel_UsageErrors(t *testing.T) {
	f := cancelAgent(t)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{nil, "Error: no job given: name IDs, or select jobs with -u, --me, -t or -n\n"},
		{[]string{"--signal=BOGUS", "aaaa"}, `Error: --signal=BOGUS: signal: unknown signal "BOGUS"`},
		{[]string{"-s", "64", "aaaa"}, "Error: --signal=64: signal: 64: want a signal number from 1 to 31"},
		{[]string{"--me", "-u", "bob"}, "Error: --me and -u: give one\n"},
		{[]string{"-t", "DONE"}, `Error: -t: unknown state "DONE"`},
		{[]string{"-u", "Bad User"}, "Error: --user: "},
		{[]string{"--xyzzy"}, "Error: flag provided but not defined: -xyzzy\n"},
	} {
		r := runCLI(t, append([]string{"--addr", f.URL, "scancel"}, tc.args...)...)
		if r.code != exitUsage || !strings.HasPrefix(r.stderr, tc.want) || !strings.Contains(r.stderr, "Run 'skein scancel --help' for usage.") {
			t.Errorf("scancel %q: %d %q, want 2 %q", tc.args, r.code, r.stderr, tc.want)
		}
	}
	if got := cancelled(f); len(got) != 0 {
		t.Errorf("usage errors cancelled %q", got)
	}
}

func TestScancel_FiltersOfAUserWhoMayCancelOnlyTheirOwn(t *testing.T) {
	f := slurmAgent(t)
	f.reply("GET /v1/acl/whoami", http.StatusOK, api.WhoAmI{ACL: true, User: "alice", Role: structs.RoleSubmitter,
		Permissions: []structs.Permission{structs.PermRead, structs.PermSubmit}})
	f.reply("DELETE /v1/jobs/{id}", http.StatusOK, structs.Job{ID: "cccccccc3333", State: structs.JobRunning, StopRequested: true})
	r := runCLI(t, "--addr", f.URL, "scancel", "-t", "R")
	if r.code != exitOK || r.stdout != "stopping cccccccc\n" || r.stderr != "" {
		t.Fatalf("scancel -t R: %d %q %q", r.code, r.stdout, r.stderr)
	}
	if got := strings.Join(cancelled(f), " "); got != "cccccccc3333" {
		t.Errorf("cancelled %q, want alice's running job alone", got)
	}
	for _, req := range f.requests() {
		if req.Path == "/v1/jobs" && req.Query.Get("owner") != "alice" {
			t.Errorf("jobs query %v, want alice's", req.Query)
		}
	}
}

func TestScancel_MeInteractive(t *testing.T) {
	f := cancelAgentAs(t, api.WhoAmI{Role: structs.RoleSubmitter, User: "alice", ACL: true})
	// alice's jobs still going are aaaa (pending), cccc (running) and
	// dddd (completing); she says yes to the first, no to the second.
	var out, errb bytes.Buffer
	app := NewApp(&out, &errb)
	app.Reader = strings.NewReader("y\nn\ny\n")
	code := run(app, []string{"skein", "--addr", f.URL, "scancel", "--me", "-i"})
	want := "Cancel job_id=aaaaaaaa name=wait partition=gpu [y/n]? cancelled aaaaaaaa\n" +
		"Cancel job_id=cccccccc name=cpu partition=skein [y/n]? " +
		"Cancel job_id=dddddddd name=stopping partition=skein [y/n]? stopping dddddddd\n"
	if code != exitOK || out.String() != want || errb.String() != "" {
		t.Fatalf("scancel --me -i: %d\n%s\n%s\nwant\n%s", code, out.String(), errb.String(), want)
	}
	if got := strings.Join(cancelled(f), " "); got != "aaaaaaaa1111 dddddddd4444" {
		t.Errorf("cancelled %q, want alice's two she said yes to", got)
	}
}

// signalAgent is cancelAgent answering signals as the agent does: a
// running job's ranks are signalled, any other job is refused.
func signalAgent(t *testing.T) *fakeAgent {
	t.Helper()
	f := cancelAgent(t)
	f.handle("POST /v1/jobs/{id}/signal", func(w http.ResponseWriter, r *http.Request) {
		id := r.PathValue("id")
		var req api.SignalRequest
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil || req.Signal != "USR1" {
			writeJSON(w, http.StatusBadRequest, api.ErrorBody{Error: fmt.Sprintf("signal %q, %v: want USR1", req.Signal, err)})
			return
		}
		for _, j := range slurmJobs(time.Now()) {
			if strings.HasPrefix(j.ID, id) {
				if j.State != structs.JobRunning {
					writeJSON(w, http.StatusConflict, api.ErrorBody{Error: "job is " + string(j.State) + ": only a running job's processes can be signalled"})
					return
				}
				writeJSON(w, http.StatusOK, api.SignalResult{Signal: "USR1", Signalled: []api.SignalledAlloc{
					{JobID: j.ID, Rank: 0, Node: "gpu01"}, {JobID: j.ID, Rank: 1, Node: "gpu02"}}})
				return
			}
		}
		writeJSON(w, http.StatusNotFound, api.ErrorBody{Error: "job " + id + ": no such job"})
	})
	return f
}

// signalledJobs lists the IDs the agent was asked to signal.
func signalledJobs(f *fakeAgent) []string {
	var ids []string
	for _, req := range f.requests() {
		if strings.HasSuffix(req.Path, "/signal") {
			ids = append(ids, strings.TrimSuffix(strings.TrimPrefix(req.Path, "/v1/jobs/"), "/signal"))
		}
	}
	return ids
}

func TestScancel_SignalSendsInsteadOfCancelling(t *testing.T) {
	for _, tc := range []struct {
		name      string
		args      []string
		code      int
		signalled string
		stdout    string
		stderr    string
	}{
		{"by ID, in any spelling", []string{"-s", "sigusr1", "cccc"}, exitOK,
			"cccc", "signalled cccccccc with SIGUSR1\n", ""},
		{"by number", []string{"--signal=10", "cccc"}, exitOK,
			"cccc", "signalled cccccccc with SIGUSR1\n", ""},
		{"a pending job named has nothing to signal", []string{"-s", "USR1", "aaaa", "cccc"}, exitError,
			"aaaa cccc", "signalled cccccccc with SIGUSR1\n",
			"scancel: error: job aaaa: job is queued: only a running job's processes can be signalled\n"},
		{"filters select the running jobs, completing ones too", []string{"-s", "USR1", "-u", "alice"}, exitOK,
			"cccccccc3333 dddddddd4444", "signalled cccccccc with SIGUSR1\nsignalled dddddddd with SIGUSR1\n", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := signalAgent(t)
			r := runCLI(t, append([]string{"--addr", f.URL, "scancel"}, tc.args...)...)
			if r.code != tc.code || r.stdout != tc.stdout || r.stderr != tc.stderr {
				t.Errorf("scancel %q: %d %q %q, want %d %q %q", tc.args, r.code, r.stdout, r.stderr, tc.code, tc.stdout, tc.stderr)
			}
			if got := strings.Join(signalledJobs(f), " "); got != tc.signalled {
				t.Errorf("signalled %q, want %q", got, tc.signalled)
			}
			if got := cancelled(f); len(got) != 0 {
				t.Errorf("a signal cancelled %q", got)
			}
		})
	}
}
