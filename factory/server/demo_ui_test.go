package server

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
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

	"github.com/nodeforge/builder/api/schematic"
	"github.com/nodeforge/builder/internal/testbrowser"
	"github.com/nodeforge/builder/internal/testutil"
)

// TestFactoryUI: the factory's wizard walked in headless Chromium, in
// English and in Russian, to the final page: each step in its language,
// bad kernel arguments refused on their step, the schematic ID the one
// schematic's own (builder schematic id's), every link on the final page answers 200
// and every artifact's digest is the API's; no console error, no script,
// no outside resource; a screenshot of every step.
func TestFactoryUI(t *testing.T) {
	testutil.Slow(t)
	testutil.NoRace(t)
	chromium := testbrowser.Need(t)
	if chromium == "" {
		return
	}
	f := newDemoFactory(t)
	hs := f.hs
	shots := os.Getenv("NODEFORGE_UI_SCREENSHOTS")
	if shots == "" {
		shots = t.TempDir()
	} else if err := os.MkdirAll(shots, 0o755); err != nil {
		t.Fatal(err)
	}

	// The wizard lists the extensions chosen sorted (the ID keeps the order).
	sch, err := schematic.Parse([]byte("customization:\n  extraKernelArgs: [console=ttyS0, net.ifnames=0]\n  systemExtensions:\n    officialExtensions: [cri, zfs]\n"))
	if err != nil {
		t.Fatal(err)
	}
	wantID, err := sch.ID()
	if err != nil {
		t.Fatal(err)
	}

	b := testbrowser.Start(t, chromium)
	b.SelfCheck(t)
	walks := []uiWalk{
		{lang: "en", platform: "metal", check: []string{"cri"}, extText: "containerd, runc and CNI plugins, with their CRI configuration", filter: "ZFS", checkAfter: []string{"zfs"},
			badArgs: `init="/bin/sh"`, args: "console=ttyS0\nnet.ifnames=0", wantID: wantID,
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
	b, err := os.ReadFile(filepath.Join("ui", "locales", lang+".json"))
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
func (w uiWalk) walk(t *testing.T, b *testbrowser.Browser, base, shots string) *uiPageInfo {
	msg := uiCatalog(t, w.lang)
	n := 0
	// step checks the page the browser shows and screenshots it.
	step := func(name, heading string) *uiPageInfo {
		t.Helper()
		n++
		p := browserPage(t, b)
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
		for _, e := range b.TakeProblems() {
			t.Errorf("%s: console: %s", name, e)
		}
		b.Screenshot(t, filepath.Join(shots, fmt.Sprintf("%s-%d-%s.png", w.lang, n, name)))
		return p
	}
	// The demo serves one release of one architecture: the wizard
	// chooses both and starts at the platform; their pages stay reachable.
	b.Navigate(t, base+"/?lang="+w.lang+"&step=version")
	step("version", "version.heading")
	b.Navigate(t, base+"/?lang="+w.lang+"&step=arch&version=v1.11.0-demo")
	step("arch", "arch.heading")
	b.Navigate(t, base+"/?lang="+w.lang)
	step("platform", "platform.heading")
	b.Tick(t, `input[name=platform][value=`+w.platform+`]`)
	b.Click(t, "#wizard button[type=submit]")
	if p := step("extensions", "ext.heading"); len(p.Exts) < 2 {
		t.Fatalf("the extension step lists %v", p.Exts)
	}
	var shown bool
	if b.Eval(t, fmt.Sprintf(`document.querySelector("table.extensions").textContent.includes(%q)`, w.extText), &shown); !shown {
		t.Errorf("the extension step does not say %q", w.extText)
	}
	for _, e := range w.check {
		b.Tick(t, `input[name=ext][value="`+e+`"]`)
	}
	if w.filter != "" {
		b.Eval(t, fmt.Sprintf(`document.querySelector("#filter").value = %q`, w.filter), nil)
		b.Click(t, "#filter-button")
		if p := step("extensions-filtered", "ext.heading"); !slices.Equal(p.Exts, w.checkAfter) {
			t.Errorf("filter %q lists %v", w.filter, p.Exts)
		}
	}
	for _, e := range w.checkAfter {
		b.Tick(t, `input[name=ext][value="`+e+`"]`)
	}
	b.Click(t, "#next")
	step("args", "args.heading")
	b.Eval(t, fmt.Sprintf(`document.querySelector("#args").value = %q`, w.badArgs), nil)
	b.Click(t, "#wizard button[type=submit]")
	if p := step("args-refused", "args.heading"); !strings.Contains(p.Error, msg["args.invalid"]) {
		t.Errorf("bad arguments %q: the page says %q", w.badArgs, p.Error)
	}
	var kept string
	if b.Eval(t, `document.querySelector("#args").value`, &kept); kept != w.badArgs {
		t.Errorf("the refused arguments were not kept: %q", kept)
	}
	b.Eval(t, fmt.Sprintf(`document.querySelector("#args").value = %q`, w.args), nil)
	b.Click(t, "#wizard button[type=submit]")
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

// browserPage reads what the test checks of the page the browser shows.
func browserPage(t *testing.T, b *testbrowser.Browser) *uiPageInfo {
	t.Helper()
	var s string
	b.Eval(t, `JSON.stringify({
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
