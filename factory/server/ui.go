package server

import (
	"bytes"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"net/http"
	"net/url"
	"path"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/nodeforge/builder/factory"

	"github.com/nodeforge/builder/api/platform"
	"github.com/nodeforge/builder/api/schematic"
	"github.com/nodeforge/builder/api/specs"
	"github.com/nodeforge/builder/builder/compose"
)

// The web UI: a wizard of plain HTML forms whose whole state is in the
// URL, so it works without JavaScript and any page can be bookmarked or
// shared. Its texts come from one message catalog per language.

//go:embed ui/*.html ui/style.css ui/locales/*.json
var uiFS embed.FS

// uiLanguages are the UI's languages, each named in itself; the first is
// the default.
var uiLanguages = []struct{ Code, Name string }{{"en", "English"}, {"ru", "Русский"}}

// uiSteps are the wizard's steps in order.
var uiSteps = []string{"version", "arch", "platform", "extensions", "args", "final"}

// Bounds of what the UI accepts: the kernel's command line is 2 KiB on
// x86 and the release and the platform take their share of it. (The API
// accepts any schematic, as upstream's: these guard the wizard's users.)
const (
	uiMaxArgs      = 32
	uiMaxArgLen    = 256
	uiMaxArgsTotal = 1024 // bytes, joined by spaces
	uiMaxFilter    = 100
	uiMaxForm      = 64 << 10
)

var uiCatalogs, uiTemplates = uiLoad()

// uiLoad reads the catalogs and parses the templates once per language
// (each language's templates call its own catalog). The files are
// embedded: a broken one fails every test, hence the panic.
func uiLoad() (map[string]map[string]string, map[string]*template.Template) {
	cats := map[string]map[string]string{}
	tpls := map[string]*template.Template{}
	for _, l := range uiLanguages {
		b, err := uiFS.ReadFile("ui/locales/" + l.Code + ".json")
		if err != nil {
			panic(err)
		}
		cat := map[string]string{}
		if err := json.Unmarshal(b, &cat); err != nil {
			panic(fmt.Sprintf("ui/locales/%s.json: %v", l.Code, err))
		}
		cats[l.Code] = cat
	}
	for _, l := range uiLanguages {
		t := uiTranslator(cats, l.Code)
		funcs := template.FuncMap{
			"t":    t,
			"msg":  func(m uiMsg) string { return t(m.Key, m.Args...) },
			"join": strings.Join,
		}
		tpls[l.Code] = template.Must(template.New("layout.html").Funcs(funcs).ParseFS(uiFS, "ui/*.html"))
	}
	return cats, tpls
}

// uiTranslator looks a message up in lang's catalog, then in the
// default's (a test keeps the catalogs complete; a gap must not break a
// page), and formats it with args.
func uiTranslator(cats map[string]map[string]string, lang string) func(string, ...any) string {
	return func(key string, args ...any) string {
		m, ok := cats[lang][key]
		if !ok {
			if m, ok = cats[uiLanguages[0].Code][key]; !ok {
				return key
			}
		}
		if len(args) == 0 {
			return m
		}
		return fmt.Sprintf(m, args...)
	}
}

// uiMsg is a message to translate: a catalog key and its arguments.
type uiMsg struct {
	Key  string
	Args []any
}

func uiM(key string, args ...any) uiMsg { return uiMsg{Key: key, Args: args} }

// uiRoutes registers the UI's routes on the API's mux.
func (s *Server) uiRoutes(mux *http.ServeMux) {
	mux.HandleFunc("GET /{$}", s.getUI)
	mux.HandleFunc("POST /ui/schematic", s.postUISchematic)
	mux.HandleFunc("GET /ui/style.css", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/css; charset=utf-8")
		w.Header().Set("Cache-Control", "public, max-age=3600")
		css, _ := fs.ReadFile(uiFS, "ui/style.css")
		http.ServeContent(w, r, "", time.Time{}, bytes.NewReader(css))
	})
}

// uiChooseLang picks the page's language: ?lang= (remembered in a
// cookie), then the cookie, then Accept-Language, then the default.
func uiChooseLang(w http.ResponseWriter, r *http.Request, form url.Values) string {
	if l := form.Get("lang"); uiKnownLang(l) {
		http.SetCookie(w, &http.Cookie{Name: "lang", Value: l, Path: "/", MaxAge: 365 * 24 * 3600,
			HttpOnly: true, Secure: r.TLS != nil, SameSite: http.SameSiteLaxMode})
		return l
	}
	if c, err := r.Cookie("lang"); err == nil && uiKnownLang(c.Value) {
		return c.Value
	}
	if l := uiAcceptLanguage(r.Header.Get("Accept-Language")); l != "" {
		return l
	}
	return uiLanguages[0].Code
}

func uiKnownLang(code string) bool {
	return slices.ContainsFunc(uiLanguages, func(l struct{ Code, Name string }) bool { return l.Code == code })
}

// uiAcceptLanguage is the known language an Accept-Language header
// prefers most ("" for none): the highest q wins, the first of equals,
// "ru-RU" counts as "ru", "*" as the default and q=0 as refused.
func uiAcceptLanguage(h string) string {
	best, bestQ := "", 0.0
	for i, part := range strings.Split(h, ",") {
		if i == 32 {
			break // a header that long is not a browser's
		}
		tag, params, _ := strings.Cut(part, ";")
		q := 1.0
		for p := range strings.SplitSeq(params, ";") {
			if k, v, ok := strings.Cut(p, "="); ok && strings.TrimSpace(k) == "q" {
				f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
				if err != nil || f < 0 || f > 1 {
					f = 0
				}
				q = f
			}
		}
		primary, _, _ := strings.Cut(strings.ToLower(strings.TrimSpace(tag)), "-")
		if primary == "*" {
			primary = uiLanguages[0].Code
		}
		if uiKnownLang(primary) && q > bestQ {
			best, bestQ = primary, q
		}
	}
	return best
}

// uiState is the wizard's state, carried in the URL (and in the forms'
// hidden inputs).
type uiState struct {
	Lang        string // only when the URL names it: shared links do not pin it
	SchematicID string
	Version     string
	Arch        string
	Platform    string
	Exts        []string
	Args        string // as typed
	Filter      string
	Step        string
}

func uiStateFrom(v url.Values) uiState {
	st := uiState{Lang: v.Get("lang"), SchematicID: v.Get("schematic-id"), Version: v.Get("version"), Arch: v.Get("arch"),
		Platform: v.Get("platform"), Args: v.Get("args"), Filter: v.Get("filter"), Step: v.Get("step")}
	if !uiKnownLang(st.Lang) {
		st.Lang = ""
	}
	if len(st.Filter) > uiMaxFilter {
		st.Filter = strings.ToValidUTF8(st.Filter[:uiMaxFilter], "") // no half a letter
	}
	seen := map[string]bool{}
	for _, e := range v["ext"] {
		if e = strings.TrimSpace(e); e != "" && !seen[e] {
			seen[e] = true
			st.Exts = append(st.Exts, e)
		}
	}
	return st
}

// values are the state's URL parameters, with step as given.
func (st uiState) values(step string) url.Values {
	v := url.Values{}
	for _, kv := range st.Hidden() {
		v.Add(kv.Name, kv.Value)
	}
	if step != "" {
		v.Set("step", step)
	}
	return v
}

// uiKV is one hidden input.
type uiKV struct{ Name, Value string }

// Hidden are the state's inputs for a form, but for those the form asks
// for itself (skip); the step and the filter are never carried.
func (st uiState) Hidden(skip ...string) []uiKV {
	var out []uiKV
	add := func(name, value string) {
		if value != "" && !slices.Contains(skip, name) {
			out = append(out, uiKV{name, value})
		}
	}
	add("lang", st.Lang)
	add("schematic-id", st.SchematicID)
	add("version", st.Version)
	add("arch", st.Arch)
	add("platform", st.Platform)
	for _, e := range st.Exts {
		add("ext", e)
	}
	add("args", st.Args)
	return out
}

// uiPage is what a template renders.
type uiPage struct {
	Lang, Step string
	Status     int
	Prefix     string // the path the UI is below ("" at the root)
	State      uiState
	Self       url.Values // this page's parameters, for the language links
	Error      *uiMsg
	Notices    []uiMsg
	HasKey     bool

	Schematic  *schematic.Schematic
	Branches   []uiBranch
	Choices    []uiChoice
	Extensions []uiExtension
	HiddenExts []string
	ArgErrors  []uiMsg
	Limits     [3]int
	Final      *uiFinal

	// single are the steps whose choice was the only one: chosen without
	// a page, still reachable from the progress list, skipped by Back.
	single map[string]bool
}

type uiBranch struct {
	Name    string
	Choices []uiChoice
}

// uiChoice is one radio button; Detail is a message, else Text says it
// as it is (a platform a release's spec adds has no message).
type uiChoice struct {
	Value, Label string
	Detail       *uiMsg
	Text         string
	Formats      string
	Checked      bool
}

type uiExtension struct {
	Name, Version, Author, Description string
	Checked                            bool
}

// uiFinal is the last page: the schematic and its downloads.
type uiFinal struct {
	ID, YAML     string
	Default      bool
	Disks, Boot  []uiFile
	PXE, PXEText string
	Installer    string
	// PlatformInstaller is the platform's installer (its command line in).
	PlatformInstaller string
	Edit, SigningKey  string
	// SecureBoot is set when the factory signs Secure Boot media.
	SecureBoot *uiSecureBoot
	// Verify is the download the verification example names (the first
	// disk image, else the kernel).
	Verify uiFile
}

// uiSecureBoot is the final page's Secure Boot section: the signed
// media, the Secure Boot installer and the certificate to enrol.
type uiSecureBoot struct {
	Files           []uiFile
	Installer, Cert string
}

// uiFile is one download: Key says what it is.
type uiFile struct {
	Name, Key, Href string
	Sig             bool
}

// Title is the page's title, as a message.
func (p *uiPage) Title() uiMsg {
	if p.Error != nil {
		return uiM("err.status." + strconv.Itoa(p.Status))
	}
	return uiM("step." + p.Step)
}

// Home is the first step's address.
func (p *uiPage) Home() string { return p.link(uiState{Lang: p.State.Lang}, "") }

// Action is where the wizard's GET forms go.
func (p *uiPage) Action() string { return p.Prefix + "/" }

func (p *uiPage) link(st uiState, step string) string {
	if q := st.values(step).Encode(); q != "" {
		return p.Prefix + "/?" + q
	}
	return p.Prefix + "/"
}

// StepLink is the address of a step with the current state.
func (p *uiPage) StepLink(step string) string { return p.link(p.State, step) }

// Back is the address of the page before this one: the previous step
// that offered a choice (those with a single choice were not shown); ""
// when there is none. From the final page it is the kernel arguments' step,
// filled in from the schematic.
func (p *uiPage) Back() string {
	for i := slices.Index(uiSteps, p.Step) - 1; i >= 0; i-- {
		if !p.single[uiSteps[i]] {
			return p.StepLink(uiSteps[i])
		}
	}
	return ""
}

// ClearFilter is the extension step without its filter (links never
// carry it).
func (p *uiPage) ClearFilter() string { return p.StepLink("extensions") }

// uiLink is a link to this page in a language, or to a step.
type uiLink struct {
	Key, Name, Href, Class string
}

// Langs are the links to this page in every language.
func (p *uiPage) Langs() []uiLink {
	var out []uiLink
	for _, l := range uiLanguages {
		v := url.Values{}
		for k, vs := range p.Self {
			v[k] = vs
		}
		v.Set("lang", l.Code)
		c := ""
		if l.Code == p.Lang {
			c = "current"
		}
		out = append(out, uiLink{Key: l.Code, Name: l.Name, Href: p.Prefix + "/?" + v.Encode(), Class: c})
	}
	return out
}

// Steps are the wizard's progress: each step's label key and, for steps
// done, its address.
func (p *uiPage) Steps() []uiLink {
	cur := slices.Index(uiSteps, p.Step)
	if cur < 0 || p.Error != nil {
		return nil
	}
	var out []uiLink
	for i, name := range uiSteps {
		s := uiLink{Key: "step." + name, Class: "todo"}
		switch {
		case i < cur:
			s.Href, s.Class = p.StepLink(name), "done"
		case i == cur:
			s.Class = "current"
		}
		out = append(out, s)
	}
	return out
}

// fail turns the page into an error page.
func (p *uiPage) fail(status int, m uiMsg) {
	p.Status, p.Error = status, &m
}

func (s *Server) newUIPage(w http.ResponseWriter, r *http.Request, form url.Values) *uiPage {
	p := &uiPage{Lang: uiChooseLang(w, r, form), Status: http.StatusOK, State: uiStateFrom(form), Self: form,
		HasKey: s.o.Signer != nil, Limits: [3]int{uiMaxArgs, uiMaxArgLen, uiMaxArgsTotal}, single: map[string]bool{}}
	if u, err := url.Parse(s.o.ExternalURL); err == nil && s.o.ExternalURL != "" {
		p.Prefix = strings.TrimSuffix(u.Path, "/")
	}
	return p
}

func (s *Server) getUI(w http.ResponseWriter, r *http.Request) {
	p := s.newUIPage(w, r, r.URL.Query())
	s.uiWizard(r, p)
	s.uiRender(w, p)
}

// uiWizard decides the step to show: the one the URL asks for, unless a
// choice it needs is missing (then that choice's step). A choice that
// names nothing served is a 404.
func (s *Server) uiWizard(r *http.Request, p *uiPage) {
	st := &p.State
	want := slices.Index(uiSteps, st.Step)
	at := func(step string) bool { return want == slices.Index(uiSteps, step) }
	if st.SchematicID != "" && !s.uiLoadSchematic(r, p) {
		return
	}
	if listed := s.rels.Listed(); len(listed) == 1 {
		p.single["version"] = true
		if st.Version == "" && !at("version") {
			st.Version = factory.TalosVersion(listed[0].Version)
			p.Notices = append(p.Notices, uiM("auto.version", st.Version))
		}
	}
	if st.Version == "" || at("version") {
		s.uiVersionStep(p)
		return
	}
	rel, rarch, plat, ok := s.uiTarget(p, want)
	if !ok || p.Step != "" {
		return
	}
	if p.Schematic != nil && (want < 0 || at("final")) {
		s.uiFinalStep(r, p, rel, rarch, plat)
		return
	}
	// Editing a reloaded schematic: its extensions and arguments become
	// the state (the wizard makes no META values or overlays).
	if p.Schematic != nil {
		st.Exts, st.Args, st.SchematicID = p.Schematic.Extensions(), strings.Join(p.Schematic.Customization.ExtraKernelArgs, " "), ""
		p.Schematic = nil
	}
	var dropped []string
	st.Exts = slices.DeleteFunc(st.Exts, func(e string) bool {
		gone := !slices.Contains(rel.Extensions, e)
		if gone {
			dropped = append(dropped, e)
		}
		return gone
	})
	if len(dropped) > 0 {
		p.Notices = append(p.Notices, uiM("ext.dropped", factory.TalosVersion(rel.Version), strings.Join(dropped, ", ")))
	}
	if at("args") || at("final") {
		p.Step = "args"
		return
	}
	s.uiExtensionStep(r, p, rel)
}

// uiTarget checks the version, the architecture and the platform chosen,
// or shows the step of the first one missing (p.Step set) or an error
// (ok false).
func (s *Server) uiTarget(p *uiPage, want int) (*factory.VerifiedRelease, string, platform.Platform, bool) {
	st := &p.State
	rel := s.rels.Available(st.Version)
	if rel == nil {
		p.fail(http.StatusNotFound, uiM("err.version", st.Version))
		return nil, "", platform.Platform{}, false
	}
	if archs := rel.Params.Architectures; len(archs) == 1 {
		p.single["arch"] = true
		if st.Arch == "" && want != slices.Index(uiSteps, "arch") {
			st.Arch = specs.GoArch(archs[0])
			p.Notices = append(p.Notices, uiM("auto.arch", factory.TalosVersion(rel.Version), st.Arch))
		}
	}
	if st.Arch == "" || want == slices.Index(uiSteps, "arch") {
		uiArchStep(p, rel)
		return rel, "", platform.Platform{}, true
	}
	rarch := factory.ReleaseArch(rel.Params.Architectures, st.Arch)
	if rarch == "" {
		p.fail(http.StatusNotFound, uiM("err.arch", factory.TalosVersion(rel.Version), st.Arch, strings.Join(rel.Params.Architectures, ", ")))
		return nil, "", platform.Platform{}, false
	}
	if st.Platform == "" || want == slices.Index(uiSteps, "platform") {
		uiPlatformStep(p, rel.PlatformTable())
		return rel, rarch, platform.Platform{}, true
	}
	plat, err := rel.PlatformTable().Lookup(st.Platform)
	if err != nil {
		p.fail(http.StatusNotFound, uiM("err.platform", st.Platform, strings.Join(rel.PlatformTable().Names(), ", ")))
		return nil, "", platform.Platform{}, false
	}
	return rel, rarch, plat, true
}

// uiLoadSchematic reads the schematic the URL names.
func (s *Server) uiLoadSchematic(r *http.Request, p *uiPage) bool {
	id := p.State.SchematicID
	if len(id) != 64 || strings.Trim(id, "0123456789abcdef") != "" {
		p.fail(http.StatusBadRequest, uiM("err.schematic.id", id))
		return false
	}
	sch, err := s.schems.Schematic(r.Context(), id)
	switch {
	case errors.Is(err, factory.ErrUnknownSchematic):
		p.fail(http.StatusNotFound, uiM("err.schematic.unknown", id))
		return false
	case err != nil:
		s.o.Log.Error("reading a schematic", "id", id, "err", err)
		p.fail(http.StatusInternalServerError, uiM("err.internal"))
		return false
	}
	p.Schematic = sch
	return true
}

func (s *Server) uiVersionStep(p *uiPage) {
	p.Step = "version"
	listed := s.rels.Listed()
	chosen := s.rels.Available(p.State.Version)
	if chosen == nil {
		chosen = factory.LatestOf(listed) // the newest stable by default
	}
	if chosen == nil && len(listed) > 0 {
		chosen = listed[len(listed)-1]
	}
	for _, rel := range listed {
		i := slices.IndexFunc(p.Branches, func(x uiBranch) bool { return x.Name == rel.Branch })
		if i < 0 {
			p.Branches, i = append(p.Branches, uiBranch{Name: rel.Branch}), len(p.Branches)
		}
		v := factory.TalosVersion(rel.Version)
		p.Branches[i].Choices = append(p.Branches[i].Choices, uiChoice{Value: v, Label: v, Checked: rel == chosen})
	}
}

func uiArchStep(p *uiPage, rel *factory.VerifiedRelease) {
	p.Step = "arch"
	chosen := factory.ReleaseArch(rel.Params.Architectures, p.State.Arch)
	for i, a := range rel.Params.Architectures {
		label := specs.GoArch(a)
		if label != a {
			label += " (" + a + ")"
		}
		p.Choices = append(p.Choices, uiChoice{Value: specs.GoArch(a), Label: label, Checked: a == chosen || chosen == "" && i == 0})
	}
}

// uiPlatformStep offers the release's platforms: Talos's in the reader's
// language, those its spec adds with their own description.
func uiPlatformStep(p *uiPage, table platform.Table) {
	p.Step = "platform"
	chosen := p.State.Platform
	if _, err := table.Lookup(chosen); err != nil || chosen == "" {
		chosen = platform.Default
	}
	for _, pl := range table.Platforms {
		c := uiChoice{Value: pl.Name, Label: pl.Name, Formats: strings.Join(uiDownloads(pl), ", "), Checked: pl.Name == chosen}
		if _, err := platform.Lookup(pl.Name); err == nil {
			d := uiM("platform." + pl.Name)
			c.Detail = &d
		} else {
			c.Text = pl.Description
		}
		p.Choices = append(p.Choices, c)
	}
}

// uiExtensionStep lists the release's extensions that match the filter
// (names and descriptions, case aside); chosen ones filtered out are kept
// as hidden inputs.
func (s *Server) uiExtensionStep(r *http.Request, p *uiPage, rel *factory.VerifiedRelease) {
	p.Step = "extensions"
	filter := strings.ToLower(strings.TrimSpace(p.State.Filter))
	for _, name := range rel.Extensions {
		meta, err := rel.ExtensionMetadata(r.Context(), name)
		if err != nil {
			s.o.Log.Error("reading an extension", "name", name, "err", err)
			p.fail(http.StatusInternalServerError, uiM("err.internal"))
			return
		}
		chosen := slices.Contains(p.State.Exts, name)
		desc := rel.ExtensionDescription(meta, p.Lang)
		if filter != "" && !strings.Contains(strings.ToLower(name+"\n"+desc+"\n"+meta.Description), filter) {
			if chosen {
				p.HiddenExts = append(p.HiddenExts, name)
			}
			continue
		}
		p.Extensions = append(p.Extensions, uiExtension{Name: name, Version: meta.Version, Author: meta.Author,
			Description: desc, Checked: chosen})
	}
}

// uiDownloads are the disk images offered for a platform, as file name
// endings: its formats, the large ones compressed as their importers or
// users expect (the factory serves every variant; the page says so).
func uiDownloads(p platform.Platform) []string {
	var out []string
	for _, f := range p.Formats {
		switch f {
		case "raw":
			if p.Name == "metal" {
				f = "raw.zst" // written to a disk: zstd unpacks fastest
			} else {
				f = "raw.xz"
			}
		case "vhd":
			f = "vhd.xz"
		}
		out = append(out, f)
	}
	return out
}

// uiFinalStep shows a stored schematic and every download of it for the
// version, architecture and platform chosen.
func (s *Server) uiFinalStep(r *http.Request, p *uiPage, rel *factory.VerifiedRelease, rarch string, plat platform.Platform) {
	sch, st := p.Schematic, p.State
	if e, missing := rel.Missing(sch.Customization.SystemExtensions.OfficialExtensions); missing {
		p.fail(http.StatusBadRequest, uiM("err.ext.unknown", factory.TalosVersion(rel.Version), e))
		return
	}
	canon, err := sch.Canonical()
	if err != nil {
		p.fail(http.StatusInternalServerError, uiM("err.internal"))
		return
	}
	p.Step = "final"
	arch := specs.GoArch(rarch)
	// Downloads go to the external URL when there is one; the texts to
	// copy are absolute either way.
	base, abs := strings.TrimSuffix(s.o.ExternalURL, "/"), strings.TrimSuffix(s.o.ExternalURL, "/")
	if _, err := url.Parse(s.o.ExternalURL); err != nil || s.o.ExternalURL == "" {
		abs = "http://" + r.Host
		if r.TLS != nil {
			abs = "https://" + r.Host
		}
	}
	version := factory.TalosVersion(rel.Version)
	img := "/image/" + st.SchematicID + "/" + version + "/"
	file := func(name, key string) uiFile {
		return uiFile{Name: name, Key: key, Href: base + img + name, Sig: s.o.Signer != nil}
	}
	f := &uiFinal{ID: st.SchematicID, YAML: string(canon), Default: len(sch.Extensions()) == 0 && len(sch.Customization.ExtraKernelArgs) == 0}
	for _, d := range uiDownloads(plat) {
		f.Disks = append(f.Disks, file(plat.Name+"-"+arch+"."+d, "format."+d))
	}
	f.Boot = []uiFile{file("kernel-"+arch, "final.kernel"), file("initramfs-"+arch+".xz", "final.initramfs"),
		file("cmdline-"+plat.Name+"-"+arch, "final.cmdline")}
	pxe := path.Join("/pxe", st.SchematicID, version, plat.Name+"-"+arch)
	f.PXE, f.PXEText = base+pxe, abs+pxe
	// The references the installers' signatures name.
	f.Installer = s.imgs.PullRef(r.Host, factory.InstallerKind{}, st.SchematicID, rel.Version)
	f.PlatformInstaller = s.imgs.PullRef(r.Host, factory.InstallerKind{Platform: plat.Name}, st.SchematicID, rel.Version)
	edit := uiState{Lang: st.Lang, Version: st.Version, Arch: st.Arch, Platform: st.Platform, Exts: sch.Extensions(),
		Args: strings.Join(sch.Customization.ExtraKernelArgs, " ")}
	f.Edit = p.link(edit, "extensions")
	if s.o.Signer != nil {
		f.SigningKey = abs + "/oci/cosign/signing-key.pub"
	}
	f.Verify = f.Boot[0]
	if len(f.Disks) > 0 {
		f.Verify = f.Disks[0]
	}
	f.Verify.Href = abs + img + f.Verify.Name
	if s.o.SecureBoot != nil {
		sb := &uiSecureBoot{Installer: s.imgs.PullRef(r.Host, factory.InstallerKind{SecureBoot: true}, st.SchematicID, rel.Version),
			Cert: base + "/secureboot/signing-cert.pem"}
		for _, d := range uiDownloads(plat) {
			sb.Files = append(sb.Files, file(plat.Name+"-"+arch+compose.SecureBootSuffix+"."+d, "format."+d))
		}
		sb.Files = append(sb.Files, file(plat.Name+"-"+arch+compose.SecureBootSuffix+"-uki.efi", "final.secureboot.uki"))
		f.SecureBoot = sb
	}
	p.Final = f
}

// postUISchematic stores the schematic the wizard made and sends the
// browser to its page (POST, redirect, GET: the final page's address
// reloads it). Bad kernel arguments stay on their step, with the reasons.
func (s *Server) postUISchematic(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, uiMaxForm)
	err := r.ParseForm()
	p := s.newUIPage(w, r, r.PostForm)
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			p.fail(http.StatusRequestEntityTooLarge, uiM("err.form.large", uiMaxForm))
		} else {
			p.fail(http.StatusBadRequest, uiM("err.form"))
		}
		s.uiRender(w, p)
		return
	}
	st := &p.State
	st.SchematicID, st.Step, st.Filter = "", "", ""
	p.Self = st.values("args")
	if st.Version == "" {
		p.fail(http.StatusBadRequest, uiM("err.form"))
		s.uiRender(w, p)
		return
	}
	rel, _, _, ok := s.uiTarget(p, -1)
	if !ok || p.Step != "" {
		if p.Error == nil { // the form lacks a choice of an earlier step
			p.fail(http.StatusBadRequest, uiM("err.form"))
		}
		s.uiRender(w, p)
		return
	}
	for _, e := range st.Exts {
		if !slices.Contains(rel.Extensions, e) {
			p.fail(http.StatusBadRequest, uiM("err.ext.unknown", factory.TalosVersion(rel.Version), e))
			s.uiRender(w, p)
			return
		}
	}
	args := strings.Fields(st.Args)
	// Sorted: the wizard's choice, not the form's order, makes the ID.
	sch := &schematic.Schematic{Customization: schematic.Customization{ExtraKernelArgs: args,
		SystemExtensions: schematic.SystemExtensions{OfficialExtensions: slices.Sorted(slices.Values(st.Exts))}}}
	p.ArgErrors = uiCheckArgs(args)
	if len(p.ArgErrors) == 0 {
		if err := sch.Validate(); err != nil {
			p.ArgErrors = []uiMsg{uiM("err.schematic.invalid", err.Error())}
		}
	}
	if len(p.ArgErrors) > 0 {
		// The step again, with the reasons: a page that renders (200),
		// as browsers take a 4xx page for a failed load and log it.
		p.Step = "args"
		s.uiRender(w, p)
		return
	}
	id, err := s.createSchematic(r.Context(), sch, nil)
	if rf := (*refusal)(nil); errors.As(err, &rf) {
		msg := uiM("err.schematic.full")
		if rf.status == http.StatusTooManyRequests {
			rf.setRetryAfter(w.Header())
			msg = uiM("err.schematic.rate", rf.retryAfter.Round(time.Second).String())
		}
		p.fail(rf.status, msg)
		s.uiRender(w, p)
		return
	}
	if err != nil {
		s.o.Log.Error("storing a schematic", "err", err)
		p.fail(http.StatusInternalServerError, uiM("err.internal"))
		s.uiRender(w, p)
		return
	}
	next := uiState{Lang: st.Lang, SchematicID: id, Version: st.Version, Arch: st.Arch, Platform: st.Platform}
	http.Redirect(w, r, p.link(next, ""), http.StatusSeeOther)
}

// uiCheckArgs checks extra kernel arguments against the UI's bounds:
// their count, each one's length and all together, and their characters
// (no quoting: the kernel and the boot loaders split quotes their own
// ways).
func uiCheckArgs(args []string) []uiMsg {
	var out []uiMsg
	if len(args) > uiMaxArgs {
		out = append(out, uiM("err.args.count", len(args), uiMaxArgs))
	}
	total := 0
	for _, a := range args {
		total += len(a) + 1
		shown := a
		if utf8.RuneCountInString(shown) > 40 {
			shown = string([]rune(shown)[:40]) + "…"
		}
		if len(a) > uiMaxArgLen {
			out = append(out, uiM("err.args.length", shown, len(a), uiMaxArgLen))
		}
		if i := strings.IndexFunc(a, func(r rune) bool { return r < 0x21 || r > 0x7e || strings.ContainsRune("\"'`\\", r) }); i >= 0 {
			r, _ := utf8.DecodeRuneInString(a[i:])
			out = append(out, uiM("err.args.chars", shown, uiRune(r)))
		}
	}
	if total > 0 && total-1 > uiMaxArgsTotal {
		out = append(out, uiM("err.args.total", total-1, uiMaxArgsTotal))
	}
	return out
}

// uiRune shows a character as typed, with its code point when it does
// not show itself (a control or a space of another kind).
func uiRune(r rune) string {
	code := fmt.Sprintf("U+%04X", r)
	if unicode.IsGraphic(r) && !unicode.IsSpace(r) {
		return string(r) + " (" + code + ")"
	}
	return code
}

// uiRender writes the page in its language; a template that fails is a
// 500 (rendered to a buffer first, so no half page goes out).
func (s *Server) uiRender(w http.ResponseWriter, p *uiPage) {
	var b bytes.Buffer
	if err := uiTemplates[p.Lang].Execute(&b, p); err != nil {
		s.o.Log.Error("rendering the UI", "step", p.Step, "err", err)
		fail(w, http.StatusInternalServerError, "rendering the page failed")
		return
	}
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Content-Language", p.Lang)
	h.Set("Vary", "Accept-Language, Cookie")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "same-origin")
	// No script, no outside resource: the policy says so to the browser.
	h.Set("Content-Security-Policy", "default-src 'none'; style-src 'self'; img-src 'self' data:; form-action 'self'; base-uri 'none'; frame-ancestors 'none'")
	w.WriteHeader(p.Status)
	w.Write(b.Bytes())
}
