package node

import (
	"context"
	"fmt"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/raftlock/raftlock/api"
	"github.com/raftlock/raftlock/fsm"
	"github.com/raftlock/raftlock/transport/httpapi"
)

// screenshotEnv, set to 1, makes TestStatusPageShowsAHolderThenTheFreeLockWithoutAReload
// write the page's screenshots to docs/status-page.png (a laptop's
// window) and docs/status-page-phone.png (a phone's).
const screenshotEnv = "RAFTLOCK_UPDATE_SCREENSHOT"

// chromiumPath finds the headless browser, or skips the test when there is
// none and CI is unset (in CI, .ci/run installs it: missing is a failure).
func chromiumPath(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("CI") != "" {
		t.Fatal("no chromium on PATH: .ci/run installs the Debian package chromium")
	}
	t.Skip("no chromium on PATH (apt-get install chromium); CI is unset, so the status page test is skipped")
	return ""
}

// newBrowser starts headless Chromium for the test and returns a tab's
// context, ended when the test ends or after limit.
func newBrowser(t *testing.T, limit time.Duration, extra ...chromedp.ExecAllocatorOption) context.Context {
	t.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chromiumPath(t)),
		chromedp.NoSandbox, // CI runs as root
		chromedp.WindowSize(1280, 1000),
	)
	opts = append(opts, extra...)
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	tctx, cancelTab := chromedp.NewContext(actx)
	ctx, cancel := context.WithTimeout(tctx, limit)
	t.Cleanup(func() {
		cancel()
		cancelTab()
		cancelAlloc()
	})
	return ctx
}

// TestStatusPageShowsAHolderThenTheFreeLockWithoutAReload is the issue's
// test 3: the status page, loaded in headless Chromium from a follower,
// shows a lock taken through the API with its holder's session name,
// holder id and token, then shows it free after the release, in the same
// page (no reload); its HTML never carries a session id; it fits a
// phone's width; and it counts down the lock-delay an expired holder
// leaves.
func TestStatusPageShowsAHolderThenTheFreeLockWithoutAReload(t *testing.T) {
	browser := newBrowser(t, 90*time.Second)
	c := newTestCluster(t, 3, slowRaft, withHTTP)
	ctx := ctxT(t)
	_, li := c.leader()
	page := "http://" + c.httpAddrs[(li+1)%3] + "/ui/"
	cl := c.client(t)

	if err := chromedp.Do(browser,
		chromedp.Navigate(page),
		chromedp.WaitVisible(chromedp.CSS(`#conn[data-state="live"]`)),
	); err != nil {
		t.Fatalf("load %s: %v", page, err)
	}
	if _, err := chromedp.Run(browser, chromedp.Evaluate[string](`window.raftlockTestMarker = "same page"`)); err != nil {
		t.Fatalf("load %s: %v", page, err)
	}

	worker, err := cl.OpenSession(ctx, api.OpenRequest{Name: "report-worker"})
	if err != nil {
		t.Fatal(err)
	}
	scheduler, err := cl.OpenSession(ctx, api.OpenRequest{Name: "scheduler", LockDelay: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	g, err := cl.Acquire(ctx, api.AcquireRequest{Name: "jobs/report", Session: worker.ID, Holder: "worker-1", Value: "batch 42"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cl.Acquire(ctx, api.AcquireRequest{Name: "leader/scheduler", Session: scheduler.ID, Holder: "sched-a", Value: "10.0.0.7:9000"}); err != nil {
		t.Fatal(err)
	}
	// A waiter queued behind the scheduler's lock (it stays queued: its
	// request ends with the test).
	waitCtx, stopWaiting := context.WithCancel(ctx)
	defer stopWaiting()
	go func() {
		_, _ = cl.Acquire(waitCtx, api.AcquireRequest{Name: "leader/scheduler", Session: worker.ID, Holder: "standby", Wait: time.Minute})
	}()

	held := fmt.Sprintf(`tr[data-lock="jobs/report"][data-state="held"] .holder[data-holder="worker-1"][data-token="%d"]`, g.Token)
	if err := chromedp.Do(browser, chromedp.WaitVisible(chromedp.CSS(held))); err != nil {
		t.Fatalf("the page never showed jobs/report held by worker-1 with token %d: %v", g.Token, err)
	}
	row, err := chromedp.Run(browser, chromedp.Text(chromedp.CSS(`tr[data-lock="jobs/report"]`)))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"report-worker", "holder worker-1", fmt.Sprintf("token %d", g.Token), "batch 42"} {
		if !strings.Contains(row, want) {
			t.Errorf("the row of jobs/report reads %q, want it to contain %q", row, want)
		}
	}

	if os.Getenv(screenshotEnv) == "1" {
		shot(t, browser, "status-page.png")
	}
	// On a phone's width the page fits: no sideways scrolling.
	if err := chromedp.Do(browser, chromedp.EmulateViewport(390, 844, chromedp.EmulateMobile)); err != nil {
		t.Fatal(err)
	}
	if width, err := chromedp.Run(browser, chromedp.Evaluate[int](`document.documentElement.scrollWidth`)); err != nil || width > 390 {
		t.Errorf("on a 390 px wide phone the page is %d px wide (%v)", width, err)
	}
	if os.Getenv(screenshotEnv) == "1" {
		shot(t, browser, "status-page-phone.png")
	}
	if err := chromedp.Do(browser, chromedp.EmulateReset()); err != nil {
		t.Fatal(err)
	}

	if err := cl.Release(ctx, api.ReleaseRequest{Name: "jobs/report", Session: worker.ID, Holder: "worker-1"}); err != nil {
		t.Fatal(err)
	}
	released := time.Now()
	if err := chromedp.Do(browser, chromedp.WaitVisible(chromedp.CSS(`tr[data-lock="jobs/report"][data-state="free"]`))); err != nil {
		t.Fatalf("the page never showed jobs/report free: %v", err)
	}
	t.Logf("the page showed the lock free %v after the release", time.Since(released).Round(time.Millisecond))
	marker, err := chromedp.Run(browser, chromedp.Evaluate[string](`window.raftlockTestMarker || "reloaded"`))
	if err != nil {
		t.Fatal(err)
	}
	html, err := chromedp.Run(browser, chromedp.OuterHTML(chromedp.CSS("html")))
	if err != nil {
		t.Fatal(err)
	}
	if marker != "same page" {
		t.Errorf("the page was reloaded (marker %q)", marker)
	}
	for _, id := range []string{worker.ID, scheduler.ID} {
		if strings.Contains(html, id) {
			t.Errorf("the page's HTML carries a session id (handle %s)", api.SessionHandle(id))
		}
	}
	if !strings.Contains(html, api.SessionHandle(worker.ID)) {
		t.Errorf("the page does not name the session by its handle %s", api.SessionHandle(worker.ID))
	}

	// A holder whose session expires leaves its lock in lock-delay: the
	// page counts it down.
	crashed, err := cl.OpenSession(ctx, api.OpenRequest{Name: "crashed", TTL: time.Second, LockDelay: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cl.Acquire(ctx, api.AcquireRequest{Name: "jobs/crashed", Session: crashed.ID, Holder: "c1"}); err != nil {
		t.Fatal(err)
	}
	countdown := `tr[data-lock="jobs/crashed"][data-state="delayed"] [data-until]`
	if err := chromedp.Do(browser,
		chromedp.WaitVisible(chromedp.CSS(countdown)),
		chromedp.Poll[chromedp.Void](`/^\d+s left \(until \d\d:\d\d:\d\d\)$/.test(document.querySelector('`+countdown+`').textContent)`,
			chromedp.WithPollingMutation(), chromedp.WithPollingTimeout(10*time.Second)),
	); err != nil {
		t.Fatalf("the page never counted down the lock-delay of jobs/crashed: %v", err)
	}
	text, err := chromedp.Run(browser, chromedp.Text(chromedp.CSS(`tr[data-lock="jobs/crashed"]`)))
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("the expired holder's lock reads %q", text)
}

// shot waits until the page shows every member healthy and caught up
// (on DOM mutations, no polling loop), then writes its screenshot to
// docs/NAME.
func shot(t *testing.T, browser context.Context, name string) {
	t.Helper()
	if err := chromedp.Do(browser,
		chromedp.WaitVisible(chromedp.CSS(`tr[data-lock="leader/scheduler"] .sub`)),
		chromedp.Poll[chromedp.Void](`document.querySelectorAll('tr[data-member][data-state="follower"][data-lag="0"]').length === 2`,
			chromedp.WithPollingMutation(), chromedp.WithPollingTimeout(20*time.Second)),
	); err != nil {
		t.Fatalf("screenshot: %v", err)
	}
	png, err := chromedp.Run(browser, chromedp.FullScreenshot(100)) // 100: PNG
	if err != nil {
		t.Fatalf("screenshot: %v", err)
	}
	path := filepath.Join("..", "docs", name)
	if err := os.WriteFile(path, png, 0o644); err != nil {
		t.Fatalf("write %s: %v", path, err)
	}
	t.Logf("wrote %s (%d bytes)", path, len(png))
}

// TestStatusPageAsksForATokenUnderACLsAndShowsLocksWithIt pins the page
// under ACLs: without a token it asks for one instead of showing data;
// given a token with read: it shows the locks, and hides the members
// (admin only).
func TestStatusPageAsksForATokenUnderACLsAndShowsLocksWithIt(t *testing.T) {
	browser := newBrowser(t, 90*time.Second)
	c := newTestCluster(t, 3, func(cfg *Config) {
		slowRaft(cfg)
		cfg.ACL = true
	}, withHTTP)
	ctx := ctxT(t)
	_, li := c.leader()
	_, admin := c.bootstrapACL(t, ctx)
	reader, err := admin.CreateToken(ctx, api.TokenRequest{Name: "status page", Rules: []string{"read:"}})
	if err != nil {
		t.Fatal(err)
	}
	info, err := admin.OpenSession(ctx, api.OpenRequest{Name: "acl-worker"})
	if err != nil {
		t.Fatal(err)
	}
	g, err := admin.Acquire(ctx, api.AcquireRequest{Name: "jobs/acl", Session: info.ID, Holder: "w1"})
	if err != nil {
		t.Fatal(err)
	}

	page := "http://" + c.httpAddrs[(li+1)%3] + "/ui/"
	if err := chromedp.Do(browser,
		chromedp.Navigate(page),
		chromedp.WaitVisible(chromedp.CSS(`#token-form`)),
		chromedp.WaitVisible(chromedp.CSS(`#conn[data-state="error"]`)),
	); err != nil {
		t.Fatalf("the page did not ask for a token: %v", err)
	}
	if n, err := chromedp.Run(browser, chromedp.Evaluate[int](`document.querySelectorAll("tr[data-lock]").length`)); err != nil || n != 0 {
		t.Errorf("without a token the page shows %d locks (%v), want none", n, err)
	}
	held := fmt.Sprintf(`tr[data-lock="jobs/acl"][data-state="held"] .holder[data-holder="w1"][data-token="%d"]`, g.Token)
	if err := chromedp.Do(browser,
		chromedp.SetValue(chromedp.CSS(`#token-input`), reader.Secret),
		chromedp.Click(chromedp.CSS(`#token-save`)),
		chromedp.WaitVisible(chromedp.CSS(`#conn[data-state="live"]`)),
		chromedp.WaitVisible(chromedp.CSS(held)),
		chromedp.WaitVisible(chromedp.CSS(`#members-hidden`)),
	); err != nil {
		t.Fatalf("with a read: token the page never showed jobs/acl held by w1: %v", err)
	}
	html, err := chromedp.Run(browser, chromedp.OuterHTML(chromedp.CSS("html")))
	if err != nil {
		t.Fatal(err)
	}
	for what, secret := range map[string]string{"session id": info.ID, "token secret": reader.Secret} {
		if strings.Contains(html, secret) {
			t.Errorf("the page's HTML carries the %s", what)
		}
	}
}

// TestStatusPageWorksOverHTTPS pins the page under TLS: served over HTTPS,
// its own calls (same origin, relative URLs) go over HTTPS too, and it
// shows a lock taken through the API.
func TestStatusPageWorksOverHTTPS(t *testing.T) {
	// The test server's certificate is self-signed: the browser is told to
	// accept it, as a user would trust the cluster's CA.
	browser := newBrowser(t, 60*time.Second, chromedp.Flag("ignore-certificate-errors", true))
	c := newTestCluster(t, 1, nil)
	n, _ := c.leader()
	srv := httptest.NewUnstartedServer(httpapi.NewServer(n))
	srv.StartTLS()
	t.Cleanup(func() {
		srv.CloseClientConnections() // the page's blocking query
		srv.Close()
	})
	ctx := ctxT(t)
	info, err := n.OpenSession(ctx, api.OpenRequest{Name: "tls-worker"})
	if err != nil {
		t.Fatal(err)
	}
	g, err := n.Acquire(ctx, api.AcquireRequest{Name: "jobs/tls", Session: info.ID, Holder: "h1"})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(srv.URL, "https://") {
		t.Fatalf("the test server is not HTTPS: %s", srv.URL)
	}
	held := fmt.Sprintf(`tr[data-lock="jobs/tls"][data-state="held"] .holder[data-holder="h1"][data-token="%d"]`, g.Token)
	if err := chromedp.Do(browser,
		chromedp.Navigate(srv.URL+"/ui/"),
		chromedp.WaitVisible(chromedp.CSS(`#conn[data-state="live"]`)),
		chromedp.WaitVisible(chromedp.CSS(held)),
	); err != nil {
		t.Fatalf("over HTTPS the page never showed jobs/tls held by h1: %v", err)
	}
}

// TestStatusPageShowsSemaphoreSlots: a semaphore reads "semaphore · 2/3
// held" with each holder's slot, and an expired holder's slot counts down
// its own lock-delay while the other slot stays held.
func TestStatusPageShowsSemaphoreSlots(t *testing.T) {
	browser := newBrowser(t, 60*time.Second)
	c := newTestCluster(t, 1, nil, withHTTP)
	c.awaitRecords(t, fsm.Version)
	ctx := ctxT(t)
	cl := c.client(t)
	page := "http://" + c.httpAddrs[0] + "/ui/"
	if err := chromedp.Do(browser, chromedp.Navigate(page), chromedp.WaitVisible(chromedp.CSS(`#conn[data-state="live"]`))); err != nil {
		t.Fatalf("load %s: %v", page, err)
	}
	steady, err := cl.OpenSession(ctx, api.OpenRequest{Name: "steady", TTL: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	crashing, err := cl.OpenSession(ctx, api.OpenRequest{Name: "crashing", TTL: time.Second, LockDelay: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cl.Acquire(ctx, api.AcquireRequest{Name: "pool", Session: crashing.ID, Holder: "c", Permits: 3}); err != nil {
		t.Fatal(err)
	}
	if _, err := cl.Acquire(ctx, api.AcquireRequest{Name: "pool", Session: steady.ID, Holder: "s", Permits: 3}); err != nil {
		t.Fatal(err)
	}
	stopKA := c.keepAlive(steady.ID, 300*time.Millisecond)
	defer stopKA()
	row := `tr[data-lock="pool"][data-permits="3"]`
	if err := chromedp.Do(browser,
		chromedp.WaitVisible(chromedp.CSS(row+` .holder[data-holder="s"][data-slot="1"]`)),
		chromedp.Poll[chromedp.Void](`document.querySelector('`+row+` .badge').textContent === 'semaphore · 2/3 held'`,
			chromedp.WithPollingMutation(), chromedp.WithPollingTimeout(10*time.Second)),
	); err != nil {
		t.Fatalf("the page never showed pool with 2 of 3 slots held: %v", err)
	}
	countdown := row + ` [data-slot-delay="0"] [data-until]`
	if err := chromedp.Do(browser,
		chromedp.WaitVisible(chromedp.CSS(countdown)),
		chromedp.Poll[chromedp.Void](`/^\d+s left \(until \d\d:\d\d:\d\d\)$/.test(document.querySelector('`+countdown+`').textContent) && `+
			`document.querySelector('`+row+` .badge').textContent === 'semaphore · 1/3 held'`,
			chromedp.WithPollingMutation(), chromedp.WithPollingTimeout(15*time.Second)),
	); err != nil {
		t.Fatalf("the page never counted down slot 0's lock-delay: %v", err)
	}
	if err := chromedp.Do(browser, chromedp.Poll[chromedp.Void](
		`[...document.querySelectorAll('li[data-kind="lock_delay"]')].some((e) => e.textContent.includes('pool slot 0 in lock-delay until'))`,
		chromedp.WithPollingMutation(), chromedp.WithPollingTimeout(10*time.Second))); err != nil {
		t.Fatalf("the page's events never named slot 0's lock-delay: %v", err)
	}
	text, err := chromedp.Run(browser, chromedp.Text(chromedp.CSS(row)))
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("the semaphore reads %q", text)
}
