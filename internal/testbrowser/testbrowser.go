// Package testbrowser drives headless Chromium for tests over the
// DevTools protocol on a pipe: the factory's web UI walked as a user would
// (factory/server), the audit report rendered and printed (cmd/builder).
package testbrowser

import (
	"bufio"
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"image/png"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nodeforge/builder/internal/testutil"
)

// Browser drives headless Chromium over the DevTools protocol on a pipe
// (--remote-debugging-pipe: no port, no websocket library): it loads
// pages, ticks and clicks as a user would, takes screenshots, and hears
// every console message, uncaught exception and failed load.
type Browser struct {
	cmd     *exec.Cmd
	in      *os.File
	stderr  bytes.Buffer
	mu      sync.Mutex
	next    int
	waiting map[int]chan cdpMessage
	loads   chan struct{}
	session string
	done    chan struct{}
	// problems are what the pages logged as errors, not yet reported.
	problems []string
}

type cdpMessage struct {
	ID        int                       `json:"id,omitempty"`
	Method    string                    `json:"method,omitempty"`
	Params    json.RawMessage           `json:"params,omitempty"`
	Result    json.RawMessage           `json:"result,omitempty"`
	Error     *struct{ Message string } `json:"error,omitempty"`
	SessionID string                    `json:"sessionId,omitempty"`
}

// Start runs Chromium (Need's) until the test ends, attached to its page.
func Start(t testing.TB, chromium string) *Browser {
	t.Helper()
	inR, inW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	b := &Browser{in: inW, waiting: map[int]chan cdpMessage{}, loads: make(chan struct{}, 8), done: make(chan struct{})}
	b.cmd = exec.Command(chromium, "--headless=new", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-dev-shm-usage",
		"--disable-extensions", "--hide-scrollbars", "--window-size=1280,2000", "--user-data-dir="+filepath.Join(t.TempDir(), "profile"),
		"--remote-debugging-pipe", "about:blank")
	b.cmd.ExtraFiles = []*os.File{inR, outW} // its fd 3 reads commands, fd 4 writes answers
	b.cmd.Stderr = &b.stderr
	if err := b.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	inR.Close()
	outW.Close()
	go b.read(outR)
	t.Cleanup(b.close)
	var targets struct {
		TargetInfos []struct{ TargetID, Type string }
	}
	b.call(t, "", "Target.getTargets", nil, &targets)
	id := ""
	for _, ti := range targets.TargetInfos {
		if ti.Type == "page" {
			id = ti.TargetID
		}
	}
	var att struct{ SessionID string }
	b.call(t, "", "Target.attachToTarget", map[string]any{"targetId": id, "flatten": true}, &att)
	b.session = att.SessionID
	for _, m := range []string{"Page.enable", "Runtime.enable", "Log.enable"} {
		b.call(t, b.session, m, nil, nil)
	}
	b.call(t, b.session, "Emulation.setDeviceMetricsOverride", map[string]any{"width": 1280, "height": 2000, "deviceScaleFactor": 1, "mobile": false}, nil)
	return b
}

// read dispatches Chromium's messages: answers to their callers, events
// to the load signal and the problem list.
func (b *Browser) read(r io.Reader) {
	defer close(b.done)
	br := bufio.NewReader(r)
	for {
		raw, err := br.ReadBytes(0)
		if err != nil {
			return
		}
		var m cdpMessage
		if json.Unmarshal(raw[:len(raw)-1], &m) != nil {
			continue
		}
		if m.ID != 0 {
			b.mu.Lock()
			ch := b.waiting[m.ID]
			delete(b.waiting, m.ID)
			b.mu.Unlock()
			if ch != nil {
				ch <- m
			}
			continue
		}
		if problem := cdpProblem(m); problem != "" {
			b.mu.Lock()
			b.problems = append(b.problems, problem)
			b.mu.Unlock()
		}
		if m.Method == "Page.loadEventFired" {
			select {
			case b.loads <- struct{}{}:
			default:
			}
		}
	}
}

// cdpProblem is what an event says went wrong in a page: a console error,
// an uncaught exception, or an error logged by the browser (a failed
// load, a refused resource).
func cdpProblem(m cdpMessage) string {
	switch m.Method {
	case "Runtime.consoleAPICalled":
		var p struct {
			Type string
			Args []struct{ Value any }
		}
		json.Unmarshal(m.Params, &p)
		if p.Type == "error" || p.Type == "assert" {
			var vs []string
			for _, a := range p.Args {
				vs = append(vs, fmt.Sprint(a.Value))
			}
			return "console." + p.Type + ": " + strings.Join(vs, " ")
		}
	case "Runtime.exceptionThrown":
		return "uncaught: " + string(m.Params)
	case "Log.entryAdded":
		var p struct {
			Entry struct{ Level, Source, Text, URL string }
		}
		json.Unmarshal(m.Params, &p)
		if p.Entry.Level == "error" {
			return p.Entry.Source + ": " + p.Entry.Text + " " + p.Entry.URL
		}
	}
	return ""
}

// Call sends a command to the page and decodes its result into out.
func (b *Browser) Call(t testing.TB, method string, params, out any) {
	t.Helper()
	b.call(t, b.session, method, params, out)
}

// call sends a command (to a session, or to the browser) and decodes its
// result into out.
func (b *Browser) call(t testing.TB, session, method string, params, out any) {
	t.Helper()
	if params == nil {
		params = map[string]any{}
	}
	p, _ := json.Marshal(params)
	ch := make(chan cdpMessage, 1)
	b.mu.Lock()
	b.next++
	id := b.next
	b.waiting[id] = ch
	b.mu.Unlock()
	msg, _ := json.Marshal(cdpMessage{ID: id, Method: method, Params: p, SessionID: session})
	if _, err := b.in.Write(append(msg, 0)); err != nil {
		t.Fatalf("%s: %v\n%s", method, err, b.stderr.String())
	}
	select {
	case m := <-ch:
		if m.Error != nil {
			t.Fatalf("%s: %s", method, m.Error.Message)
		}
		if out != nil {
			if err := json.Unmarshal(m.Result, out); err != nil {
				t.Fatalf("%s: %v: %s", method, err, m.Result)
			}
		}
	case <-b.done:
		t.Fatalf("%s: chromium went away", method)
	case <-time.After(60 * time.Second):
		t.Fatalf("%s: no answer in 60 s", method)
	}
}

// Eval runs an expression in the page and decodes its value into out.
func (b *Browser) Eval(t testing.TB, expr string, out any) {
	t.Helper()
	var res struct {
		Result           struct{ Value json.RawMessage }
		ExceptionDetails *struct{ Text string }
	}
	b.call(t, b.session, "Runtime.evaluate", map[string]any{"expression": expr, "returnByValue": true}, &res)
	if res.ExceptionDetails != nil {
		t.Fatalf("%s: %s", expr, res.ExceptionDetails.Text)
	}
	if out != nil {
		if err := json.Unmarshal(res.Result.Value, out); err != nil {
			t.Fatalf("%s: %v: %s", expr, err, res.Result.Value)
		}
	}
}

// loaded runs act and waits for the page it leads to.
func (b *Browser) loaded(t testing.TB, what string, act func()) {
	t.Helper()
	for len(b.loads) > 0 {
		<-b.loads
	}
	act()
	select {
	case <-b.loads:
	case <-time.After(60 * time.Second):
		t.Fatalf("%s: no page loaded in 60 s", what)
	}
}

// Navigate loads url and waits for it.
func (b *Browser) Navigate(t testing.TB, url string) {
	t.Helper()
	b.loaded(t, url, func() {
		var res struct{ ErrorText string }
		if b.call(t, b.session, "Page.navigate", map[string]any{"url": url}, &res); res.ErrorText != "" {
			t.Fatalf("%s: %s", url, res.ErrorText)
		}
	})
}

// Click clicks what selector finds (a submit button: the browser sends
// its form) and waits for the next page.
func (b *Browser) Click(t testing.TB, selector string) {
	t.Helper()
	b.loaded(t, selector, func() {
		var ok bool
		if b.Eval(t, fmt.Sprintf(`(() => { const e = document.querySelector(%q); if (!e) return false; e.click(); return true })()`, selector), &ok); !ok {
			t.Fatalf("nothing to click at %s", selector)
		}
	})
}

// Tick checks a radio button or a check box.
func (b *Browser) Tick(t testing.TB, selector string) {
	t.Helper()
	var ok bool
	if b.Eval(t, fmt.Sprintf(`(() => { const e = document.querySelector(%q); if (!e) return false; e.checked = true; return true })()`, selector), &ok); !ok {
		t.Fatalf("nothing to tick at %s", selector)
	}
}

// Screenshot saves the page shown as a PNG file (checked: 1280 pixels
// wide).
func (b *Browser) Screenshot(t testing.TB, file string) {
	t.Helper()
	var res struct{ Data string }
	b.call(t, b.session, "Page.captureScreenshot", map[string]any{"format": "png"}, &res)
	data, err := base64.StdEncoding.DecodeString(res.Data)
	if err != nil {
		t.Fatal(err)
	}
	img, err := png.Decode(bytes.NewReader(data))
	if err != nil || img.Bounds().Dx() != 1280 {
		t.Errorf("%s: %v, %v", file, err, img.Bounds())
	}
	if err := os.WriteFile(file, data, 0o644); err != nil {
		t.Fatal(err)
	}
}

// TakeProblems are the problems the pages reported since the last call.
func (b *Browser) TakeProblems() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	p := b.problems
	b.problems = nil
	return p
}

// SelfCheck proves the console is heard: a page with a console error, an
// exception and a failed load must report all three.
func (b *Browser) SelfCheck(t testing.TB) {
	t.Helper()
	b.Navigate(t, `data:text/html,<img src="http://127.0.0.1:1/none.png"><script>console.error("probe-error"); undefinedProbe()</script>`)
	deadline := time.Now().Add(5 * time.Second)
	var got []string
	for time.Now().Before(deadline) {
		b.mu.Lock()
		got = slices.Clone(b.problems)
		b.mu.Unlock()
		all := strings.Join(got, "\n")
		if strings.Contains(all, "probe-error") && strings.Contains(all, "undefinedProbe") && strings.Contains(all, "none.png") {
			b.TakeProblems()
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("the browser's console is not heard: %q", got)
}

// close asks Chromium to quit, and kills it when it does not.
func (b *Browser) close() {
	msg, _ := json.Marshal(cdpMessage{ID: 1 << 30, Method: "Browser.close", Params: json.RawMessage(`{}`)})
	b.in.Write(append(msg, 0))
	exited := make(chan struct{})
	go func() { b.cmd.Wait(); close(exited) }()
	select {
	case <-exited:
	case <-time.After(10 * time.Second):
		b.cmd.Process.Kill()
		<-exited
	}
	b.in.Close()
}

// Need finds a headless-capable Chromium, or reports it missing
// (a failure under CI=true) and returns "".
func Need(t testing.TB) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	testutil.Missing(t, "chromium")
	return ""
}
