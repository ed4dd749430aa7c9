package main

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"image/png"
	"io"
	"net/http"
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

// TestFactoryUI: the factory's wizard walked in headless Chromium, in
// English and in Russian, to the final page: each step in its language,
// bad kernel arguments refused on their step, the schematic ID the one
// builder schematic id gives, every link on the final page answers 200
// and every artifact's digest is the API's; no console error, no script,
// no outside resource; a screenshot of every step.
func TestFactoryUI(t *testing.T) {
	testutil.Slow(t)
	chromium := needChromium(t)
	if chromium == "" {
		return
	}
	f := newFactoryFixture(t)
	hs := f.hs
	shots := os.Getenv("NODEFORGE_UI_SCREENSHOTS")
	if shots == "" {
		shots = t.TempDir()
	} else if err := os.MkdirAll(shots, 0o755); err != nil {
		t.Fatal(err)
	}

	schPath := filepath.Join(t.TempDir(), "s.yaml")
	// The wizard lists the extensions chosen sorted (the ID keeps the order).
	os.WriteFile(schPath, []byte("customization:\n  extraKernelArgs: [console=ttyS0, net.ifnames=0]\n  systemExtensions:\n    officialExtensions: [cri, zfs]\n"), 0o644)
	wantID, err := runBuilder(t, "schematic", "id", schPath)
	if err != nil {
		t.Fatal(err)
	}

	b := startBrowser(t, chromium)
	b.selfCheck(t)
	walks := []uiWalk{
		{lang: "en", platform: "metal", check: []string{"cri"}, extText: "containerd, runc and CNI plugins, with their CRI configuration", filter: "ZFS", checkAfter: []string{"zfs"},
			badArgs: `init="/bin/sh"`, args: "console=ttyS0\nnet.ifnames=0", wantID: strings.TrimSpace(wantID),
			files: []string{"metal-amd64.iso", "metal-amd64.raw.zst", "metal-amd64.qcow2", "kernel-amd64", "initramfs-amd64.xz", "cmdline-metal-amd64"}},
		{lang: "ru", platform: "yandex", badArgs: "hostname=узел", extText: "containerd, runc и сетевые модули CNI с настройками CRI", wantID: "376567988ad370138ad8b2698212367b8edcb69b5fd68c80be1f2ec7d603b4ba",
			files: []string{"yandex-amd64.qcow2", "kernel-amd64", "initramfs-amd64.xz", "cmdline-yandex-amd64"}},
	}
	for _, w := range walks {
		t.Run(w.lang, func(t *testing.T) {
			start := time.Now()
			page := w.walk(t, b, hs.URL, shots)
			if page != nil {
				checkFinalLinks(t, hs.URL, page, w)
				runVerifyLines(t, page.Verify)
			}
			t.Logf("%s: %s", w.lang, time.Since(start).Round(time.Millisecond))
		})
	}
}

// uiWalk is one way through the wizard.
type uiWalk struct {
	lang, platform        string
	check, checkAfter     []string // extensions ticked before and after filtering
	filter                string
	badArgs, args, wantID string
	files                 []string // the downloads the final page offers
	extText               string   // a description the extension step shows
}

// uiPageInfo is what the test reads of a rendered page.
type uiPageInfo struct {
	URL, Lang, H1, Error, ID, YAML, Installer, PXE, Verify string
	Scripts, Overflow                                      int
	Resources                                              []string
	Exts                                                   []string
	Links                                                  []struct{ Href, Class, Text string }
}

// uiCatalog reads a language's messages as the factory has them.
func uiCatalog(t *testing.T, lang string) map[string]string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "factory", "server", "ui", "locales", lang+".json"))
	if err != nil {
		t.Fatal(err)
	}
	m := map[string]string{}
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

// walk goes from the first step to the final page and returns it (nil
// when a step went wrong).
func (w uiWalk) walk(t *testing.T, b *browser, base, shots string) *uiPageInfo {
	msg := uiCatalog(t, w.lang)
	n := 0
	// step checks the page the browser shows and screenshots it.
	step := func(name, heading string) *uiPageInfo {
		t.Helper()
		n++
		p := b.page(t)
		if p.Lang != w.lang || p.H1 != msg[heading] || p.Scripts != 0 {
			t.Errorf("%s: <html lang=%q>, <h1> %q, %d scripts; want %s, %q, none (at %s)", name, p.Lang, p.H1, p.Scripts, w.lang, msg[heading], p.URL)
		}
		if p.Overflow > 0 {
			t.Errorf("%s: the page is %d px wider than the 1280 px window", name, p.Overflow)
		}
		for _, r := range p.Resources {
			if !strings.HasPrefix(r, base+"/") && !strings.HasPrefix(r, "data:") {
				t.Errorf("%s: an outside resource: %s", name, r)
			}
		}
		for _, e := range b.takeProblems() {
			t.Errorf("%s: console: %s", name, e)
		}
		b.screenshot(t, filepath.Join(shots, fmt.Sprintf("%s-%d-%s.png", w.lang, n, name)))
		return p
	}
	// The demo serves one release of one architecture: the wizard
	// chooses both and starts at the platform; their pages stay reachable.
	b.navigate(t, base+"/?lang="+w.lang+"&step=version")
	step("version", "version.heading")
	b.navigate(t, base+"/?lang="+w.lang+"&step=arch&version=v1.11.0-demo")
	step("arch", "arch.heading")
	b.navigate(t, base+"/?lang="+w.lang)
	step("platform", "platform.heading")
	b.tick(t, `input[name=platform][value=`+w.platform+`]`)
	b.click(t, "#wizard button[type=submit]")
	if p := step("extensions", "ext.heading"); len(p.Exts) < 2 {
		t.Fatalf("the extension step lists %v", p.Exts)
	}
	var shown bool
	if b.eval(t, fmt.Sprintf(`document.querySelector("table.extensions").textContent.includes(%q)`, w.extText), &shown); !shown {
		t.Errorf("the extension step does not say %q", w.extText)
	}
	for _, e := range w.check {
		b.tick(t, `input[name=ext][value="`+e+`"]`)
	}
	if w.filter != "" {
		b.eval(t, fmt.Sprintf(`document.querySelector("#filter").value = %q`, w.filter), nil)
		b.click(t, "#filter-button")
		if p := step("extensions-filtered", "ext.heading"); !slices.Equal(p.Exts, w.checkAfter) {
			t.Errorf("filter %q lists %v", w.filter, p.Exts)
		}
	}
	for _, e := range w.checkAfter {
		b.tick(t, `input[name=ext][value="`+e+`"]`)
	}
	b.click(t, "#next")
	step("args", "args.heading")
	b.eval(t, fmt.Sprintf(`document.querySelector("#args").value = %q`, w.badArgs), nil)
	b.click(t, "#wizard button[type=submit]")
	if p := step("args-refused", "args.heading"); !strings.Contains(p.Error, msg["args.invalid"]) {
		t.Errorf("bad arguments %q: the page says %q", w.badArgs, p.Error)
	}
	var kept string
	if b.eval(t, `document.querySelector("#args").value`, &kept); kept != w.badArgs {
		t.Errorf("the refused arguments were not kept: %q", kept)
	}
	b.eval(t, fmt.Sprintf(`document.querySelector("#args").value = %q`, w.args), nil)
	b.click(t, "#wizard button[type=submit]")
	p := step("final", "final.heading")
	if p.ID != w.wantID {
		t.Errorf("final page: schematic %q, want %s", p.ID, w.wantID)
		return nil
	}
	return p
}

// checkFinalLinks fetches every link of the final page (two at a time,
// as a browser would): each answers 200, each artifact's bytes have the
// digest its .sha256 and its ETag say, and the schematic and the
// installer reference are the API's.
func checkFinalLinks(t *testing.T, base string, p *uiPageInfo, w uiWalk) {
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	type answer struct {
		status     int
		etag, hash string
		text       string // the start of the body
	}
	get := func(url string) (answer, error) {
		resp, err := client.Get(url)
		if err != nil {
			return answer{}, err
		}
		defer resp.Body.Close()
		h := sha256.New()
		var head bytes.Buffer
		if _, err := io.Copy(io.MultiWriter(h, &limitedBuffer{&head, 4096}), resp.Body); err != nil {
			return answer{}, err
		}
		return answer{resp.StatusCode, resp.Header.Get("ETag"), hex.EncodeToString(h.Sum(nil)), head.String()}, nil
	}
	img := base + "/image/" + p.ID + "/v1.11.0-demo/"
	var urls, artifacts []string
	for _, l := range p.Links {
		if slices.Contains(urls, l.Href) {
			continue
		}
		if !strings.HasPrefix(l.Href, base+"/") {
			t.Errorf("link %s leaves the factory", l.Href)
			continue
		}
		urls = append(urls, l.Href)
		if l.Class == "artifact" {
			artifacts = append(artifacts, strings.TrimPrefix(l.Href, img))
		}
	}
	urls = append(urls, base+"/schematics/"+p.ID)
	answers := map[string]answer{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	slots := make(chan struct{}, 2)
	for _, u := range urls {
		wg.Add(1)
		go func() {
			defer wg.Done()
			slots <- struct{}{}
			defer func() { <-slots }()
			a, err := get(u)
			if err != nil {
				t.Errorf("%s: %v", u, err)
			}
			mu.Lock()
			answers[u] = a
			mu.Unlock()
		}()
	}
	wg.Wait()
	for _, u := range urls {
		if a := answers[u]; a.status != 200 {
			t.Errorf("%s: %d %.200s", u, a.status, a.text)
		}
	}
	if !slices.Equal(artifacts, w.files) {
		t.Errorf("the final page offers %v, want %v", artifacts, w.files)
	}
	for _, name := range artifacts {
		for _, side := range []string{".sha256", ".sha512", ".sig"} {
			if !slices.Contains(urls, img+name+side) {
				t.Errorf("%s has no %s link", name, side)
			}
		}
		a, sum := answers[img+name], answers[img+name+".sha256"].text
		if sum != a.hash+"  "+name+"\n" || a.etag != `"sha256:`+a.hash+`"` {
			t.Errorf("%s: sha256 %s; the API says %q, ETag %s", name, a.hash, sum, a.etag)
		}
	}
	if yaml := answers[base+"/schematics/"+p.ID].text; yaml != p.YAML {
		t.Errorf("the page's schematic:\n%s\nthe API's:\n%s", p.YAML, yaml)
	}
	if want := strings.TrimPrefix(base, "http://") + "/installer/" + p.ID + ":v1.11.0-demo"; p.Installer != want {
		t.Errorf("installer %q, want %q", p.Installer, want)
	}
	if want := base + "/pxe/" + p.ID + "/v1.11.0-demo/" + w.platform + "-amd64"; p.PXE != want || !slices.Contains(urls, want) {
		t.Errorf("PXE link %q, want %q", p.PXE, want)
	}
}

// runVerifyLines runs the final page's check of a download as a user
// copies it (its curl and cosign verify-blob lines; the installer's
// cosign verify line is judged by the registry tests).
func runVerifyLines(t *testing.T, text string) {
	t.Helper()
	testutil.NeedTool(t, "curl")
	testutil.NeedTool(t, "cosign")
	lines := strings.Split(strings.TrimSpace(text), "\n")
	if len(lines) != 4 || !strings.HasPrefix(lines[2], "cosign verify-blob ") {
		t.Fatalf("the page's verification lines:\n%s", text)
	}
	cmd := exec.Command("bash", "-euc", strings.Join(lines[:3], "\n"))
	cmd.Dir = t.TempDir()
	if out, err := cmd.CombinedOutput(); err != nil || !strings.Contains(string(out), "Verified OK") {
		t.Errorf("the page's verification lines:\n%s\n%v\n%s", text, err, out)
	}
}

// limitedBuffer keeps the first n bytes written to it.
type limitedBuffer struct {
	b *bytes.Buffer
	n int
}

func (l *limitedBuffer) Write(p []byte) (int, error) {
	if room := l.n - l.b.Len(); room > 0 {
		l.b.Write(p[:min(room, len(p))])
	}
	return len(p), nil
}

// browser drives headless Chromium over the DevTools protocol on a pipe
// (--remote-debugging-pipe: no port, no websocket library): it loads
// pages, ticks and clicks as a user would, takes screenshots, and hears
// every console message, uncaught exception and failed load.
type browser struct {
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

func startBrowser(t *testing.T, chromium string) *browser {
	t.Helper()
	inR, inW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	b := &browser{in: inW, waiting: map[int]chan cdpMessage{}, loads: make(chan struct{}, 8), done: make(chan struct{})}
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
func (b *browser) read(r io.Reader) {
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

// call sends a command and decodes its result into out.
func (b *browser) call(t *testing.T, session, method string, params, out any) {
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

// eval runs an expression in the page and decodes its value into out.
func (b *browser) eval(t *testing.T, expr string, out any) {
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
func (b *browser) loaded(t *testing.T, what string, act func()) {
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

func (b *browser) navigate(t *testing.T, url string) {
	t.Helper()
	b.loaded(t, url, func() {
		var res struct{ ErrorText string }
		if b.call(t, b.session, "Page.navigate", map[string]any{"url": url}, &res); res.ErrorText != "" {
			t.Fatalf("%s: %s", url, res.ErrorText)
		}
	})
}

// click clicks what selector finds (a submit button: the browser sends
// its form) and waits for the next page.
func (b *browser) click(t *testing.T, selector string) {
	t.Helper()
	b.loaded(t, selector, func() {
		var ok bool
		if b.eval(t, fmt.Sprintf(`(() => { const e = document.querySelector(%q); if (!e) return false; e.click(); return true })()`, selector), &ok); !ok {
			t.Fatalf("nothing to click at %s", selector)
		}
	})
}

// tick checks a radio button or a check box.
func (b *browser) tick(t *testing.T, selector string) {
	t.Helper()
	var ok bool
	if b.eval(t, fmt.Sprintf(`(() => { const e = document.querySelector(%q); if (!e) return false; e.checked = true; return true })()`, selector), &ok); !ok {
		t.Fatalf("nothing to tick at %s", selector)
	}
}

// page reads what the test checks of the page shown.
func (b *browser) page(t *testing.T) *uiPageInfo {
	t.Helper()
	var s string
	b.eval(t, `JSON.stringify({
		URL: location.href, Lang: document.documentElement.lang,
		H1: document.querySelector("h1")?.textContent ?? "",
		Error: document.querySelector("#error")?.textContent ?? "",
		ID: document.querySelector("#schematic-id")?.textContent ?? "",
		YAML: document.querySelector("#schematic-yaml")?.textContent ?? "",
		Installer: document.querySelector("#installer")?.textContent ?? "",
		PXE: document.querySelector("#pxe")?.href ?? "",
		Verify: document.querySelector("#install pre:last-of-type")?.textContent ?? "",
		Overflow: document.documentElement.scrollWidth - window.innerWidth,
		Scripts: document.scripts.length,
		Resources: performance.getEntriesByType("resource").map(e => e.name),
		Exts: [...document.querySelectorAll("input[type=checkbox][name=ext]")].map(e => e.value),
		Links: [...document.querySelectorAll("a[href]")].map(a => ({Href: a.href.split("#")[0], Class: a.className, Text: a.textContent})),
	})`, &s)
	var p uiPageInfo
	if err := json.Unmarshal([]byte(s), &p); err != nil {
		t.Fatal(err)
	}
	return &p
}

func (b *browser) screenshot(t *testing.T, file string) {
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

func (b *browser) takeProblems() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	p := b.problems
	b.problems = nil
	return p
}

// selfCheck proves the console is heard: a page with a console error, an
// exception and a failed load must report all three.
func (b *browser) selfCheck(t *testing.T) {
	t.Helper()
	b.navigate(t, `data:text/html,<img src="http://127.0.0.1:1/none.png"><script>console.error("probe-error"); undefinedProbe()</script>`)
	deadline := time.Now().Add(5 * time.Second)
	var got []string
	for time.Now().Before(deadline) {
		b.mu.Lock()
		got = slices.Clone(b.problems)
		b.mu.Unlock()
		all := strings.Join(got, "\n")
		if strings.Contains(all, "probe-error") && strings.Contains(all, "undefinedProbe") && strings.Contains(all, "none.png") {
			b.takeProblems()
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("the browser's console is not heard: %q", got)
}

// close asks Chromium to quit, and kills it when it does not.
func (b *browser) close() {
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

// needChromium finds a headless-capable Chromium, or reports it missing
// (a failure under CI=true) and returns "".
func needChromium(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	testutil.Missing(t, "chromium")
	return ""
}
