package main

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ProtonMail/go-crypto/openpgp"
	"github.com/ProtonMail/go-crypto/openpgp/armor"
	"github.com/ProtonMail/go-crypto/openpgp/packet"
	"github.com/google/go-containerregistry/pkg/v1/layout"

	"github.com/nodeforge/builder/internal/testutil"
	"github.com/nodeforge/builder/release"
)

const demoVersion = "1.11.0-demo"

// perimeterKey writes an OpenPGP key pair for the perimeter (created
// before the demo base's dates, so it may sign indexes dated by them).
func perimeterKey(t *testing.T, dir string) (priv, pub string) {
	t.Helper()
	created := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	cfg := &packet.Config{Algorithm: packet.PubKeyAlgoRSA, RSABits: 2048, DefaultHash: crypto.SHA256, Time: func() time.Time { return created }}
	e, err := openpgp.NewEntity("Perimeter", "test", "perimeter@nodeforge.invalid", cfg)
	if err != nil {
		t.Fatal(err)
	}
	write := func(name, typ string, ser func(w *bytes.Buffer) error) string {
		var b bytes.Buffer
		w, err := armor.Encode(&b, typ, nil)
		if err != nil {
			t.Fatal(err)
		}
		var body bytes.Buffer
		if err := ser(&body); err != nil {
			t.Fatal(err)
		}
		w.Write(body.Bytes())
		w.Close()
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, b.Bytes(), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	priv = write("perimeter.key.asc", openpgp.PrivateKeyType, func(w *bytes.Buffer) error { return e.SerializePrivate(w, nil) })
	pub = write("perimeter.asc", openpgp.PublicKeyType, func(w *bytes.Buffer) error { return e.Serialize(w) })
	return priv, pub
}

// mirrorCmd runs builder mirror with --report and returns the report.
func mirrorCmd(t *testing.T, args ...string) (*release.MirrorReport, string, error) {
	t.Helper()
	return mirrorWith(t, runBuilder, args...)
}

// mirrorChild is mirrorCmd in a child process.
func mirrorChild(t *testing.T, args ...string) (*release.MirrorReport, string, error) {
	t.Helper()
	return mirrorWith(t, func(t *testing.T, args ...string) (string, error) { return builderProcess(t, args...) }, args...)
}

func mirrorWith(t *testing.T, run func(*testing.T, ...string) (string, error), args ...string) (*release.MirrorReport, string, error) {
	t.Helper()
	report := filepath.Join(t.TempDir(), "parity.json")
	out, err := run(t, append([]string{"mirror", "--report", report}, args...)...)
	b, rerr := os.ReadFile(report)
	if rerr != nil {
		return nil, out, err
	}
	validateSchema(t, "commands.schema.json#/$defs/mirrorReport", b)
	var rep release.MirrorReport
	if jerr := json.Unmarshal(b, &rep); jerr != nil {
		t.Fatalf("parity report: %v", jerr)
	}
	if _, serr := os.Stat(report + ".txt"); serr != nil {
		t.Errorf("no readable parity report beside the JSON: %v", serr)
	}
	return &rep, out, err
}

// cosignVerifyRelease has the stock cosign verify every image of the
// release at prefix (and each child), offline, and find its attestations.
func cosignVerifyRelease(t *testing.T, prefix, pub string, rep *release.MirrorReport) {
	t.Helper()
	for _, it := range rep.Items {
		if it.Kind != release.KindRelease && it.Kind != release.KindChild {
			continue
		}
		ref := prefix + "/" + it.Repo + "@" + it.Digest
		judge(t, "cosign", "verify", "--key", pub, "--insecure-ignore-tlog", "--allow-http-registry", ref)
		if it.Kind == release.KindRelease {
			types := []string{"slsaprovenance1"}
			if it.Repo != release.RepoLock {
				types = append(types, "spdxjson", "cyclonedx")
			}
			for _, typ := range types {
				out := judge(t, "cosign", "verify-attestation", "--key", pub, "--insecure-ignore-tlog", "--allow-http-registry", "--type", typ, ref)
				if !strings.Contains(out, `"payloadType":"application/vnd.in-toto+json"`) {
					t.Errorf("cosign verify-attestation --type %s %s found nothing", typ, ref)
				}
			}
		}
	}
}

// checkReport fails unless the report is OK and carried the whole release.
func checkReport(t *testing.T, rep *release.MirrorReport, withBase bool) {
	t.Helper()
	if rep == nil {
		t.Fatal("no report")
	}
	if !rep.OK || len(rep.Problems) > 0 {
		t.Errorf("mirror not OK: %v", rep.Problems)
	}
	c := rep.Counts()
	// 7 repositories (boot, installer, 4 extensions, lock), 6 children
	// (one per index on x86_64), 13 signed manifests each with a
	// signature, an attestation image and its referrers.
	if c[release.KindRelease] != 7 || c[release.KindChild] != 6 || c[release.KindSignature] != 13 || c[release.KindAttestation] != 13 || c[release.KindReferrer] < 13 {
		t.Errorf("carried %v", c)
	}
	if withBase != (c[release.KindBase] == 1) {
		t.Errorf("base subset carried: %d, want %v", c[release.KindBase], withBase)
	}
	for _, p := range rep.Items {
		if p.Status != "ok" || p.SourceDigest != p.DestinationDigest {
			t.Errorf("%s %s %s: %s (%s -> %s)", p.Kind, p.Repo, p.Tag, p.Status, p.SourceDigest, p.DestinationDigest)
		}
	}
}

// TestMirrorRegistryToRegistry: prefixes rewritten, digests kept, the
// stock cosign verifies at the destination, a second run sends nothing,
// and a destination with the referrers API lists every referrer too.
func TestMirrorRegistryToRegistry(t *testing.T) {
	testutil.Slow(t)
	t.Parallel() // see TestMain
	d := newDemoRelease(t)
	src := testutil.StartRegistry(t, testutil.RegistryOptions{})
	dst := testutil.StartRegistry(t, testutil.RegistryOptions{})
	if _, err := d.publish(t, "--registry", src.Host+"/nodeforge/p11"); err != nil {
		t.Fatal(err)
	}
	from, to := "docker://"+src.Host+"/nodeforge/p11", "docker://"+dst.Host+"/mirror/p11"
	rep, out, err := mirrorCmd(t, "--version", demoVersion, "--key", d.devPub, from, to)
	if err != nil {
		t.Fatalf("mirror: %v\n%s", err, out)
	}
	checkReport(t, rep, false)
	if rep.Copy.Uploaded.Blobs == 0 || !rep.SignaturesChecked {
		t.Errorf("first mirror: %+v", rep.Copy)
	}
	cosignVerifyRelease(t, dst.Host+"/mirror/p11", d.devPub, rep)

	again, out, err := mirrorCmd(t, "--version", demoVersion, "--key", d.devPub, from, to)
	if err != nil {
		t.Fatalf("mirror again: %v\n%s", err, out)
	}
	if again.Copy.Uploaded.BlobBytes != 0 || again.Copy.Copied != 0 {
		t.Errorf("second mirror sent %+v", again.Copy)
	}
	t.Logf("first mirror: %d manifests, %d blobs, %d bytes; second: %d copied, %d bytes",
		rep.Copy.Copied, rep.Copy.Uploaded.Blobs, rep.Copy.Uploaded.BlobBytes, again.Copy.Copied, again.Copy.Uploaded.BlobBytes)

	// Without a key the mirror checks parity only, and says so.
	plain, _, err := mirrorCmd(t, "--version", demoVersion, from, "docker://"+dst.Host+"/nokey")
	if err != nil || plain.SignaturesChecked {
		t.Errorf("mirror without --key: %v, signatures checked %v", err, plain != nil && plain.SignaturesChecked)
	}
}

// TestMirrorThroughArchive carries the release and its package base subset
// out of one registry into an archive and into a second registry, verifies
// it there with the stock cosign, rebuilds the release inside the
// "perimeter" from the subset alone with identical digests, and refuses
// archives with a flipped byte.
func TestMirrorThroughArchive(t *testing.T) {
	testutil.Slow(t)
	d := newDemoRelease(t)
	outside := testutil.StartRegistry(t, testutil.RegistryOptions{})
	inside := testutil.StartRegistry(t, testutil.RegistryOptions{})
	if _, err := d.publish(t, "--registry", outside.Host+"/nodeforge/p11"); err != nil {
		t.Fatal(err)
	}
	work := t.TempDir()
	basePriv, basePub := perimeterKey(t, work)
	if _, err := runBuilder(t, "keys", "generate", "--out", filepath.Join(work, "mirror")); err != nil {
		t.Fatal(err)
	}
	mirrorKey, mirrorPub := filepath.Join(work, "mirror/cosign.key"), filepath.Join(work, "mirror/cosign.pub")
	archive := filepath.Join(work, "p11.tar")

	rep, out, err := mirrorCmd(t, "--version", demoVersion, "--key", d.devPub, "--sign-key", mirrorKey,
		"--include-base", "--spec", d.spec, "--cache", d.cache, "--base-key", basePriv,
		"docker://"+outside.Host+"/nodeforge/p11", "oci-archive:"+archive)
	if err != nil {
		t.Fatalf("export: %v\n%s", err, out)
	}
	checkReport(t, rep, true)
	if rep.Archive == nil || !rep.Archive.Pinned || rep.Archive.Files == 0 {
		t.Fatalf("export archive: %+v", rep.Archive)
	}
	if _, err := os.Stat(archive + ".staging"); !os.IsNotExist(err) {
		t.Errorf("staging directory left behind: %v", err)
	}
	// skopeo reads the archive as the oci-archive it is.
	judge(t, "skopeo", "inspect", "--raw", "oci-archive:"+archive+":installer:"+demoVersion)

	// Flipped bytes: in a blob, in the manifest. Nothing reaches the registry.
	for _, which := range []string{"blob", "manifest"} {
		bad := flipArchiveByte(t, archive, which)
		_, out, err := mirrorCmd(t, "--key", d.devPub, "--archive-key", mirrorPub, "oci-archive:"+bad, "docker://"+inside.Host+"/tampered")
		if err == nil || !strings.Contains(err.Error(), "tampered") {
			t.Errorf("archive with a flipped byte in its %s: %v\n%s", which, err, out)
		}
	}
	// A manifest signed by another key than the pinned one is refused too.
	if _, _, err := mirrorCmd(t, "--archive-key", d.devPub, "oci-archive:"+archive, "docker://"+inside.Host+"/tampered"); err == nil {
		t.Error("archive accepted with a key that did not sign it")
	}
	if cat := catalog(t, inside.Host); strings.Contains(cat, "tampered") {
		t.Errorf("a refused archive reached the registry: %s", cat)
	}

	// Into the perimeter.
	baseOut := filepath.Join(work, "perimeter-base")
	rep, out, err = mirrorCmd(t, "--key", d.devPub, "--archive-key", mirrorPub, "--base-out", baseOut,
		"oci-archive:"+archive, "docker://"+inside.Host+"/perimeter/p11")
	if err != nil {
		t.Fatalf("import: %v\n%s", err, out)
	}
	checkReport(t, rep, true)
	cosignVerifyRelease(t, inside.Host+"/perimeter/p11", d.devPub, rep)
	if out, err := runBuilder(t, "verify", "--key", d.devPub, "--version", demoVersion, "docker://"+inside.Host+"/perimeter/p11"); err != nil {
		t.Errorf("builder verify in the perimeter: %v\n%s", err, out)
	}

	// The subset's indexes verify with the perimeter's key and resolve.
	for _, dist := range []string{"x86_64", "noarch"} {
		if _, err := os.Stat(filepath.Join(baseOut, "repos/demo", dist, "base/release")); err != nil {
			t.Fatal(err)
		}
	}
	if out, err := runBuilder(t, "resolve", "--repo", filepath.Join(baseOut, "repos/demo/x86_64"), "--repo", filepath.Join(baseOut, "repos/demo/noarch"),
		"--keyring", basePub, "--cache", t.TempDir(), "bash", "containerd"); err != nil {
		t.Errorf("resolve against the subset: %v\n%s", err, out)
	}

	// Rebuild inside: the original base is gone, the cache is empty.
	if err := os.RemoveAll(filepath.Join(d.dir, "alt")); err != nil {
		t.Fatal(err)
	}
	rebuilt := filepath.Join(work, "rebuilt")
	t.Chdir(baseOut)
	if out, err := runBuilder(t, "build", "-q", "--spec", "spec.yaml", "--lock", "lock.json", "--repo-url", "demo=repos/demo",
		"--cache", filepath.Join(work, "empty-cache"), "--out", rebuilt); err != nil {
		t.Fatalf("rebuild in the perimeter: %v\n%s", err, out)
	}
	inPerimeter := mustRemote(t, inside.Host+"/perimeter/p11")
	same := 0
	for repo, dir := range map[string]string{"boot": "oci", "installer": "installer", "extensions/zfs": "extensions/zfs", "extensions/cri": "extensions/cri"} {
		p, err := layout.FromPath(filepath.Join(rebuilt, dir))
		if err != nil {
			t.Fatal(err)
		}
		idx, err := p.ImageIndex()
		if err != nil {
			t.Fatal(err)
		}
		got, _ := idx.Digest()
		want, err := inPerimeter.Head(context.Background(), repo, demoVersion)
		if err != nil {
			t.Fatal(err)
		}
		if got != want.Digest {
			t.Errorf("rebuilt %s: %s, released %s", repo, got, want.Digest)
		} else {
			same++
		}
	}
	t.Logf("rebuilt in the perimeter from the base subset: %d of 4 images with identical digests", same)

	// The rebuild is the audit's reproducibility evidence, like with like:
	// the same compressors wrote both.
	arep, _, out, err := runAudit(t, "--key", d.devPub, "--version", demoVersion, "--reproduced", filepath.Join(rebuilt, "report.json"),
		"docker://"+inside.Host+"/perimeter/p11")
	if err != nil || arep.Verdict != "pass" || !arep.Policy.Reproducibility.OK || arep.Policy.Reproducibility.Compared < 5 || arep.Policy.Reproducibility.Like != "same" {
		t.Errorf("audit with the perimeter rebuild as evidence: %v, %s, %+v: %v\n%s", err, arep.Verdict, arep.Policy.Reproducibility, arep.Reasons, out)
	}
}

// catalog lists a registry's repositories.
func catalog(t *testing.T, host string) string {
	t.Helper()
	return judge(t, "crane", "catalog", "--insecure", host)
}

// flipArchiveByte copies an archive with one byte flipped in the middle of
// its largest blob or of its manifest.
func flipArchiveByte(t *testing.T, archive, which string) string {
	t.Helper()
	b, err := os.ReadFile(archive)
	if err != nil {
		t.Fatal(err)
	}
	entries := tarEntries(t, b)
	var pick tarEntry
	for _, e := range entries {
		switch which {
		case "manifest":
			if e.name == release.ArchiveManifestName {
				pick = e
			}
		default:
			if strings.HasPrefix(e.name, "blobs/") && e.size > pick.size {
				pick = e
			}
		}
	}
	if pick.name == "" {
		t.Fatalf("no %s in the archive", which)
	}
	bad := bytes.Clone(b)
	bad[pick.offset+pick.size/2] ^= 0x01
	p := filepath.Join(t.TempDir(), "flipped-"+which+".tar")
	if err := os.WriteFile(p, bad, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestMirrorKillResume kills (SIGKILL) or interrupts (SIGINT) the import
// of an archive at ten points, into a registry prefix that already holds
// an earlier version: the earlier version still verifies, the rerun ends in
// a mirror that verifies, and no unpacking directory is left.
func TestMirrorKillResume(t *testing.T) {
	testutil.Slow(t)
	t.Parallel() // see TestMain
	d := newDemoRelease(t)
	reg := testutil.StartRegistry(t, testutil.RegistryOptions{})
	if _, err := d.publish(t, "--registry", reg.Host+"/nodeforge/p11"); err != nil {
		t.Fatal(err)
	}
	const v2 = "1.11.1-demo"
	setVersion(t, d, v2)
	if _, err := d.publish(t, "--registry", reg.Host+"/nodeforge/p11"); err != nil {
		t.Fatal(err)
	}
	archive := filepath.Join(t.TempDir(), "p11.tar")
	if _, out, err := mirrorCmd(t, "--version", v2, "--key", d.devPub, "--split-size", "256K",
		"docker://"+reg.Host+"/nodeforge/p11", "oci-archive:"+archive); err != nil {
		t.Fatalf("export: %v\n%s", err, out)
	}
	if _, err := os.Stat(archive + ".001"); err != nil {
		t.Fatalf("--split-size 256K wrote no second part: %v", err)
	}
	work := t.TempDir()
	// How long a whole import takes, as a child process.
	warmBuilder(t)
	start := time.Now()
	if out, err := builderProcess(t, "mirror", "--work", work, "oci-archive:"+archive, "docker://"+reg.Host+"/timing"); err != nil {
		t.Fatalf("import: %v\n%s", err, out)
	}
	full := time.Since(start)
	interrupted := 0
	var first *release.MirrorReport
	for i, p := range killPoints(full) {
		prefix := "docker://" + reg.Host + "/killed" + string(rune('a'+i))
		// The earlier version is there already.
		if out, err := builderProcess(t, "mirror", "--version", demoVersion, "docker://"+reg.Host+"/nodeforge/p11", prefix); err != nil {
			t.Fatalf("seeding %s: %v\n%s", prefix, err, out)
		}
		out, err := signalProcess(t, p.at, p.sig, "mirror", "--work", work, "oci-archive:"+archive, prefix)
		if err != nil {
			interrupted++
		}
		t.Logf("%v at %v of %v: %v %s", p.sig, p.at, full, err, lastLine(out))
		if out, err := builderProcess(t, "verify", "--key", d.devPub, "--version", demoVersion, prefix); err != nil {
			t.Fatalf("the earlier version no longer verifies after %v at %v: %v\n%s", p.sig, p.at, err, out)
		}
		rep, out, err := mirrorChild(t, "--key", d.devPub, "--work", work, "oci-archive:"+archive, prefix)
		if err != nil {
			t.Fatalf("import after %v at %v of %v: %v\n%s", p.sig, p.at, full, err, out)
		}
		checkReport(t, rep, false)
		if first == nil {
			first = rep
		}
		// mirror --key verified v2 at the destination; checkReport saw it.
		if left := leftovers(work); len(left) > 0 {
			t.Errorf("after the rerun: leftovers %v", left)
		}
		t.Logf("the second run copied %d manifests, found %d", rep.Copy.Copied, rep.Copy.Present)
	}
	if interrupted == 0 {
		t.Errorf("no signal landed before the import finished (a whole import takes %v)", full)
	}
	cosignVerifyRelease(t, reg.Host+"/killeda", d.devPub, first)
}

type tarEntry struct {
	name         string
	offset, size int64
}

// tarEntries lists a tar's entries with the offset of each one's data.
func tarEntries(t *testing.T, b []byte) []tarEntry {
	t.Helper()
	r := bytes.NewReader(b)
	tr := tar.NewReader(r)
	var out []tarEntry
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, tarEntry{name: h.Name, offset: int64(len(b)) - int64(r.Len()), size: h.Size})
	}
}

// builderProcess runs the builder as a child process (see
// builderCommand) to its end.
func builderProcess(t *testing.T, args ...string) (string, error) {
	t.Helper()
	return signalProcess(t, 0, 0, args...)
}

// TestMirrorIncremental: the archive of a second version leaves out the
// layers the first archive carried; imported after the first it completes
// the mirror, imported alone it is refused with the reason.
func TestMirrorIncremental(t *testing.T) {
	testutil.Slow(t)
	t.Parallel() // see TestMain
	d := newDemoRelease(t)
	reg := testutil.StartRegistry(t, testutil.RegistryOptions{})
	src := "docker://" + reg.Host + "/nodeforge/p11"
	if _, err := d.publish(t, "--registry", reg.Host+"/nodeforge/p11"); err != nil {
		t.Fatal(err)
	}
	work := t.TempDir()
	first := filepath.Join(work, "1.tar")
	rep1, out, err := mirrorCmd(t, "--version", demoVersion, "--key", d.devPub, src, "oci-archive:"+first)
	if err != nil {
		t.Fatalf("export: %v\n%s", err, out)
	}
	// A second version of the same base.
	spec, err := os.ReadFile(d.spec)
	if err != nil {
		t.Fatal(err)
	}
	const v2 = "1.11.1-demo"
	if err := os.WriteFile(d.spec, bytes.Replace(spec, []byte("version: "+demoVersion), []byte("version: "+v2), 1), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(d.dir, "demo.lock.json")); err != nil {
		t.Fatal(err)
	}
	if _, err := d.publish(t, "--registry", reg.Host+"/nodeforge/p11"); err != nil {
		t.Fatal(err)
	}
	second := filepath.Join(work, "2.tar")
	rep2, out, err := mirrorCmd(t, "--version", v2, "--key", d.devPub, "--since", "oci-archive:"+first, src, "oci-archive:"+second)
	if err != nil {
		t.Fatalf("incremental export: %v\n%s", err, out)
	}
	a1, a2 := rep1.Archive, rep2.Archive
	if a2.Previous != a1.Manifest || a2.Bytes >= a1.Bytes || a2.Carried >= a2.Files {
		t.Errorf("incremental archive: %+v after %+v", a2, a1)
	}
	t.Logf("full archive: %d files, %d bytes; incremental: %d of %d files, %d bytes", a1.Files, a1.Bytes, a2.Carried, a2.Files, a2.Bytes)

	// Alone, it lacks layers: refused, naming the previous archive.
	_, out, err = mirrorCmd(t, "--key", d.devPub, "oci-archive:"+second, "docker://"+reg.Host+"/alone")
	if err == nil || !strings.Contains(err.Error(), a1.Manifest) {
		t.Errorf("incremental archive imported alone: %v\n%s", err, out)
	}
	// After the first, it completes the mirror of the second version.
	dst := "docker://" + reg.Host + "/perimeter"
	if _, out, err := mirrorCmd(t, "--key", d.devPub, "oci-archive:"+first, dst); err != nil {
		t.Fatalf("import of the first: %v\n%s", err, out)
	}
	rep, out, err := mirrorCmd(t, "--key", d.devPub, "oci-archive:"+second, dst)
	if err != nil {
		t.Fatalf("import of the incremental: %v\n%s", err, out)
	}
	checkReport(t, rep, false)
	if out, err := runBuilder(t, "verify", "--key", d.devPub, "--version", v2, dst); err != nil {
		t.Errorf("verify %s: %v\n%s", v2, err, out)
	}
}
