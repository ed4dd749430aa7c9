package synth

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"hash/fnv"
	"strings"

	"github.com/nodeforge/builder/pkgbase/evr"
	"github.com/nodeforge/builder/pkgbase/repo"
)

// RPMMDInstallOnly are the names of RPMMD's packages
// that install side by side (dnf's installonlypkgs; the resolver's
// DefaultMultiVersion matches them).
var RPMMDInstallOnly = []string{"kernel-image-std-def", "kernel-modules-drm-std-def", "kernel-modules-zfs-std-def"}

// RPMMD returns NodeOS(n, seed) recast as an upstream
// rpm-md repository's packages, the problem dnf (libsolv) and Resolve can
// both be given: upstream rpm version rules, no disttags, no ALT
// set-versions (a set-versioned dependency becomes unversioned), no
// rpmlib() requirements (createrepo_c leaves them out of primary.xml), a
// sha256 pkgid and a file list of the size real packages have (documents,
// manual pages, translations, modules: some 11 files a package) so that
// filelists.xml weighs what it does in a real repository. Repo is left
// empty: whoever writes the repository gives it its URL.
func RPMMD(n int, seed int64) ([]*repo.Package, []string) {
	alt, reqs := NodeOS(n, seed)
	// Two packages provide MTA, which cronie requires: libsolv takes the
	// first name (postfix), Resolve the newer version (sendmail). The
	// node OS names its MTA so that both answer the same.
	reqs = append(reqs, "postfix")
	out := make([]*repo.Package, 0, len(alt))
	for _, a := range alt {
		p := *a
		p.Semantics = evr.RPM
		p.Repo = ""
		p.EVR.Disttag = ""
		p.License = "MIT"
		p.Provides = rpmmdDeps(a.Provides)
		p.Requires = rpmmdDeps(a.Requires)
		p.Conflicts = rpmmdDeps(a.Conflicts)
		p.Obsoletes = rpmmdDeps(a.Obsoletes)
		p.Location = "Packages/" + p.Name[:1] + "/" + p.Name + "-" + p.EVR.Version + "-" + p.EVR.Release + "." + p.Arch + ".rpm"
		p.Files = synthFiles(&p, a.Files)
		sum := sha256.Sum256([]byte(p.Location))
		p.SHA256 = hex.EncodeToString(sum[:])
		p.BLAKE2b, p.MD5, p.SHA1 = "", "", ""
		out = append(out, &p)
	}
	return out, reqs
}

// rpmmdDeps drops rpmlib() requirements and set-versions, and disttags
// from versions.
func rpmmdDeps(in []repo.Dep) []repo.Dep {
	var out []repo.Dep
	for _, d := range in {
		if d.Flags&evr.FlagRPMLib != 0 || strings.HasPrefix(d.Name, "rpmlib(") {
			continue
		}
		d.Flags &^= evr.FlagRPMLib
		switch {
		case d.Version == "":
		case strings.HasPrefix(d.Version, "set:"):
			d.Version, d.Flags = "", d.Flags&^evr.FlagSense
		default:
			e := evr.Parse(d.Version)
			e.Disttag = ""
			d.Version = e.String()
		}
		out = append(out, d)
	}
	return out
}

var synthLangs = []string{"de", "es", "fr", "it", "ja", "pl", "pt_BR", "ru", "uk", "zh_CN"}

// synthFiles gives a package the files a real one of its kind has, drawn
// from its name (so the same on every run).
func synthFiles(p *repo.Package, own []string) []string {
	h := fnv.New32a()
	h.Write([]byte(p.Name + p.EVR.Version))
	r := h.Sum32()
	files := append([]string(nil), own...)
	doc := "/usr/share/doc/" + p.Name + "-" + p.EVR.Version + "/"
	files = append(files, doc+"README", doc+"COPYING", doc+"NEWS")
	var prog string
	for _, f := range own {
		if strings.HasPrefix(f, "/usr/bin/") {
			prog = strings.TrimPrefix(f, "/usr/bin/")
		}
	}
	switch {
	case prog != "":
		files = append(files, "/usr/share/man/man1/"+prog+".1.xz", "/usr/share/bash-completion/completions/"+prog)
		for i, l := range synthLangs {
			if r>>i&1 == 1 || i < 3 {
				files = append(files, "/usr/share/locale/"+l+"/LC_MESSAGES/"+prog+".mo")
			}
		}
	case strings.HasPrefix(p.Name, "python3-module-"):
		st := strings.TrimPrefix(p.Name, "python3-module-")
		for _, d := range p.Provides {
			if m, ok := strings.CutPrefix(d.Name, "python3("+st+"."); ok {
				m = strings.TrimSuffix(m, ")")
				files = append(files,
					"/usr/lib/python3/site-packages/"+st+"/"+m+".py",
					"/usr/lib/python3/site-packages/"+st+"/__pycache__/"+m+".cpython-312.pyc")
			}
		}
	case strings.HasPrefix(p.Name, "perl-"):
		for _, d := range p.Provides {
			if m, ok := strings.CutPrefix(d.Name, "perl("); ok {
				m = strings.TrimSuffix(m, ")")
				files = append(files, "/usr/share/perl5/"+m, "/usr/share/man/man3/"+strings.ReplaceAll(strings.TrimSuffix(m, ".pm"), "/", "::")+".3pm.xz")
			}
		}
	case strings.HasSuffix(p.Name, "-data"):
		st := strings.TrimSuffix(p.Name, "-data")
		for i := range 8 + int(r%24) {
			files = append(files, fmt.Sprintf("/usr/share/%s/data%02d.dat", st, i))
		}
	case strings.HasPrefix(p.Name, "lib") && len(own) > 0:
		files = append(files, own[0]+fmt.Sprintf(".%d.%d", r%10, r/10%10))
	}
	return files
}
