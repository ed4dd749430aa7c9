package rpmfile

import (
	"encoding/hex"
	"fmt"
	"path"

	"github.com/nodeforge/builder/pkgbase/rpmhdr"
)

// Dep is one dependency as the header stores it.
type Dep struct {
	Name    string `json:"name"`
	Flags   uint32 `json:"flags"`   // rpm's RPMSENSE_* bits
	Version string `json:"version"` // "" when unversioned; may be "E:V-R:DISTTAG" or "set:..."
}

// File is one entry of the header's file list.
type File struct {
	Path       string `json:"path"`
	Mode       uint32 `json:"mode"`
	Size       int64  `json:"size"`
	Digest     string `json:"digest"` // hex, "" for non-regular files
	DigestAlgo string `json:"digestAlgo"`
	User       string `json:"user"`
	Group      string `json:"group"`
	LinkTo     string `json:"linkTo"`
	Flags      uint32 `json:"flags"` // RPMFILE_* bits
	Config     bool   `json:"config,omitempty"`
	Doc        bool   `json:"doc,omitempty"`
	Ghost      bool   `json:"ghost,omitempty"`
	Caps       string `json:"caps,omitempty"` // textual capabilities, as cap_to_text gives
	Mtime      uint32 `json:"mtime"`
	Inode      uint32 `json:"inode"`
	Rdev       uint32 `json:"rdev,omitempty"`
	Lang       string `json:"lang,omitempty"`
}

// Script is one scriptlet.
type Script struct {
	Kind        string   `json:"kind"` // pre, post, preun, postun, pretrans, posttrans, verify
	Interpreter []string `json:"interpreter"`
	Body        string   `json:"body"`
}

// Trigger is one trigger condition with its script.
type Trigger struct {
	Name        string   `json:"name"`
	Flags       uint32   `json:"flags"`
	Version     string   `json:"version"`
	Interpreter []string `json:"interpreter"`
	Body        string   `json:"body"`
}

// Info is the metadata of a package header.
type Info struct {
	Name              string    `json:"name"`
	Epoch             *int64    `json:"epoch"`
	Version           string    `json:"version"`
	Release           string    `json:"release"`
	Arch              string    `json:"arch"`
	Disttag           string    `json:"disttag"`
	BuildTime         int64     `json:"buildTime"`
	BuildHost         string    `json:"buildHost"`
	SourceRPM         string    `json:"sourceRpm"`
	License           string    `json:"license"`
	Summary           string    `json:"summary"`
	URL               string    `json:"url,omitempty"`
	Vendor            string    `json:"vendor,omitempty"`
	Packager          string    `json:"packager,omitempty"`
	Group             string    `json:"group,omitempty"`
	Size              int64     `json:"size"`
	IsSource          bool      `json:"source"`
	PayloadFormat     string    `json:"payloadFormat"`
	PayloadCompressor string    `json:"payloadCompressor"`
	Requires          []Dep     `json:"requires"`
	Provides          []Dep     `json:"provides"`
	Conflicts         []Dep     `json:"conflicts"`
	Obsoletes         []Dep     `json:"obsoletes"`
	Recommends        []Dep     `json:"recommends,omitempty"`
	Suggests          []Dep     `json:"suggests,omitempty"`
	Supplements       []Dep     `json:"supplements,omitempty"`
	Enhances          []Dep     `json:"enhances,omitempty"`
	Files             []File    `json:"files"`
	Scripts           []Script  `json:"scripts"`
	Triggers          []Trigger `json:"triggers"`
}

// Deps reads one dependency kind from h. A header whose name, flag and
// version arrays disagree in length is reported, not indexed past.
func Deps(h *rpmhdr.Header, nameTag, flagTag, verTag uint32) ([]Dep, error) {
	names := h.Strings(nameTag)
	if len(names) == 0 {
		return []Dep{}, nil
	}
	flags := h.Ints(flagTag)
	vers := h.Strings(verTag)
	if (flags != nil && len(flags) != len(names)) || (vers != nil && len(vers) != len(names)) {
		return nil, fmt.Errorf("dependency tag %d: %d names, %d flags, %d versions", nameTag, len(names), len(flags), len(vers))
	}
	out := make([]Dep, len(names))
	for i, n := range names {
		out[i].Name = n
		if flags != nil {
			out[i].Flags = uint32(flags[i])
		}
		if vers != nil {
			out[i].Version = vers[i]
		}
	}
	return out, nil
}

// Paths returns the header's file paths, from BASENAMES/DIRNAMES or the
// pre-4.x OLDFILENAMES.
func Paths(h *rpmhdr.Header) ([]string, error) {
	if old := h.Strings(rpmhdr.TagOldFilenames); len(old) > 0 {
		return old, nil
	}
	base := h.Strings(rpmhdr.TagBaseNames)
	if len(base) == 0 {
		return nil, nil
	}
	dirs := h.Strings(rpmhdr.TagDirNames)
	idx := h.Ints(rpmhdr.TagDirIndexes)
	if len(idx) != len(base) {
		return nil, fmt.Errorf("file list: %d base names but %d dir indexes", len(base), len(idx))
	}
	out := make([]string, len(base))
	for i, b := range base {
		if idx[i] < 0 || int(idx[i]) >= len(dirs) {
			return nil, fmt.Errorf("file list: dir index %d out of range (%d dirs)", idx[i], len(dirs))
		}
		out[i] = dirs[idx[i]] + b
	}
	return out, nil
}

// ReadInfo extracts the metadata of a package header.
func ReadInfo(h *rpmhdr.Header) (*Info, error) {
	in := &Info{
		Name:              h.String(rpmhdr.TagName),
		Version:           h.String(rpmhdr.TagVersion),
		Release:           h.String(rpmhdr.TagRelease),
		Arch:              h.String(rpmhdr.TagArch),
		Disttag:           h.String(rpmhdr.TagDistTag),
		BuildHost:         h.String(rpmhdr.TagBuildHost),
		SourceRPM:         h.String(rpmhdr.TagSourceRPM),
		License:           h.String(rpmhdr.TagLicense),
		Summary:           h.String(rpmhdr.TagSummary),
		URL:               h.String(rpmhdr.TagURL),
		Vendor:            h.String(rpmhdr.TagVendor),
		Packager:          h.String(rpmhdr.TagPackager),
		Group:             h.String(rpmhdr.TagGroup),
		IsSource:          h.Has(rpmhdr.TagSourcePackage),
		PayloadFormat:     h.String(rpmhdr.TagPayloadFormat),
		PayloadCompressor: h.String(rpmhdr.TagPayloadCompressor),
		Scripts:           []Script{},
		Triggers:          []Trigger{},
	}
	if in.Name == "" {
		return nil, fmt.Errorf("header has no NAME")
	}
	if in.PayloadCompressor == "" {
		in.PayloadCompressor = "gzip"
	}
	if e, ok := h.Int(rpmhdr.TagEpoch); ok {
		in.Epoch = &e
	}
	in.BuildTime, _ = h.Int(rpmhdr.TagBuildTime)
	if s, ok := h.Int(rpmhdr.TagLongSize); ok {
		in.Size = s
	} else {
		in.Size, _ = h.Int(rpmhdr.TagSize)
	}
	var err error
	kinds := []struct {
		dst           *[]Dep
		name, fl, ver uint32
	}{
		{&in.Requires, rpmhdr.TagRequireName, rpmhdr.TagRequireFlags, rpmhdr.TagRequireVersion},
		{&in.Provides, rpmhdr.TagProvideName, rpmhdr.TagProvideFlags, rpmhdr.TagProvideVersion},
		{&in.Conflicts, rpmhdr.TagConflictName, rpmhdr.TagConflictFlags, rpmhdr.TagConflictVersion},
		{&in.Obsoletes, rpmhdr.TagObsoleteName, rpmhdr.TagObsoleteFlags, rpmhdr.TagObsoleteVersion},
		{&in.Recommends, rpmhdr.TagRecommendName, rpmhdr.TagRecommendFlags, rpmhdr.TagRecommendVersion},
		{&in.Suggests, rpmhdr.TagSuggestName, rpmhdr.TagSuggestFlags, rpmhdr.TagSuggestVersion},
		{&in.Supplements, rpmhdr.TagSupplementName, rpmhdr.TagSupplementFlags, rpmhdr.TagSupplementVersion},
		{&in.Enhances, rpmhdr.TagEnhanceName, rpmhdr.TagEnhanceFlags, rpmhdr.TagEnhanceVersion},
	}
	for _, k := range kinds {
		if *k.dst, err = Deps(h, k.name, k.fl, k.ver); err != nil {
			return nil, err
		}
	}
	if in.Files, err = Files(h); err != nil {
		return nil, err
	}
	in.Scripts = Scripts(h)
	if in.Triggers, err = Triggers(h); err != nil {
		return nil, err
	}
	return in, nil
}

// Files reads the per-file metadata. Arrays shorter than the path list are
// an error: a header promising N files must describe all N.
func Files(h *rpmhdr.Header) ([]File, error) {
	paths, err := Paths(h)
	if err != nil {
		return nil, err
	}
	out := make([]File, len(paths))
	if len(paths) == 0 {
		return out, nil
	}
	n := len(paths)
	sizes := h.Ints(rpmhdr.TagLongFileSizes)
	if sizes == nil {
		sizes = h.Ints(rpmhdr.TagFileSizes)
	}
	modes := h.Ints(rpmhdr.TagFileModes)
	digests := h.Strings(rpmhdr.TagFileDigests)
	users := h.Strings(rpmhdr.TagFileUserName)
	groups := h.Strings(rpmhdr.TagFileGroupName)
	links := h.Strings(rpmhdr.TagFileLinkTos)
	flags := h.Ints(rpmhdr.TagFileFlags)
	mtimes := h.Ints(rpmhdr.TagFileMtimes)
	inodes := h.Ints(rpmhdr.TagFileInodes)
	rdevs := h.Ints(rpmhdr.TagFileRdevs)
	langs := h.Strings(rpmhdr.TagFileLangs)
	caps := h.Strings(rpmhdr.TagFileCaps)
	algo := uint32(rpmhdr.HashMD5)
	if a, ok := h.Int(rpmhdr.TagFileDigestAlgo); ok {
		algo = uint32(a)
	}
	for name, l := range map[string]int{"sizes": len(sizes), "modes": len(modes)} {
		if l != n {
			return nil, fmt.Errorf("file list: %d paths but %d %s", n, l, name)
		}
	}
	for name, l := range map[string]int{"digests": len(digests), "users": len(users), "groups": len(groups), "link targets": len(links),
		"flags": len(flags), "mtimes": len(mtimes), "inodes": len(inodes), "rdevs": len(rdevs), "langs": len(langs), "caps": len(caps)} {
		if l != 0 && l != n {
			return nil, fmt.Errorf("file list: %d paths but %d %s", n, l, name)
		}
	}
	for i, p := range paths {
		f := File{Path: path.Clean(p), Size: sizes[i], Mode: uint32(modes[i]), DigestAlgo: rpmhdr.HashName(algo)}
		if p == "" {
			f.Path = ""
		}
		if digests != nil {
			f.Digest = digests[i]
		}
		if users != nil {
			f.User = users[i]
		}
		if groups != nil {
			f.Group = groups[i]
		}
		if links != nil {
			f.LinkTo = links[i]
		}
		if flags != nil {
			f.Flags = uint32(flags[i])
		}
		if mtimes != nil {
			f.Mtime = uint32(mtimes[i])
		}
		if inodes != nil {
			f.Inode = uint32(inodes[i])
		}
		if rdevs != nil {
			f.Rdev = uint32(rdevs[i])
		}
		if langs != nil {
			f.Lang = langs[i]
		}
		if caps != nil {
			f.Caps = caps[i]
		}
		f.Config = f.Flags&rpmhdr.FileConfig != 0
		f.Doc = f.Flags&rpmhdr.FileDoc != 0
		f.Ghost = f.Flags&rpmhdr.FileGhost != 0
		out[i] = f
	}
	return out, nil
}

// Scripts reads the scriptlets in a fixed order.
func Scripts(h *rpmhdr.Header) []Script {
	kinds := []struct {
		kind       string
		body, prog uint32
	}{
		{"pretrans", rpmhdr.TagPreTrans, rpmhdr.TagPreTransProg},
		{"pre", rpmhdr.TagPreIn, rpmhdr.TagPreInProg},
		{"post", rpmhdr.TagPostIn, rpmhdr.TagPostInProg},
		{"preun", rpmhdr.TagPreUn, rpmhdr.TagPreUnProg},
		{"postun", rpmhdr.TagPostUn, rpmhdr.TagPostUnProg},
		{"posttrans", rpmhdr.TagPostTrans, rpmhdr.TagPostTransProg},
		{"verify", rpmhdr.TagVerifyScript, rpmhdr.TagVerifyScriptProg},
	}
	out := []Script{}
	for _, k := range kinds {
		if !h.Has(k.body) && !h.Has(k.prog) {
			continue
		}
		out = append(out, Script{Kind: k.kind, Interpreter: h.Strings(k.prog), Body: h.String(k.body)})
	}
	return out
}

// Triggers reads the trigger conditions with their scripts.
func Triggers(h *rpmhdr.Header) ([]Trigger, error) {
	names := h.Strings(rpmhdr.TagTriggerName)
	if len(names) == 0 {
		return []Trigger{}, nil
	}
	flags := h.Ints(rpmhdr.TagTriggerFlags)
	vers := h.Strings(rpmhdr.TagTriggerVersion)
	idx := h.Ints(rpmhdr.TagTriggerIndex)
	scripts := h.Strings(rpmhdr.TagTriggerScripts)
	progs := h.Strings(rpmhdr.TagTriggerScriptProg)
	if len(flags) != len(names) || len(vers) != len(names) || len(idx) != len(names) {
		return nil, fmt.Errorf("triggers: %d names, %d flags, %d versions, %d indexes", len(names), len(flags), len(vers), len(idx))
	}
	out := make([]Trigger, len(names))
	for i := range names {
		t := Trigger{Name: names[i], Flags: uint32(flags[i]), Version: vers[i]}
		j := int(idx[i])
		if j < 0 || j >= len(scripts) {
			return nil, fmt.Errorf("trigger %q: script index %d out of range", names[i], j)
		}
		t.Body = scripts[j]
		if j < len(progs) {
			t.Interpreter = []string{progs[j]}
		}
		out[i] = t
	}
	return out, nil
}

// hexOrEmpty renders a BIN digest.
func hexOrEmpty(b []byte) string {
	if len(b) == 0 {
		return ""
	}
	return hex.EncodeToString(b)
}
