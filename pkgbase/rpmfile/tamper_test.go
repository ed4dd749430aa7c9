package rpmfile

import (
	"bufio"
	"bytes"
	"crypto"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ProtonMail/go-crypto/openpgp"
	"github.com/ProtonMail/go-crypto/openpgp/packet"

	"github.com/nodeforge/builder/internal/testutil"
	"github.com/nodeforge/builder/pkgbase/keyring"
	"github.com/nodeforge/builder/pkgbase/rpmhdr"
)

// tamperCase is one package to judge with the keys of a keyring.
type tamperCase struct {
	name string
	keys string // a key of keySets
	pkg  []byte
	want string // the verdict both must give; "" for a flip, where only agreement counts
}

// TestTamperingAgreesWithRPM changes signed packages (rpmsign's v4 and v3,
// and the demo base's) as a hostile mirror would: every byte of the
// signature header in turn (of the numbers that end a signature and of
// rpmsign's reserved space, a sample), bytes of the header and the
// payload, signatures stripped, replaced by another key's or replayed from
// another package. Each is judged with the keyring as the lock and inspect
// do, and by Debian's rpmkeys -Kv with the same keys imported, in one run
// per keyring. The verdicts must agree, package by package and signature
// by signature: OK; BAD (a digest or a signature fails, or the signature
// header is malformed: tampering, refused); NOKEY (a signature by a key
// outside the keyring over the data it signed: refused, said to be an
// unknown key, not tampering); UNSIGNED (rpm -K says "digests OK", we
// refuse: a base must be signed). A signature whose hash algorithm rpm
// does not know is skipped by both. One difference is allowed and
// counted: we also refuse a wrong size tag, which rpm 4.18 ignores.
func TestTamperingAgreesWithRPM(t *testing.T) {
	rpmkeys := testutil.NeedTool(t, "rpmkeys")
	fx, keys := testutil.Fixtures(t, "rpm"), testutil.Fixtures(t, "keys")
	read := func(path string) []byte {
		t.Helper()
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	// The demo base's key signs as the demo base does: v4 RSA/SHA512,
	// header-only and header+payload.
	el, err := openpgp.ReadArmoredKeyRing(bytes.NewReader(read(filepath.Join(testutil.RepoRoot(), "pkgbase", "demobase", "demo-key.asc"))))
	if err != nil {
		t.Fatal(err)
	}
	demo := el[0]
	demoPub, err := keyring.ArmoredPublic(demo)
	if err != nil {
		t.Fatal(err)
	}
	demoSign := func(b []byte) []byte {
		var sig bytes.Buffer
		no := false
		cfg := &packet.Config{DefaultHash: crypto.SHA512, Time: func() time.Time { return vt0 }, NonDeterministicSignaturesViaNotation: &no}
		if err := openpgp.DetachSign(&sig, demo, bytes.NewReader(b), cfg); err != nil {
			t.Fatal(err)
		}
		return sig.Bytes()
	}
	keyFiles := map[string][]byte{
		"rpm.org": read(filepath.Join(keys, "rpm.org-rsa-2048-test.pub")),
		"centos7": read(filepath.Join(keys, "RPM-GPG-KEY-CentOS-7")),
		"demo":    demoPub,
	}
	keySets := map[string][]string{"rpm.org": {"rpm.org"}, "centos7": {"centos7"}, "demo": {"demo"}, "rpm.org+demo": {"rpm.org", "demo"}}

	bases := []struct {
		name, own, other string
		pkg              []byte
	}{
		{"rpmsign v4 RSA/SHA256", "rpm.org", "centos7", read(filepath.Join(fx, "hello-2.0-1.x86_64-signed.rpm"))},
		{"rpmsign v3 RSA/SHA256", "centos7", "demo", read(filepath.Join(fx, "centos-release-7-2.1511.el7.centos.2.10.x86_64.rpm"))},
		{"v4 RSA/SHA512 as the demo base", "demo", "rpm.org", signedRPM(t, func(b []byte) ([]byte, error) { return demoSign(b), nil })},
	}
	var cases []tamperCase
	add := func(name, keys string, pkg []byte, want string) {
		cases = append(cases, tamperCase{name: name, keys: keys, pkg: pkg, want: want})
	}
	for _, b := range bases {
		p := openBytes(t, b.pkg)
		sigEnd := LeadSize + len(p.Signature.Raw)
		hdrStart := sigEnd + (8-len(p.Signature.Raw)%8)%8
		hdrEnd := hdrStart + len(p.Header.Raw)
		add(b.name+": intact", b.own, b.pkg, "OK")
		add(b.name+": intact, key outside the keyring", b.other, b.pkg, "NOKEY")
		// Every byte of the signature header: index, signatures, digests,
		// sizes; of the numbers that end a signature and rpmsign's
		// reserved space, a sample.
		for i := LeadSize; i < sigEnd; i++ {
			part, in := sigHeaderPart(p.Signature, i-LeadSize)
			if part == "tag 1008" && i%97 != 0 || in >= 64 && sigTag(part) && i%13 != 0 {
				continue
			}
			add(fmt.Sprintf("%s: signature header byte %d (%s)", b.name, i-LeadSize, part), b.own, flipAt(b.pkg, i), "")
		}
		for i := hdrStart; i < hdrEnd; i += 61 {
			add(fmt.Sprintf("%s: header byte %d", b.name, i-hdrStart), b.own, flipAt(b.pkg, i), "BAD")
		}
		// Changed data is BAD even when the key is unknown: the signature
		// carries the first bytes of the digest it signs.
		add(b.name+": header changed, key outside the keyring", b.other, flipAt(b.pkg, hdrEnd-2), "BAD")
		for _, i := range []int{hdrEnd, (hdrEnd + len(b.pkg)) / 2, len(b.pkg) - 1} {
			add(fmt.Sprintf("%s: payload byte %d", b.name, i-hdrEnd), b.own, flipAt(b.pkg, i), "BAD")
		}
		// The case: the header-only signature flipped beside a
		// good header+payload one, with the key and without.
		for _, tag := range []uint32{rpmhdr.SigRSA, rpmhdr.SigDSA, rpmhdr.SigPGP, rpmhdr.SigGPG} {
			if e, ok := p.Signature.Entry(tag); ok {
				at := LeadSize + 16 + 16*len(p.Signature.Entries) + int(e.Offset) + int(e.Count) - 1
				add(fmt.Sprintf("%s: tag %d's last byte", b.name, tag), b.own, flipAt(b.pkg, at), "BAD")
				add(fmt.Sprintf("%s: tag %d's last byte, key outside the keyring", b.name, tag), b.other, flipAt(b.pkg, at), "NOKEY")
				add(fmt.Sprintf("%s: tag %d stripped", b.name, tag), b.own, withSignatures(t, b.pkg, p, func(sb *rpmhdr.Builder) { sb.Delete(tag) }), "OK")
			}
		}
		add(b.name+": every signature stripped", b.own, withSignatures(t, b.pkg, p, func(sb *rpmhdr.Builder) {
			for _, tag := range []uint32{rpmhdr.SigRSA, rpmhdr.SigDSA, rpmhdr.SigPGP, rpmhdr.SigGPG} {
				sb.Delete(tag)
			}
		}), "UNSIGNED")
	}
	// Two keys on one package: the header-only signature replaced by the
	// demo key's, over the same header and over another package's header.
	hello, other := openBytes(t, bases[0].pkg), openBytes(t, bases[2].pkg)
	mixed := withSignatures(t, bases[0].pkg, hello, func(sb *rpmhdr.Builder) { sb.SetBin(rpmhdr.SigRSA, demoSign(hello.Header.Raw)) })
	add("header-only by a second key, both in the keyring", "rpm.org+demo", mixed, "OK")
	add("header-only by a key outside the keyring, header+payload good", "rpm.org", mixed, "NOKEY")
	add("header+payload by a key outside the keyring, header-only good", "demo", mixed, "NOKEY")
	add("header-only replayed from another package", "rpm.org+demo",
		withSignatures(t, bases[0].pkg, hello, func(sb *rpmhdr.Builder) { sb.SetBin(rpmhdr.SigRSA, demoSign(other.Header.Raw)) }), "BAD")

	// rpm's verdicts: one rpmkeys run per keyring.
	dir := t.TempDir()
	files := map[string][]string{}
	paths := make([]string, len(cases))
	for i, c := range cases {
		paths[i] = filepath.Join(dir, c.keys, fmt.Sprintf("%d.rpm", i))
		os.MkdirAll(filepath.Dir(paths[i]), 0o755)
		if err := os.WriteFile(paths[i], c.pkg, 0o644); err != nil {
			t.Fatal(err)
		}
		files[c.keys] = append(files[c.keys], paths[i])
	}
	rpmSays := map[string]*rpmResult{}
	for set, list := range files {
		for k, v := range rpmCheck(t, rpmkeys, filepath.Join(dir, set, "db"), keySets[set], keyFiles, list) {
			rpmSays[k] = v
		}
	}

	rings := map[string]*keyring.Keyring{}
	for set, names := range keySets {
		rings[set] = &keyring.Keyring{}
		for _, n := range names {
			if err := rings[set].Add(keyFiles[n]); err != nil {
				t.Fatal(err)
			}
		}
	}
	counts, stricter := map[string]int{}, 0
	for i, c := range cases {
		ours, sigs, msg := ourVerdict(c.pkg, rings[c.keys])
		theirs := rpmSays[paths[i]]
		if theirs == nil {
			t.Fatalf("%s: rpmkeys said nothing of %s", c.name, paths[i])
		}
		counts[ours]++
		if ours == "BAD" && theirs.verdict == "OK" && strings.HasPrefix(msg, "size check failed") && !strings.Contains(msg, "; ") {
			stricter++ // rpm 4.18 no longer checks the size
			continue
		}
		if ours != theirs.verdict {
			t.Errorf("%s: ours %s (%s), rpmkeys %s:\n%s", c.name, ours, msg, theirs.verdict, theirs.out)
			continue
		}
		if c.want != "" && ours != c.want {
			t.Errorf("%s: both say %s, want %s (%s)", c.name, ours, c.want, msg)
		}
		if sigs != nil && !theirs.failed && fmt.Sprint(sigs) != fmt.Sprint(theirs.sigs) {
			t.Errorf("%s: signatures: ours %v, rpmkeys %v:\n%s", c.name, sigs, theirs.sigs, theirs.out)
		}
	}
	t.Logf("%d cases, verdicts: %v; %d refused for a wrong size rpm does not check", len(cases), counts, stricter)
}

// ourVerdict judges a package as the lock does (DigestsOnly, signatures
// required) and checks that Err says why: the failed check or the BAD
// signature by name, an unknown key as such. sigs maps what a signature
// covers to rpm's word for our status.
func ourVerdict(pkg []byte, kr *keyring.Keyring) (verdict string, sigs map[string]string, msg string) {
	p, err := Open(bytes.NewReader(pkg))
	if err != nil {
		return "BAD", nil, err.Error()
	}
	v, err := p.Verify(VerifyOptions{Keyring: kr, DigestsOnly: true})
	if err != nil {
		return "BAD", nil, err.Error()
	}
	verdict = "OK"
	sigs = map[string]string{}
	var bad []string
	for _, s := range v.Signatures {
		if s.Status == SigUnsupported { // rpm -K skips it without a word
			continue
		}
		word := map[string]string{SigVerified: "OK", SigBad: "BAD", SigUnknownKey: "NOKEY"}[s.Status]
		if word == "" {
			word = s.Status
		}
		sigs[s.Covers] = word
		switch word {
		case "BAD":
			verdict, bad = "BAD", append(bad, s.Name+" is BAD")
		case "NOKEY":
			if verdict != "BAD" {
				verdict = "NOKEY"
			}
		}
	}
	if verdict == "OK" && len(sigs) == 0 {
		verdict = "UNSIGNED"
	}
	if !v.DigestsOK() {
		verdict, bad = "BAD", append(bad, "check failed")
	}
	e := v.Err(true)
	if e != nil {
		msg = e.Error()
	}
	switch {
	case (e == nil) != (verdict == "OK"):
		return "Err disagrees", sigs, msg
	case verdict == "NOKEY" && (!strings.Contains(msg, "unknown key, not tampering") || strings.Contains(msg, "BAD")):
		return "NOKEY not named", sigs, msg
	}
	for _, b := range bad {
		if !strings.Contains(msg, b) {
			return "BAD not named", sigs, msg
		}
	}
	return verdict, sigs, msg
}

// rpmResult is what rpmkeys -Kv said of one package.
type rpmResult struct {
	verdict string
	failed  bool              // rpm could not read the package
	sigs    map[string]string // what a signature covers -> OK, BAD, NOKEY...
	out     string
}

// rpmCheck imports keys into a new database and runs rpmkeys -Kv on every
// file at once.
func rpmCheck(t *testing.T, rpmkeys, db string, names []string, keyFiles map[string][]byte, files []string) map[string]*rpmResult {
	t.Helper()
	run := func(args ...string) string {
		cmd := exec.Command(rpmkeys, append([]string{"--dbpath", db}, args...)...)
		cmd.Env = append(os.Environ(), "HOME="+filepath.Dir(db), "LC_ALL=C")
		out, _ := cmd.CombinedOutput() // non-zero whenever a package is NOT OK
		return string(out)
	}
	for _, n := range names {
		f := db + "-" + n + ".asc"
		os.WriteFile(f, keyFiles[n], 0o644)
		if out := run("--import", f); out != "" {
			t.Fatalf("rpmkeys --import %s: %s", n, out)
		}
	}
	res := map[string]*rpmResult{}
	var cur *rpmResult
	sc := bufio.NewScanner(strings.NewReader(run(append([]string{"-Kv"}, files...)...)))
	for sc.Scan() {
		line := sc.Text()
		if strings.HasSuffix(line, ":") && !strings.HasPrefix(line, " ") {
			cur = &rpmResult{sigs: map[string]string{}}
			res[strings.TrimSuffix(line, ":")] = cur
		}
		if cur == nil {
			t.Fatalf("rpmkeys: %s", line)
		}
		cur.out += line + "\n"
		if strings.HasPrefix(line, "error: ") {
			cur.failed = true
			continue
		}
		desc, word, ok := strings.Cut(strings.TrimSpace(line), ": ")
		if !ok || !strings.HasPrefix(line, " ") {
			continue
		}
		word, _, _ = strings.Cut(word, " ")
		if word == "NOTFOUND" { // listed after a failure, never present
			continue
		}
		if strings.Contains(strings.ToLower(desc), "signature") {
			covers := "header+payload"
			if strings.HasPrefix(desc, "Header ") {
				covers = "header"
			}
			cur.sigs[covers] = word
		}
		if word != "OK" {
			cur.sigs["!"+desc] = word
		}
	}
	for _, r := range res {
		bad, nokey := r.failed, false
		for k, w := range r.sigs {
			if strings.HasPrefix(k, "!") {
				delete(r.sigs, k)
				bad = bad || w == "BAD"
				nokey = nokey || w == "NOKEY" || w == "NOTTRUSTED"
				if w != "BAD" && w != "NOKEY" && w != "NOTTRUSTED" {
					bad = true // anything else rpm fails on
				}
			}
		}
		switch {
		case bad:
			r.verdict = "BAD"
		case nokey:
			r.verdict = "NOKEY"
		case len(r.sigs) == 0:
			r.verdict = "UNSIGNED"
		default:
			r.verdict = "OK"
		}
	}
	return res
}

func openBytes(t *testing.T, b []byte) *Package {
	t.Helper()
	p, err := Open(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func flipAt(b []byte, i int) []byte {
	out := bytes.Clone(b)
	out[i] ^= 0xff
	return out
}

// withSignatures rewrites the signature header of pkg (opened as p) as
// edit leaves it.
func withSignatures(t *testing.T, pkg []byte, p *Package, edit func(*rpmhdr.Builder)) []byte {
	t.Helper()
	sb := rpmhdr.NewBuilder()
	sb.CopyFrom(p.Signature)
	edit(sb)
	raw := sb.Marshal()
	n := len(p.Signature.Raw)
	out := append(bytes.Clone(pkg[:LeadSize]), raw...)
	out = append(out, make([]byte, (8-len(raw)%8)%8)...)
	return append(out, pkg[LeadSize+n+(8-n%8)%8:]...)
}

// sigHeaderPart names what byte i of a signature header holds, and its
// offset in the entry's data.
func sigHeaderPart(h *rpmhdr.Header, i int) (string, int) {
	idx := 16 + 16*len(h.Entries)
	switch {
	case i < 16:
		return "preamble", i
	case i < idx:
		return fmt.Sprintf("index entry of tag %d", h.Entries[(i-16)/16].Tag), (i - 16) % 16
	}
	best := -1
	for j, e := range h.Entries {
		if int(e.Offset) <= i-idx && (best < 0 || e.Offset > h.Entries[best].Offset) {
			best = j
		}
	}
	if best < 0 {
		return "data", i - idx
	}
	return fmt.Sprintf("tag %d", h.Entries[best].Tag), i - idx - int(h.Entries[best].Offset)
}

// sigTag reports whether a part names a signature's data.
func sigTag(part string) bool {
	for _, tag := range []uint32{rpmhdr.SigRSA, rpmhdr.SigDSA, rpmhdr.SigPGP, rpmhdr.SigGPG} {
		if part == fmt.Sprintf("tag %d", tag) {
			return true
		}
	}
	return false
}
