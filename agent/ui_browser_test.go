package agent

import (
	"context"
	"fmt"
	"html"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/skein-dev/skein/api"
	"github.com/skein-dev/skein/internal/testutil"
	"github.com/skein-dev/skein/structs"
)

// screenshotsEnv names a directory the browser test leaves its
// screenshots in (the tour of docs/web-ui.md); without it they go to a temporary
// directory.
const screenshotsEnv = "SKEIN_UI_SCREENSHOTS"

// chromium is the path of a Chromium (or Chrome) binary; "" when there is
// none.
func chromium() string {
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "headless-shell"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	return ""
}

// browser is a headless Chromium that records every console error and
// uncaught exception of the pages it loads.
type browser struct {
	t    *testing.T
	ctx  context.Context
	dir  string
	mu   sync.Mutex
	errs []string
}

// newBrowser starts a headless Chromium, with more options when given.
func newBrowser(t *testing.T, more ...chromedp.ExecAllocatorOption) *browser {
	testutil.Long(t, "drives a headless browser")
	path := chromium()
	if path == "" {
		t.Skip("no chromium binary found (Debian: apt-get install chromium): the web UI's browser test needs one")
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(path), chromedp.NoSandbox, chromedp.DisableGPU,
		chromedp.UserDataDir(t.TempDir()), chromedp.WindowSize(1400, 1000))
	opts = append(opts, more...)
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	t.Cleanup(cancelAlloc)
	ctx, cancel := chromedp.NewContext(allocCtx)
	t.Cleanup(cancel)
	b := &browser{t: t, ctx: ctx, dir: os.Getenv(screenshotsEnv)}
	if b.dir == "" {
		b.dir = t.TempDir()
	}
	if err := chromedp.Do(ctx); err != nil { // starts the browser and its tab
		t.Fatalf("start chromium (%s): %v", path, err)
	}
	// Console calls, uncaught exceptions and the browser's log (CSP
	// violations, failed loads), from now until the test ends.
	listening := make(chan struct{})
	go func() {
		msgs := chromedp.Console(ctx)
		close(listening)
		for m, err := range msgs {
			if err != nil {
				return
			}
			if m.IsException() || m.Type == chromedp.ConsoleError || m.Type == chromedp.ConsoleWarning {
				b.mu.Lock()
				b.errs = append(b.errs, fmt.Sprintf("%s (%s)", m, m.URL))
				b.mu.Unlock()
			}
		}
	}()
	<-listening
	return b
}

// run runs actions with a deadline.
func (b *browser) run(what string, actions ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 20*time.Second)
	defer cancel()
	if err := chromedp.Do(ctx, actions...); err != nil {
		b.t.Fatalf("%s: %v", what, err)
	}
}

// get runs an action that returns a value, with a deadline.
func get[T any](b *browser, what string, a chromedp.Action[T]) T {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 20*time.Second)
	defer cancel()
	v, err := chromedp.Run(ctx, a)
	if err != nil {
		b.t.Fatalf("%s: %v", what, err)
	}
	return v
}

// page loads url, waits for sel, saves a screenshot as name.png, and
// returns the page's text.
func (b *browser) page(name, url, sel string) string {
	b.t.Helper()
	b.run("load "+url, chromedp.Navigate(url), chromedp.WaitVisible(chromedp.CSS(sel)))
	text := get(b, "read "+url, chromedp.Text(chromedp.CSS("body")))
	b.save(name, get(b, "screenshot "+url, chromedp.FullScreenshot(100)))
	return text
}

func (b *browser) save(name string, png []byte) {
	b.t.Helper()
	if err := os.WriteFile(filepath.Join(b.dir, name+".png"), png, 0o644); err != nil {
		b.t.Fatal(err)
	}
}

// takeErrors returns what the pages reported since the last call.
func (b *browser) takeErrors() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	errs := b.errs
	b.errs = nil
	return errs
}

func has(t *testing.T, text, page string, wants ...string) {
	t.Helper()
	for _, w := range wants {
		if !strings.Contains(text, w) {
			t.Errorf("the %s page lacks %q; it reads:\n%s", page, w, text)
		}
	}
}

func TestUI_InABrowser_EveryPageOfAThreeNodeCluster(t *testing.T) {
	// Not parallel: a headless Chromium beside the package's parallel
	// clusters overran its page loads on a machine of two cores.
	b := newBrowser(t)
	tc := startCluster(t, 3)
	admin := tc.client(tc.agents[0])
	ctx := context.Background()

	running := tc.submit(tc.agents[0], structs.JobSpec{Name: "train-resnet", Command: []string{"sh", "-c", "echo epoch 1 done; sleep 300"}, GPUs: 2})
	failed := tc.submit(tc.agents[1], structs.JobSpec{Name: "eval-broken", Command: []string{"sh", "-c", "echo boom >&2; exit 3"}, GPUs: 1})
	queued := tc.submit(tc.agents[2], structs.JobSpec{Name: "after-train", Command: []string{"true"}, GPUs: 1,
		After: []structs.Dependency{{JobID: running.ID, Condition: structs.AfterOK}}})
	if _, err := admin.CreateService(ctx, api.ServiceCreateRequest{Name: "web", Replicas: 1,
		Spec: structs.ServiceSpec{Job: structs.JobSpec{Command: []string{"sleep", "1000"}}}}); err != nil {
		t.Fatalf("create service: %v", err)
	}
	waitJob(t, tc.agents[0], running.ID, runningAlloc)
	waitJob(t, tc.agents[0], failed.ID, jobState(structs.JobFailed))
	var reason string
	testutil.WaitFor(t, 15*time.Second, func() error {
		d, err := admin.Job(ctx, queued.ID)
		if err != nil {
			return err
		}
		// The reason names the dependency's state as of the last pass:
		// wait for the pass that saw it running, or the page, read
		// later, says more than the reason read here.
		if reason = d.Job.Reason; d.Job.State != structs.JobQueued || !strings.Contains(reason, "(running)") {
			return fmt.Errorf("the dependent job is %s (%q), want queued waiting for a running job", d.Job.State, reason)
		}
		return nil
	})
	d, err := admin.Job(ctx, running.ID)
	if err != nil {
		t.Fatal(err)
	}
	runNode := d.Allocations[0].NodeID
	operator, err := admin.CreateACLToken(ctx, api.ACLTokenCreateRequest{User: "olga", Role: structs.RoleOperator})
	if err != nil {
		t.Fatal(err)
	}

	// A node that does not lead serves the UI: the cancel goes to the leader.
	ui := tc.agents[(tc.leader()+1)%3]
	base := ui.HTTPAddr() + "/ui/"

	b.run("a page without a token goes to the login page", chromedp.Navigate(base), chromedp.WaitVisible(chromedp.CSS("#token")))
	if url := get(b, "location", chromedp.Location()); !strings.Contains(url, "/ui/login") {
		t.Fatalf("without a token the overview went to %s, want the login page", url)
	}
	b.run("a bad token", chromedp.SendKeys(chromedp.CSS("#token"), "sk-not-a-token"), chromedp.Click(chromedp.CSS("#signin")),
		chromedp.WaitVisible(chromedp.CSS("#error")))
	b.save("login", get(b, "screenshot the login page", chromedp.FullScreenshot(100)))
	if text := get(b, "read the error", chromedp.Text(chromedp.CSS("#error"))); text == "" {
		t.Fatal("a bad token was refused without a word")
	}
	// The refusal is a 401, which the browser reports (once its report
	// has come); nothing else may be.
	testutil.WaitFor(t, 5*time.Second, func() error {
		b.mu.Lock()
		defer b.mu.Unlock()
		if !slices.ContainsFunc(b.errs, func(e string) bool { return strings.Contains(e, "401") }) {
			return fmt.Errorf("the browser has not reported the 401 of the bad token; it reported %q", b.errs)
		}
		return nil
	})
	for _, e := range b.takeErrors() {
		if !strings.Contains(e, "401") || !strings.Contains(e, "/ui/login") {
			t.Errorf("the login page reported: %s", e)
		}
	}
	b.run("sign in", chromedp.SendKeys(chromedp.CSS("#token"), operator.Token), chromedp.Click(chromedp.CSS("#signin")),
		chromedp.WaitVisible(chromedp.CSS("#gpu-grid")))

	overview := b.page("overview", base, "#gpu-grid")
	has(t, overview, "overview", "node0", "node1", "node2", "3/3", "olga (operator)", structs.ShortID(queued.ID))

	queue := b.page("queue", base+"queue", "#queue-size")
	has(t, queue, "queue", structs.ShortID(queued.ID), "after-train", reason)

	jobs := b.page("jobs", base+"jobs", "#jobs")
	has(t, jobs, "jobs", structs.ShortID(running.ID), structs.ShortID(failed.ID), structs.ShortID(queued.ID), "train-resnet", "failed")

	failedPage := b.page("job-failed", base+"jobs/"+failed.ID+"?stream=stderr", "#job-id")
	has(t, failedPage, "failed job", failed.ID, "failed", "boom")

	nodePage := b.page("node", base+"nodes/"+runNode, "#gpus")
	has(t, nodePage, "node", runNode, structs.ShortID(running.ID), "H100")

	gpuPage := b.page("gpu", base+"nodes/"+runNode+"/gpus/0", "#gpu-uuid")
	has(t, gpuPage, "GPU", "GPU 0 of", "Held by")

	services := b.page("services", base+"services", "#services")
	has(t, services, "services", "web")

	jobPage := b.page("job", base+"jobs/"+running.ID, "#cancel")
	has(t, jobPage, "running job", running.ID, "train-resnet", "running", "epoch 1 done", "sh -c 'echo epoch 1 done; sleep 300'")

	// The cancel button: through this node's API to the leader.
	b.run("cancel", chromedp.Click(chromedp.CSS("#cancel")), chromedp.WaitVisible(chromedp.CSS("#job-id")))
	// The page is read from the node that serves the UI: wait for it there.
	waitJob(t, ui, running.ID, jobState(structs.JobCancelled))
	after := b.page("job-cancelled", base+"jobs/"+running.ID, "#job-id")
	has(t, after, "cancelled job", "cancelled")
	if strings.Contains(after, "Cancel job") {
		t.Error("a cancelled job still offers the cancel button")
	}

	if errs := b.takeErrors(); len(errs) > 0 {
		t.Fatalf("the pages reported errors:\n%s", strings.Join(errs, "\n"))
	}
	t.Logf("screenshots in %s", b.dir)
}

// A submitter's public service named "ui", served by the ingress on the
// UI's host: the admin, signed in to the UI, follows a link to it. Its
// page tries what a page of the host can: be sent the UI's cookies, set
// the attacker's session (by its answer's Set-Cookie and by script), and
// post a cordon to the UI with the CSRF token of that session. The
// attacker gets no credential and the GPU stays in service.
func TestUI_InABrowser_AServiceOnTheUIsHostCannotActAsTheSignedIn(t *testing.T) {
	// Not parallel: a headless Chromium beside the package's parallel
	// clusters overran its page loads on a machine of two cores.
	b := newBrowser(t, chromedp.IgnoreCertErrors) // the cluster's CA is the test's own
	dc := startDoorsCluster(t)
	ui := dc.agents[1].HTTPAddr()
	target := dc.agents[2].NodeID()
	cordon := ui + "/ui/nodes/" + target + "/gpus/0/cordon"

	// The attacker's own session and its CSRF token, from its sign-in page.
	attacker := &uiBrowser{t: t, base: ui, c: dc.tlsClient(mustJar(t))}
	csrf := attacker.csrf("/ui/login")
	uiURL, _ := url.Parse(ui + "/ui/")
	session := ""
	for _, c := range attacker.c.Jar.Cookies(uiURL) {
		if strings.Contains(c.Name, "skein_session") {
			session = c.Value
		}
	}
	dc.seen.page = func(w http.ResponseWriter, r *http.Request) {
		for _, c := range []string{"skein_session=" + session + "; Path=/ui/; Secure", "__Host-skein_session=" + session + "; Path=/; Secure"} {
			w.Header().Add("Set-Cookie", c)
		}
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprintf(w, `<!doctype html><title>free GPUs</title>
<form id="f" method="POST" action="%s"><input name="csrf" value="%s"><input name="reason" value="pwned"></form>
<script>
document.cookie = "__Host-skein_session=%s; Path=/; Secure";
document.cookie = "skein_session=%s; Path=/ui/; Secure";
document.getElementById("f").submit();
</script>`, html.EscapeString(cordon), csrf, session, session)
	}

	b.run("sign in as the admin", chromedp.Navigate(ui+"/ui/login"), chromedp.WaitVisible(chromedp.CSS("#token")),
		chromedp.SendKeys(chromedp.CSS("#token"), dc.admin), chromedp.Click(chromedp.CSS("#signin")),
		chromedp.WaitVisible(chromedp.CSS("#gpu-grid")))
	b.run("follow the link to the service", chromedp.Navigate(dc.agents[0].IngressAddr()+"/ui/free-gpus"))
	testutil.WaitFor(t, 20*time.Second, func() error {
		if loc := get(b, "location", chromedp.Location()); !strings.HasPrefix(loc, ui+"/ui/nodes/") {
			return fmt.Errorf("the browser is at %s, not yet at the UI's answer to the cordon the page posts", loc)
		}
		return nil
	})
	answer := get(b, "read the UI's answer", chromedp.Text(chromedp.CSS("body")))
	b.save("cross-origin-cordon", get(b, "screenshot the UI's answer", chromedp.FullScreenshot(100)))
	if !strings.Contains(answer, "Forbidden") {
		t.Errorf("the UI answered the service's cordon with:\n%s", answer)
	}
	if dc.seen.count() == 0 {
		t.Fatal("the browser never reached the service")
	}
	if got := skeinCredentials(dc.seen.credentials()); len(got) > 0 {
		t.Errorf("the submitter's replica got the admin's credentials: %q", got)
	}
	gpus, err := dc.client(dc.agents[0]).GPUs(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, g := range gpus {
		if g.Health == "cordoned" {
			t.Errorf("GPU %d of %s was cordoned by the service's page: %+v", g.Index, g.Node, g.GPU)
		}
	}
	// The admin is still signed in, as the admin.
	page := b.page("after-the-service", ui+"/ui/", "#gpu-grid")
	has(t, page, "overview", "admin")
	b.takeErrors() // the 403 is reported; nothing else is asked of these pages
}
