package cli

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/skein-dev/skein/api"
	"github.com/skein-dev/skein/structs"
)

// auditRecords are a write of before events were named, a revocation and
// a rotation step, as GET /v1/audit answers them.
var auditRecords = []api.AuditRecord{
	{At: time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC), Node: "gpu-01", User: "alice", Role: structs.RoleSubmitter, TokenID: "1111111111111111",
		Remote: "10.0.0.9:51234", Method: http.MethodPost, Path: "/v1/jobs", Status: http.StatusCreated},
	{At: time.Date(2030, 1, 2, 3, 4, 6, 0, time.UTC), Node: "gpu-02", Remote: "127.0.0.1:40000", Event: api.AuditTokenRevoke, Via: "api",
		Method: http.MethodDelete, Path: "/v1/acl/tokens/1111111111111111", Status: http.StatusForbidden},
	{At: time.Date(2030, 1, 2, 3, 4, 7, 0, time.UTC), Node: "gpu-01", Event: api.AuditKeyringRotate, Detail: "generation 4: dropped the old key"},
}

// auditAgent answers GET /v1/audit with records and, when missing is not
// empty, the header naming the nodes whose records are missing.
func auditAgent(t *testing.T, records []api.AuditRecord, missing string) *fakeAgent {
	t.Helper()
	f := newFakeAgent(t)
	f.handle("GET /v1/audit", func(w http.ResponseWriter, _ *http.Request) {
		if missing != "" {
			w.Header().Set(api.AuditMissingHeader, missing)
		}
		writeJSON(w, http.StatusOK, records)
	})
	return f
}

func TestAudit_TableOfTheRecords(t *testing.T) {
	f := auditAgent(t, auditRecords, "")
	r := runCLI(t, "--addr", f.URL, "audit")
	if r.code != exitOK || r.stderr != "" {
		t.Fatalf("exit %d, stderr %q", r.code, r.stderr)
	}
	at := func(i int) string { return auditRecords[i].At.Local().Format("2006-01-02 15:04:05") }
	want := []string{
		"TIME NODE EVENT USER ROLE FROM VIA METHOD PATH STATUS DETAIL",
		at(0) + " gpu-01 write alice submitter 10.0.0.9:51234 - POST /v1/jobs 201 -",
		at(1) + " gpu-02 token.revoke - - 127.0.0.1:40000 api DELETE /v1/acl/tokens/1111111111111111 403 -",
		at(2) + " gpu-01 keyring.rotate - - - - - - - generation 4: dropped the old key",
	}
	if got := tableLines(r.stdout); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if q := f.requests()[0].Query; len(q) != 0 {
		t.Errorf("query %v, want none without flags", q)
	}
}

func TestAudit_LimitLocalEventAndUserAreSent(t *testing.T) {
	f := auditAgent(t, nil, "")
	r := runCLI(t, "--addr", f.URL, "audit", "--limit", "5", "--local", "--event", "login,node.revoke", "--event", "secrets", "--user", "alice")
	if r.code != exitOK || r.stdout != "No audit records.\n" {
		t.Fatalf("exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	if q := f.requests()[0].Query; q.Get("limit") != "5" || q.Get("local") != "true" || q.Get("event") != "login,node.revoke,secrets" || q.Get("user") != "alice" {
		t.Errorf("query %v, want limit=5, local=true, event=login,node.revoke,secrets and user=alice", q)
	}
}

func TestAudit_MissingNodesAreNamedOnStderr(t *testing.T) {
	for _, args := range [][]string{{"audit"}, {"audit", "--json"}} {
		f := auditAgent(t, auditRecords[:1], "gpu-03,gpu-04")
		r := runCLI(t, append([]string{"--addr", f.URL}, args...)...)
		if r.code != exitOK || r.stderr != "Records of these nodes are missing (they did not answer): gpu-03, gpu-04\n" {
			t.Errorf("%v: exit %d, stderr %q", args, r.code, r.stderr)
		}
		if !strings.Contains(r.stdout, "alice") {
			t.Errorf("%v: stdout lacks the record:\n%s", args, r.stdout)
		}
	}
}

func TestAudit_JSON(t *testing.T) {
	f := auditAgent(t, auditRecords, "")
	r := runCLI(t, "--addr", f.URL, "audit", "--json")
	var got []api.AuditRecord
	mustDecode(t, r.stdout, &got)
	if r.code != exitOK || len(got) != 3 || got[0] != auditRecords[0] || !got[1].At.Equal(auditRecords[1].At) || got[2].Event != api.AuditKeyringRotate {
		t.Fatalf("exit %d, records %+v", r.code, got)
	}
	empty := auditAgent(t, nil, "")
	if r := runCLI(t, "--addr", empty.URL, "audit", "--json"); r.code != exitOK || r.stdout != "[]\n" {
		t.Errorf("no records: exit %d, stdout %q; want []", r.code, r.stdout)
	}
}

func TestAudit_LimitOutOfRangeIsAUsageError(t *testing.T) {
	for _, n := range []string{"0", "-1", "10001"} {
		f := auditAgent(t, nil, "")
		r := runCLI(t, "--addr", f.URL, "audit", "--limit", n)
		if r.code != exitUsage || !strings.Contains(r.stderr, "--limit "+n+": want 1 to 10000") {
			t.Errorf("--limit %s: exit %d, stderr %q", n, r.code, r.stderr)
		}
		if len(f.requests()) != 0 {
			t.Errorf("--limit %s: a request was sent", n)
		}
	}
}

func TestAudit_PermissionDeniedExitsOne(t *testing.T) {
	f := newFakeAgent(t)
	f.fail("GET /v1/audit", http.StatusForbidden, (&structs.PermissionError{Role: structs.RoleOperator, Need: structs.PermACL, What: "read the audit log"}).Error())
	r := runCLI(t, "--addr", f.URL, "audit")
	if r.code != exitError || !strings.HasPrefix(r.stderr, "Error: permission denied: role operator lacks acl to read the audit log (roles from admin have it)\n") {
		t.Fatalf("exit %d, stderr %q", r.code, r.stderr)
	}
}
