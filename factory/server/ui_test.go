package server

import (
	"html"
	"io/fs"
	"maps"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unicode"

	"github.com/nodeforge/builder/api/extensions"
	"github.com/nodeforge/builder/api/platform"
	"github.com/nodeforge/builder/api/schematic"
	"github.com/nodeforge/builder/builder/compose"
	"github.com/nodeforge/builder/builder/media/secureboot"
	"github.com/nodeforge/builder/factory"
	"github.com/nodeforge/builder/internal/testutil"
	"github.com/nodeforge/builder/oci"
)

// uiTestServer is a factory with two releases known by their metadata
// only (the UI reads no image), and a real schematic store.
func uiTestServer(t *testing.T, externalURL string) (*Server, http.Handler) {
	t.Helper()
	cache, err := oci.CreateLayout(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	meta := map[string]extensions.Metadata{
		"cri":    {Name: "cri", Version: "1.7.0", Author: "Nodeforge", Description: "Container runtime <b>interface</b> & co"},
		"nvidia": {Name: "nvidia", Version: "550.1", Author: "Nodeforge", Description: "NVIDIA GPU drivers"},
		"zfs":    {Name: "zfs", Version: "2.2.4", Author: "Nodeforge", Description: "The ZFS file system"},
	}
	svc, err := factory.NewUnverified(factory.Options{Cache: cache, Releases: []factory.ReleaseStore{{Store: cache}}, ExternalURL: externalURL})
	if err != nil {
		t.Fatal(err)
	}
	s, err := newFront(svc, Options{})
	if err != nil {
		t.Fatal(err)
	}
	descs := map[string]map[string]string{"zfs": {"ru": "Файловая система ZFS"}}
	rels := []*factory.VerifiedRelease{{Version: "1.10.0", Branch: "p10", Params: compose.Params{Architectures: []string{"x86_64"}}, Extensions: []string{"cri"}},
		{Version: "1.11.0", Branch: "p11", Params: compose.Params{Architectures: []string{"x86_64", "aarch64"}}, Extensions: []string{"cri", "nvidia", "zfs"}}}
	for _, r := range rels {
		r.SetExtensionMetadata(meta, descs)
	}
	svc.ServeUnverified(rels...)
	mux := http.NewServeMux()
	s.uiRoutes(mux)
	return s, testutil.NoLocalPaths(t, mux)
}

// uiDo sends a request and returns the response and its body.
func uiDo(t *testing.T, h http.Handler, method, target string, form url.Values, hdr ...string) (*http.Response, string) {
	t.Helper()
	var req *http.Request
	if form != nil {
		req = httptest.NewRequest(method, target, strings.NewReader(form.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	} else {
		req = httptest.NewRequest(method, target, nil)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		if hdr[i] == "Host" {
			req.Host = hdr[i+1]
			continue
		}
		req.Header.Add(hdr[i], hdr[i+1])
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec.Result(), rec.Body.String()
}

var (
	uiInputRE    = regexp.MustCompile(`<input type="(hidden|radio|checkbox)" name="([^"]+)" value="([^"]*)"([^>]*)>`)
	uiTextareaRE = regexp.MustCompile(`(?s)<textarea[^>]* name="([^"]+)"[^>]*>(.*?)</textarea>`)
	uiH1RE       = regexp.MustCompile(`<h1>([^<]*)</h1>`)
)

// uiFormValues is what the page's form would submit as it stands
// (hidden inputs, checked boxes, text areas): enough for our own pages.
func uiFormValues(page string) url.Values {
	v := url.Values{}
	for _, m := range uiInputRE.FindAllStringSubmatch(page, -1) {
		if m[1] == "hidden" || strings.Contains(m[4], " checked") {
			v.Add(m[2], html.UnescapeString(m[3]))
		}
	}
	for _, m := range uiTextareaRE.FindAllStringSubmatch(page, -1) {
		v.Set(m[1], html.UnescapeString(m[2]))
	}
	return v
}

func uiH1(page string) string {
	m := uiH1RE.FindStringSubmatch(page)
	if m == nil {
		return ""
	}
	return html.UnescapeString(m[1])
}

// TestUICatalogs: every message the templates and the code use is in
// every catalog, the catalogs have the same keys and no unused one, the
// same format verbs per message, and the Russian is Russian.
func TestUICatalogs(t *testing.T) {
	used := map[string]bool{}
	tplKey := regexp.MustCompile(`\bt "([^"]+)"`)
	tpls, err := fs.Glob(uiFS, "ui/*.html")
	if err != nil || len(tpls) == 0 {
		t.Fatalf("templates: %v %v", tpls, err)
	}
	for _, name := range tpls {
		b, _ := fs.ReadFile(uiFS, name)
		for _, m := range tplKey.FindAllStringSubmatch(string(b), -1) {
			used[m[1]] = true
		}
	}
	// Literal keys in the code: strings shaped like keys in a catalog's
	// namespaces.
	namespaces := map[string]bool{}
	for k := range uiCatalogs["en"] {
		ns, _, _ := strings.Cut(k, ".")
		namespaces[ns] = true
	}
	src, err := os.ReadFile("ui.go")
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range regexp.MustCompile(`"([a-z0-9]+(?:\.[a-z0-9]+)+)"`).FindAllStringSubmatch(string(src), -1) {
		if ns, _, _ := strings.Cut(m[1], "."); namespaces[ns] {
			used[m[1]] = true
		}
	}
	// Keys the code makes.
	for _, s := range uiSteps {
		used["step."+s] = true
	}
	for _, code := range []int{400, 404, 413, 429, 500, 507} {
		used["err.status."+strconv.Itoa(code)] = true
	}
	for _, p := range platform.All {
		used["platform."+p.Name] = true
		for _, d := range uiDownloads(p) {
			used["format."+d] = true
		}
	}
	verbs := regexp.MustCompile(`%[a-zA-Z]`)
	for _, l := range uiLanguages {
		cat := uiCatalogs[l.Code]
		for k := range used {
			if _, ok := cat[k]; !ok {
				t.Errorf("%s catalog lacks %q", l.Code, k)
			}
		}
		for k, m := range cat {
			if !used[k] {
				t.Errorf("%s catalog has %q, which nothing uses", l.Code, k)
			}
			if strings.TrimSpace(m) == "" {
				t.Errorf("%s: %q is empty", l.Code, k)
			}
			if en := uiCatalogs["en"][k]; !slices.Equal(verbs.FindAllString(m, -1), verbs.FindAllString(en, -1)) {
				t.Errorf("%s: %q has the verbs %v, English %v", l.Code, k, verbs.FindAllString(m, -1), verbs.FindAllString(en, -1))
			}
			if l.Code == "ru" && !strings.ContainsFunc(m, func(r rune) bool { return unicode.Is(unicode.Cyrillic, r) }) {
				t.Errorf("ru: %q is not Russian: %q", k, m)
			}
		}
	}
	if !maps.EqualFunc(uiCatalogs["en"], uiCatalogs["ru"], func(string, string) bool { return true }) {
		t.Errorf("the catalogs have different keys")
	}
}

// TestUILanguage: ?lang= (remembered in a cookie) before the cookie,
// before Accept-Language, before English.
func TestUILanguage(t *testing.T) {
	for h, want := range map[string]string{
		"":                                    "",
		"ru":                                  "ru",
		"RU-ru":                               "ru",
		"ru-RU,ru;q=0.9,en-US;q=0.8,en;q=0.7": "ru",
		"en;q=0.5, ru;q=0.8":                  "ru",
		"de-DE, ru;q=0.1":                     "ru",
		"de, fr;q=0.9":                        "",
		"ru;q=0, en;q=0.1":                    "en",
		"*":                                   "en",
		"ru;q=nonsense":                       "",
		"en-GB;q=0.9, ru-RU;q=0.9":            "en",
		"ru ; q=0.3 , de":                     "ru",
		"ru;x=1;q=0.2, en;q=0.1":              "ru",
		"ru;x=1;q=0, en;q=0.1":                "en",
	} {
		if got := uiAcceptLanguage(h); got != want {
			t.Errorf("Accept-Language %q: %q, want %q", h, got, want)
		}
	}
	_, h := uiTestServer(t, "")
	for _, c := range []struct {
		query, cookie, accept, want string
		setsCookie                  bool
	}{
		{"", "", "", "en", false},
		{"", "", "ru-RU,ru;q=0.9", "ru", false},
		{"", "ru", "en", "ru", false},
		{"", "xx", "ru", "ru", false},
		{"lang=en", "ru", "ru", "en", true},
		{"lang=ru", "en", "en", "ru", true},
		{"lang=de", "ru", "en", "ru", false},
	} {
		var hdr []string
		if c.cookie != "" {
			hdr = append(hdr, "Cookie", "lang="+c.cookie)
		}
		if c.accept != "" {
			hdr = append(hdr, "Accept-Language", c.accept)
		}
		resp, body := uiDo(t, h, "GET", "/?"+c.query, nil, hdr...)
		title := uiCatalogs[c.want]["version.heading"]
		if resp.StatusCode != 200 || !strings.Contains(body, `<html lang="`+c.want+`">`) || uiH1(body) != title {
			t.Errorf("%+v: %d, h1 %q, want %s", c, resp.StatusCode, uiH1(body), c.want)
		}
		var cookie *http.Cookie
		for _, ck := range resp.Cookies() {
			if ck.Name == "lang" {
				cookie = ck
			}
		}
		if c.setsCookie != (cookie != nil) || cookie != nil && (cookie.Value != c.want || cookie.Path != "/" || !cookie.HttpOnly) {
			t.Errorf("%+v: cookie %v", c, cookie)
		}
		if resp.Header.Get("Content-Language") != c.want || !strings.Contains(resp.Header.Get("Vary"), "Accept-Language") {
			t.Errorf("%+v: headers %v", c, resp.Header)
		}
	}
}

// TestUISteps: each step shows its choices and carries the earlier ones;
// the extension filter works on the server, keeps the chosen extensions
// it hides, and the release's texts are escaped.
func TestUISteps(t *testing.T) {
	_, h := uiTestServer(t, "")
	_, body := uiDo(t, h, "GET", "/?lang=ru", nil)
	for _, want := range []string{"Ветка p10", "Ветка p11", `value="v1.11.0" required checked`, `value="v1.10.0" required>`,
		`<input type="hidden" name="lang" value="ru">`, `<input type="hidden" name="step" value="arch">`, `<link rel="stylesheet" href="/ui/style.css">`} {
		if !strings.Contains(body, want) {
			t.Errorf("version step lacks %s:\n%s", want, body)
		}
	}
	_, body = uiDo(t, h, "GET", "/?lang=ru&version=1.11.0&step=arch", nil)
	if uiH1(body) != "Выберите архитектуру" || !strings.Contains(body, `value="amd64" required checked> amd64 (x86_64)`) || !strings.Contains(body, `value="arm64" required> arm64 (aarch64)`) {
		t.Errorf("arch step:\n%s", body)
	}
	_, body = uiDo(t, h, "GET", "/?lang=ru&version=1.11.0&arch=amd64&step=platform", nil)
	for _, p := range platform.All {
		if !strings.Contains(body, `value="`+p.Name+`"`) || !strings.Contains(body, html.EscapeString(uiCatalogs["ru"]["platform."+p.Name])) {
			t.Errorf("platform step lacks %s", p.Name)
		}
	}
	if !strings.Contains(body, "Файлы для скачивания: iso, raw.zst, qcow2") || !strings.Contains(body, "Файлы для скачивания: vhd.xz") {
		t.Errorf("platform step lacks the formats:\n%s", body)
	}
	_, body = uiDo(t, h, "GET", "/?version=1.11.0&arch=amd64&platform=metal", nil)
	if uiH1(body) != uiCatalogs["en"]["ext.heading"] || strings.Count(body, `type="checkbox" name="ext"`) != 3 ||
		!strings.Contains(body, "Container runtime &lt;b&gt;interface&lt;/b&gt; &amp; co") || strings.Contains(body, "<b>interface") {
		t.Errorf("extension step:\n%s", body)
	}
	// cri chosen, then a filter that hides it: kept as a hidden input.
	_, body = uiDo(t, h, "GET", "/?version=1.11.0&arch=amd64&platform=metal&ext=cri&filter=FILE+system&step=extensions", nil)
	if strings.Count(body, `type="checkbox" name="ext"`) != 1 || !strings.Contains(body, `value="zfs">`) ||
		!strings.Contains(body, `<input type="hidden" name="ext" value="cri">`) || !strings.Contains(body, "Selected, hidden by the filter: cri") {
		t.Errorf("filtered extension step:\n%s", body)
	}
	if v := uiFormValues(body); !slices.Equal(v["ext"], []string{"cri"}) || v.Get("platform") != "metal" || v.Get("version") != "1.11.0" {
		t.Errorf("filtered extension step submits %v", v)
	}
	// Descriptions in the reader's language where the release has them.
	_, body = uiDo(t, h, "GET", "/?lang=ru&version=1.11.0&arch=amd64&platform=metal&filter=%D1%84%D0%B0%D0%B9%D0%BB%D0%BE%D0%B2%D0%B0%D1%8F", nil)
	if strings.Count(body, `type="checkbox" name="ext"`) != 1 || !strings.Contains(body, "<td>Файловая система ZFS</td>") {
		t.Errorf("a description in Russian:\n%s", body)
	}
	_, body = uiDo(t, h, "GET", "/?lang=ru&version=1.11.0&arch=amd64&platform=metal&filter=%3Cscript%3E", nil)
	if !strings.Contains(body, "Ни одно расширение не подходит под «&lt;script&gt;».") || strings.Contains(body, "<script") {
		t.Errorf("no match:\n%s", body)
	}
	// An extension of another release is dropped, with a notice.
	_, body = uiDo(t, h, "GET", "/?version=1.10.0&arch=amd64&platform=metal&ext=zfs&ext=cri&step=args", nil)
	if uiH1(body) != "Kernel arguments" || !strings.Contains(body, "Release v1.10.0 has no extension zfs") || !slices.Equal(uiFormValues(body)["ext"], []string{"cri"}) {
		t.Errorf("args step of another release:\n%s", body)
	}
	// A step whose choices are missing shows the first missing one.
	if _, body = uiDo(t, h, "GET", "/?version=1.11.0&step=final", nil); uiH1(body) != "Choose the architecture" {
		t.Errorf("final without an architecture: %q", uiH1(body))
	}
	if _, body = uiDo(t, h, "GET", "/?step=platform", nil); uiH1(body) != "Choose a release" {
		t.Errorf("platform without a version: %q", uiH1(body))
	}
}

// TestUIErrors: what names nothing served is a 404 page in the reader's
// language, a malformed schematic ID a 400.
func TestUIErrors(t *testing.T) {
	_, h := uiTestServer(t, "")
	for _, c := range []struct {
		query string
		code  int
		en    string
		ru    string
	}{
		{"version=9.9.9", 404, "Version “9.9.9” is not served by this factory.", "Версии «9.9.9» на этой фабрике нет."},
		{"version=1.10.0&arch=arm64", 404, "Release v1.10.0 has no architecture “arm64” (it has x86_64).", "В выпуске v1.10.0 нет архитектуры «arm64» (есть: x86_64)."},
		{"version=1.11.0&arch=amd64&platform=mars", 404, "There is no platform “mars”", "Платформы «mars» нет"},
		{"schematic-id=" + strings.Repeat("0", 64), 404, "This factory knows no schematic 000", "Схема 000"},
		{"schematic-id=..%2Fetc", 400, "“../etc” is not a schematic ID", "«../etc» — не идентификатор схемы"},
	} {
		for lang, want := range map[string]string{"en": c.en, "ru": c.ru} {
			resp, body := uiDo(t, h, "GET", "/?lang="+lang+"&"+c.query, nil)
			if resp.StatusCode != c.code || !strings.Contains(body, html.EscapeString(want)) || uiH1(body) != uiCatalogs[lang]["err.status."+strconv.Itoa(c.code)] {
				t.Errorf("%s in %s: %d, want %d saying %q:\n%s", c.query, lang, resp.StatusCode, c.code, want, body)
			}
		}
	}
	if resp, _ := uiDo(t, h, "GET", "/elsewhere", nil); resp.StatusCode != 404 {
		t.Errorf("GET /elsewhere: %d, want 404 (the wizard is at / only)", resp.StatusCode)
	}
	if resp, body := uiDo(t, h, "GET", "/ui/style.css", nil); resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/css") || !strings.Contains(body, "body {") {
		t.Errorf("style.css: %d %s", resp.StatusCode, resp.Header)
	}
	resp, _ := uiDo(t, h, "GET", "/", nil)
	if csp := resp.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "default-src 'none'") || strings.Contains(csp, "script-src") {
		t.Errorf("Content-Security-Policy: %q", csp)
	}
	// Forms that lack their earlier choices, or are too large.
	if resp, body := uiDo(t, h, "POST", "/ui/schematic", url.Values{"args": {"a=b"}}); resp.StatusCode != 400 || !strings.Contains(body, "The form could not be read.") {
		t.Errorf("POST without a version: %d\n%s", resp.StatusCode, body)
	}
	big := url.Values{"version": {"1.11.0"}, "arch": {"amd64"}, "platform": {"metal"}, "args": {strings.Repeat("a", uiMaxForm)}}
	if resp, body := uiDo(t, h, "POST", "/ui/schematic", big); resp.StatusCode != 413 || !strings.Contains(body, "The form is larger than 65536 bytes.") {
		t.Errorf("POST too large: %d\n%s", resp.StatusCode, body)
	}
	bad := url.Values{"version": {"1.11.0"}, "arch": {"amd64"}, "platform": {"metal"}, "ext": {"gpu-magic"}, "lang": {"ru"}}
	if resp, body := uiDo(t, h, "POST", "/ui/schematic", bad); resp.StatusCode != 400 || !strings.Contains(body, "В выпуске v1.11.0 нет расширения «gpu-magic».") {
		t.Errorf("POST with an unknown extension: %d\n%s", resp.StatusCode, body)
	}
}

// TestUIKernelArgs: arguments over the bounds, or with characters the
// command line cannot carry, stay on their step with the reasons, in the
// reader's language, and nothing is stored.
func TestUIKernelArgs(t *testing.T) {
	s, h := uiTestServer(t, "")
	many := strings.TrimSpace(strings.Repeat("a=1 ", uiMaxArgs+1))
	long := "x=" + strings.Repeat("y", uiMaxArgLen)
	total := strings.TrimSpace(strings.Repeat("k="+strings.Repeat("v", 100)+" ", 11))
	for _, c := range []struct{ args, en, ru string }{
		{many, "Too many kernel arguments: 33 (at most 32).", "Слишком много аргументов ядра: 33 (допустимо не более 32)."},
		{long, "is too long: 258 bytes (at most 256).", "слишком длинный: 258 байт (допустимо не более 256)."},
		{total, "The arguments take 1132 bytes together (at most 1024).", "Все аргументы вместе занимают 1132 байт (допустимо не более 1024)."},
		{`init="/bin/sh"`, "Argument “init=\"/bin/sh\"” holds a character that is not allowed: \" (U+0022).", "Аргумент «init=\"/bin/sh\"» содержит недопустимый символ: \" (U+0022)."},
		{"hostname=узел", "holds a character that is not allowed: у (U+0443).", "содержит недопустимый символ: у (U+0443)."},
		{`a\b`, `holds a character that is not allowed: \ (U+005C).`, `содержит недопустимый символ: \ (U+005C).`},
		{"a=\u200bb", "holds a character that is not allowed: U+200B.", "содержит недопустимый символ: U+200B."},
	} {
		for lang, want := range map[string]string{"en": c.en, "ru": c.ru} {
			form := url.Values{"lang": {lang}, "version": {"1.11.0"}, "arch": {"amd64"}, "platform": {"metal"}, "ext": {"zfs"}, "args": {c.args}}
			resp, body := uiDo(t, h, "POST", "/ui/schematic", form)
			if resp.StatusCode != 200 || uiH1(body) != uiCatalogs[lang]["args.heading"] || !strings.Contains(html.UnescapeString(body), want) ||
				!strings.Contains(body, `role="alert"`) || !strings.Contains(body, `aria-invalid="true"`) {
				t.Errorf("%.40q in %s: %d, want the step again saying %q:\n%s", c.args, lang, resp.StatusCode, want, body)
				continue
			}
			// Still on the step, with what was typed and the choices.
			if v := uiFormValues(body); v.Get("args") != c.args || v.Get("version") != "1.11.0" || !slices.Equal(v["ext"], []string{"zfs"}) {
				t.Errorf("%.40q: the form keeps %v", c.args, v)
			}
		}
	}
	if n, _ := s.svc.SchematicCounts(); n != 0 {
		t.Errorf("bad arguments stored %d schematics", n)
	}
	if msgs := uiCheckArgs(strings.Fields("console=ttyS0,115200n8 ip=[fd00::2]::[fd00::1]:64:node:eth0:off nodeforge.config=https://x/c?a=b&c=d")); msgs != nil {
		t.Errorf("good arguments refused: %v", msgs)
	}
}

// TestUIRoundTrip: the wizard's POST stores the schematic under the ID
// the API gives and redirects to its page; that page's address reloads
// it, carries every download, and its edit link restores the choices.
func TestUIRoundTrip(t *testing.T) {
	for _, ext := range []string{"", "https://factory.example.org/f/"} {
		s, h := uiTestServer(t, ext)
		prefix := strings.TrimSuffix(ext, "/")
		form := url.Values{"lang": {"ru"}, "version": {"1.11.0"}, "arch": {"amd64"}, "platform": {"metal"}, "ext": {"zfs", "cri"},
			"args": {"console=ttyS0\r\n  nodeforge.dashboard=off "}}
		resp, _ := uiDo(t, h, "POST", "/ui/schematic", form)
		want, _ := schematic.Parse([]byte("customization:\n  extraKernelArgs: [console=ttyS0, nodeforge.dashboard=off]\n  systemExtensions:\n    officialExtensions: [cri, zfs]\n"))
		id, _ := want.ID()
		loc := resp.Header.Get("Location")
		if resp.StatusCode != http.StatusSeeOther || loc != "/f/?arch=amd64&lang=ru&platform=metal&schematic-id="+id+"&version=1.11.0" && ext != "" ||
			ext == "" && loc != "/?arch=amd64&lang=ru&platform=metal&schematic-id="+id+"&version=1.11.0" {
			t.Fatalf("POST: %d, Location %q, want the page of %s", resp.StatusCode, loc, id)
		}
		if _, err := s.svc.Schematic(t.Context(), id); err != nil {
			t.Fatalf("not stored: %v", err)
		}
		loc = strings.TrimPrefix(loc, "/f")
		resp, body := uiDo(t, h, "GET", loc, nil, "Host", "factory.test:8080")
		canon, _ := want.Canonical()
		img := prefix + "/image/" + id + "/v1.11.0/"
		host := "factory.test:8080"
		if ext != "" {
			host = "factory.example.org/f" // as the installer's signature names it
		}
		pxe := map[bool]string{true: "http://factory.test:8080/pxe/", false: prefix + "/pxe/"}[ext == ""] + id + "/v1.11.0/metal-amd64"
		for _, w := range []string{
			`<h1>Ваш образ</h1>`, `<code class="id" id="schematic-id">` + id + `</code>`, html.EscapeString(string(canon)),
			`href="` + img + `metal-amd64.iso"`, `href="` + img + `metal-amd64.iso.sha256"`, `href="` + img + `metal-amd64.raw.zst"`,
			`href="` + img + `metal-amd64.qcow2.sha512"`, `href="` + img + `kernel-amd64"`, `href="` + img + `initramfs-amd64.xz"`,
			`href="` + img + `cmdline-metal-amd64"`, `<a href="` + map[bool]string{true: "/pxe/" + id + "/v1.11.0/metal-amd64", false: pxe}[ext == ""] + `" id="pxe">` + pxe + `</a>`,
			`<code id="installer">` + host + `/installer/` + id + `:v1.11.0</code>`, "<dd>cri, zfs</dd>", "<code>console=ttyS0 nodeforge.dashboard=off</code>",
			`<link rel="stylesheet" href="` + strings.TrimPrefix(prefix, "https://factory.example.org") + `/ui/style.css">`,
		} {
			if !strings.Contains(body, w) {
				t.Errorf("%q: the final page lacks %s:\n%s", ext, w, body)
			}
		}
		if resp.StatusCode != 200 || strings.Contains(body, ".sig\"") {
			t.Errorf("final page: %d (no signing key: no .sig links)", resp.StatusCode)
		}
		// The edit link: the extension step with the schematic's choices.
		m := regexp.MustCompile(`<a href="([^"]+)" id="edit">`).FindStringSubmatch(body)
		if m == nil {
			t.Fatalf("no edit link")
		}
		edit := strings.TrimPrefix(html.UnescapeString(m[1]), "/f")
		_, body = uiDo(t, h, "GET", edit, nil)
		if uiH1(body) != "Выберите системные расширения" || !strings.Contains(body, `value="cri" checked>`) || !strings.Contains(body, `value="zfs" checked>`) || strings.Contains(body, `value="nvidia" checked>`) {
			t.Errorf("edit link %s:\n%s", edit, body)
		}
		v := uiFormValues(body)
		v.Set("step", "args")
		if _, body = uiDo(t, h, "GET", "/?"+v.Encode(), nil); uiFormValues(body).Get("args") != "console=ttyS0 nodeforge.dashboard=off" {
			t.Errorf("the args step after editing: %v", uiFormValues(body))
		}
	}
}

// TestUIReload: ?schematic-id= alone reloads a schematic into the wizard,
// which asks for the version, the architecture and the platform and
// shows its downloads; the empty schematic has Talos's default ID.
func TestUIReload(t *testing.T) {
	_, h := uiTestServer(t, "")
	resp, _ := uiDo(t, h, "POST", "/ui/schematic", url.Values{"version": {"1.10.0"}, "arch": {"x86_64"}, "platform": {"aws"}})
	const def = "376567988ad370138ad8b2698212367b8edcb69b5fd68c80be1f2ec7d603b4ba"
	if loc := resp.Header.Get("Location"); !strings.Contains(loc, "schematic-id="+def) {
		t.Fatalf("empty schematic: %d %s", resp.StatusCode, loc)
	}
	_, body := uiDo(t, h, "GET", "/?schematic-id="+def, nil)
	if uiH1(body) != "Choose a release" || !strings.Contains(body, "Schematic "+def+" is loaded") {
		t.Fatalf("reload:\n%s", body)
	}
	// Walk the forms as a browser would.
	for i, choose := range []url.Values{{"version": {"v1.10.0"}}, {"arch": {"amd64"}}, {"platform": {"aws"}}} {
		v := uiFormValues(body)
		for k, vs := range choose {
			v[k] = vs
		}
		_, body = uiDo(t, h, "GET", "/?"+v.Encode(), nil)
		if i < 2 && v.Get("schematic-id") != def {
			t.Errorf("step %d lost the schematic: %v", i, v)
		}
	}
	for _, w := range []string{"<h1>Your image</h1>", def, "This is the standard image", `href="/image/` + def + `/v1.10.0/aws-amd64.raw.xz"`} {
		if !strings.Contains(body, w) {
			t.Errorf("reloaded final page lacks %s:\n%s", w, body)
		}
	}
	if strings.Contains(body, ".iso") {
		t.Errorf("aws offers an ISO")
	}
}

// TestUISecureBoot: a factory with a Secure Boot key set offers, on the
// final page, the platform's Secure Boot media, the signed UKI, the Secure
// Boot installer and the certificate to enrol; without one, nothing of it.
func TestUISecureBoot(t *testing.T) {
	s, h := uiTestServer(t, "")
	const def = "376567988ad370138ad8b2698212367b8edcb69b5fd68c80be1f2ec7d603b4ba"
	final := "/?arch=amd64&lang=en&platform=metal&schematic-id=" + def + "&version=1.11.0"
	uiDo(t, h, "POST", "/ui/schematic", url.Values{"version": {"1.11.0"}, "arch": {"x86_64"}, "platform": {"metal"}})
	if _, body := uiDo(t, h, "GET", final, nil); uiH1(body) != "Your image" || strings.Contains(body, "-secureboot.") || !strings.Contains(body, `id="secureboot-none"`) {
		t.Fatalf("without a key set:\n%s", body)
	}
	s.o.SecureBoot = &secureboot.Signing{}
	_, body := uiDo(t, h, "GET", final, nil, "Host", "factory.test:8080")
	img := `href="/image/` + def + `/v1.11.0/`
	for _, w := range []string{"<h2>Secure Boot</h2>", img + `metal-amd64-secureboot.iso"`, img + `metal-amd64-secureboot.raw.zst.sha256"`,
		img + `metal-amd64-secureboot-uki.efi"`, `<a href="/secureboot/signing-cert.pem" id="secureboot-cert">`,
		`<code id="secureboot-installer">factory.test:8080/installer-secureboot/` + def + `:v1.11.0</code>`} {
		if !strings.Contains(body, w) {
			t.Errorf("the final page lacks %s:\n%s", w, body)
		}
	}
}

// TestUIReleasePlatforms: the platform step offers the release's table: a
// platform its spec adds, with its own description (escaped), beside
// Talos's in the reader's language; its downloads and installer are on the
// final page; another release does not offer it.
func TestUIReleasePlatforms(t *testing.T) {
	s, h := uiTestServer(t, "")
	table, err := platform.Talos.Override("", []platform.Platform{{Name: "mycloud", Formats: []string{"qcow2"}, Description: "My <cloud>: a qcow2 image"}})
	if err != nil {
		t.Fatal(err)
	}
	s.svc.Release("1.11.0").Platforms = table
	_, body := uiDo(t, h, "GET", "/?lang=ru&version=1.11.0&arch=amd64&step=platform", nil)
	for _, want := range []string{`value="mycloud"`, "My &lt;cloud&gt;: a qcow2 image", html.EscapeString(uiCatalogs["ru"]["platform.metal"])} {
		if !strings.Contains(body, want) {
			t.Errorf("platform step lacks %s:\n%s", want, body)
		}
	}
	if _, body = uiDo(t, h, "GET", "/?version=1.10.0&arch=amd64&step=platform", nil); strings.Contains(body, "mycloud") {
		t.Errorf("1.10.0 offers mycloud:\n%s", body)
	}
	resp, body := uiDo(t, h, "GET", "/?version=1.10.0&arch=amd64&platform=mycloud", nil)
	if resp.StatusCode != 404 || !strings.Contains(body, html.EscapeString("There is no platform “mycloud”")) {
		t.Errorf("mycloud of 1.10.0: %d\n%s", resp.StatusCode, body)
	}
	resp, _ = uiDo(t, h, "POST", "/ui/schematic", url.Values{"version": {"1.11.0"}, "arch": {"amd64"}, "platform": {"mycloud"}})
	loc := resp.Header.Get("Location")
	if resp.StatusCode != http.StatusSeeOther || !strings.Contains(loc, "platform=mycloud") {
		t.Fatalf("POST: %d %s", resp.StatusCode, loc)
	}
	const def = "376567988ad370138ad8b2698212367b8edcb69b5fd68c80be1f2ec7d603b4ba"
	_, body = uiDo(t, h, "GET", loc, nil, "Host", "factory.test")
	for _, want := range []string{`href="/image/` + def + `/v1.11.0/mycloud-amd64.qcow2"`, `href="/image/` + def + `/v1.11.0/cmdline-mycloud-amd64"`,
		"factory.test/mycloud-installer/" + def + ":v1.11.0"} {
		if !strings.Contains(body, want) {
			t.Errorf("the final page lacks %s:\n%s", want, body)
		}
	}
}

// TestUISingleChoices: a factory with one release of one architecture
// chooses both without a page (saying so), keeps the steps reachable from
// the progress list, and Back skips them: Back leaves each page for the
// page before it, and the final page's Back is the kernel arguments' step,
// filled in from the schematic.
func TestUISingleChoices(t *testing.T) {
	s, h := uiTestServer(t, "")
	s.svc.ServeUnverified(s.svc.Release("1.10.0"))
	_, body := uiDo(t, h, "GET", "/?lang=en", nil)
	if uiH1(body) != uiCatalogs["en"]["platform.heading"] || !strings.Contains(body, "This factory serves one release, v1.10.0") ||
		!strings.Contains(body, "Release v1.10.0 is built for one architecture, amd64") {
		t.Fatalf("the first page is not the platform's:\n%s", body)
	}
	if v := uiFormValues(body); v.Get("version") != "v1.10.0" || v.Get("arch") != "amd64" {
		t.Errorf("the platform step submits %v", v)
	}
	for _, step := range []string{"version", "arch"} {
		if !strings.Contains(body, `<li class="done"><a href="/?arch=amd64&amp;lang=en&amp;step=`+step+`&amp;version=v1.10.0">`) {
			t.Errorf("the progress list does not reach %s:\n%s", step, body)
		}
	}
	if strings.Contains(body, `class="back"`) {
		t.Errorf("the platform step has a Back with nothing before it:\n%s", body)
	}
	if _, body = uiDo(t, h, "GET", "/?lang=en&version=v1.10.0&arch=amd64&step=arch", nil); uiH1(body) != uiCatalogs["en"]["arch.heading"] {
		t.Errorf("the arch step asked for: %q", uiH1(body))
	}
	_, body = uiDo(t, h, "GET", "/?version=v1.10.0&arch=amd64&platform=metal&step=extensions", nil)
	if !strings.Contains(body, `<a class="back" href="/?arch=amd64&amp;platform=metal&amp;step=platform&amp;version=v1.10.0">`) {
		t.Errorf("Back of the extension step:\n%s", body)
	}
	resp, _ := uiDo(t, h, "POST", "/ui/schematic", url.Values{"version": {"v1.10.0"}, "arch": {"amd64"}, "platform": {"metal"}, "ext": {"cri"}, "args": {`console=ttyS0`}})
	_, body = uiDo(t, h, "GET", resp.Header.Get("Location"), nil)
	m := regexp.MustCompile(`<a class="back" href="([^"]+)">`).FindStringSubmatch(body)
	if m == nil {
		t.Fatalf("the final page has no Back:\n%s", body)
	}
	_, body = uiDo(t, h, "GET", html.UnescapeString(m[1]), nil)
	if v := uiFormValues(body); uiH1(body) != uiCatalogs["en"]["args.heading"] || v.Get("args") != "console=ttyS0" || !slices.Equal(v["ext"], []string{"cri"}) {
		t.Errorf("Back from the final page: %q, submits %v", uiH1(body), v)
	}
	// Two releases: the version step is a page again, and Back reaches it.
	s, h = uiTestServer(t, "")
	if _, body = uiDo(t, h, "GET", "/?version=1.10.0&step=platform", nil); !strings.Contains(body, `<a class="back" href="/?arch=amd64&amp;step=version&amp;version=1.10.0">`) {
		t.Errorf("Back of the platform step with two releases:\n%s", body)
	}
}
