package main

// The fault-injection suite of "trust that holds under faults": each case
// runs on the demo release and checks the outcome a careful operator would
// expect (nothing unverified passes, nothing half-written stays, nothing of
// the user's is lost).

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io/fs"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nodeforge/builder/internal/testutil"
)

// treeHash hashes every path, mode, link target and content under root.
func treeHash(t *testing.T, root string) string {
	t.Helper()
	h := sha256.New()
	filepath.WalkDir(root, func(p string, e fs.DirEntry, err error) error {
		if err != nil {
			fmt.Fprintf(h, "error %s\n", p)
			return nil
		}
		fi, _ := os.Lstat(p)
		rel, _ := filepath.Rel(root, p)
		fmt.Fprintf(h, "%s %v", rel, fi.Mode())
		switch {
		case fi.Mode()&fs.ModeSymlink != 0:
			target, _ := os.Readlink(p)
			fmt.Fprintf(h, " -> %s", target)
		case fi.Mode().IsRegular():
			b, _ := os.ReadFile(p)
			fmt.Fprintf(h, " %x", sha256.Sum256(b))
		}
		h.Write([]byte{'\n'})
		return nil
	})
	return hex.EncodeToString(h.Sum(nil))
}

// layoutBlobs finds one blob of each kind of the boot image in a layout.
func layoutBlobs(t *testing.T, layout, repo, tag string) map[string]string {
	t.Helper()
	var idx struct {
		Manifests []struct {
			Digest      string            `json:"digest"`
			Annotations map[string]string `json:"annotations"`
		} `json:"manifests"`
	}
	read := func(d string, v any) {
		b, err := os.ReadFile(filepath.Join(layout, "blobs", "sha256", strings.TrimPrefix(d, "sha256:")))
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(b, v); err != nil {
			t.Fatal(err)
		}
	}
	b, err := os.ReadFile(filepath.Join(layout, "index.json"))
	if err != nil {
		t.Fatal(err)
	}
	json.Unmarshal(b, &idx)
	byRef := map[string]string{}
	for _, m := range idx.Manifests {
		byRef[m.Annotations["org.opencontainers.image.ref.name"]] = m.Digest
	}
	type manifest struct {
		Manifests []struct {
			Digest string `json:"digest"`
		} `json:"manifests"`
		Config struct {
			Digest string `json:"digest"`
		} `json:"config"`
		Layers []struct {
			Digest string `json:"digest"`
		} `json:"layers"`
	}
	out := map[string]string{"index": byRef[repo+":"+tag]}
	var top, child, sig, att manifest
	read(out["index"], &top)
	out["manifest"] = top.Manifests[0].Digest
	read(out["manifest"], &child)
	out["config"], out["layer"] = child.Config.Digest, child.Layers[0].Digest
	hexTop := strings.TrimPrefix(out["index"], "sha256:")
	read(byRef[repo+":sha256-"+hexTop+".sig"], &sig)
	read(byRef[repo+":sha256-"+hexTop+".att"], &att)
	out["signature"], out["attestation"] = sig.Layers[0].Digest, att.Layers[0].Digest
	for k, v := range out {
		if v == "" {
			t.Fatalf("no %s blob found", k)
		}
	}
	return out
}

// Acceptance 1: a flipped or deleted blob of any kind fails verify and
// audit, naming the blob; stock skopeo agrees.
func TestTamperedLayoutRefused(t *testing.T) {
	testutil.Slow(t)
	t.Parallel() // see TestMain
	d := newDemoRelease(t)
	if _, err := d.publish(t); err != nil {
		t.Fatal(err)
	}
	layout := filepath.Join(d.dir, "release", "dev")
	blobs := layoutBlobs(t, layout, "boot", demoVersion)
	hexTop := strings.TrimPrefix(blobs["index"], "sha256:")
	kinds := []string{"layer", "config", "manifest", "index", "signature", "attestation"}
	for _, kind := range kinds {
		for _, action := range []string{"flip", "delete"} {
			t.Run(kind+"/"+action, func(t *testing.T) {
				dg := blobs[kind]
				p := filepath.Join(layout, "blobs", "sha256", strings.TrimPrefix(dg, "sha256:"))
				orig, err := os.ReadFile(p)
				if err != nil {
					t.Fatal(err)
				}
				defer os.WriteFile(p, orig, 0o644)
				if action == "flip" {
					b := bytes.Clone(orig)
					b[len(b)/2] ^= 1
					os.WriteFile(p, b, 0o644)
				} else {
					os.Remove(p)
				}
				// Child processes without the race detector: twelve cases
				// of verify and audit cost minutes with it (the in-process
				// tests keep it on the same code).
				out, err := builderProcess(t, "verify", "--key", d.devPub, "--version", demoVersion, "oci:"+layout)
				if err == nil || !strings.Contains(out, dg) {
					t.Errorf("verify: %v, want a failure naming %s\n%s", err, dg, out)
				}
				rep, _, stdout, err := auditChild(t, "--key", d.devPub, "--version", demoVersion, layout)
				if err == nil || rep == nil || rep.Verdict != "fail" || !strings.Contains(strings.Join(rep.Reasons, "\n")+stdout, dg) {
					reasons := []string{}
					if rep != nil {
						reasons = rep.Reasons
					}
					t.Errorf("audit: %v, want a fail naming %s; reasons %q", err, dg, reasons)
				}
				// The independent judge: skopeo copying the image (or
				// the signature or attestation image) out of the layout.
				ref := "boot:" + demoVersion
				switch kind {
				case "signature":
					ref = "boot:sha256-" + hexTop + ".sig"
				case "attestation":
					ref = "boot:sha256-" + hexTop + ".att"
				}
				skopeo := testutil.NeedTool(t, "skopeo")
				sk, err := exec.Command(skopeo, "copy", "--all", "oci:"+layout+":"+ref, "dir:"+t.TempDir()).CombinedOutput()
				switch {
				case err == nil && kind == "index" && action == "flip":
					// skopeo 1.9 does not check the digest of the index it
					// reads from a layout; what it read is not what the
					// release names, and that is what we refuse.
					raw, _ := exec.Command(skopeo, "inspect", "--raw", "oci:"+layout+":"+ref).Output()
					if fmt.Sprintf("sha256:%x", sha256.Sum256(raw)) == dg {
						t.Error("skopeo read the index unchanged")
					}
					t.Logf("skopeo copies a flipped index without checking its digest; the bytes it read hash to another digest than %s", dg)
				case err == nil:
					t.Errorf("skopeo copied %s with its %s %s: %s", ref, kind, action, sk)
				}
			})
		}
	}
}

// Acceptance 2: build --out on something that is not a build output is
// refused and changes nothing.
func TestBuildOutRefusesForeign(t *testing.T) {
	d := newDemoRelease(t)
	if _, err := runBuilder(t, "lock", "-q", "--spec", d.spec, "--cache", d.cache); err != nil {
		t.Fatal(err)
	}
	base := t.TempDir()
	foreign := filepath.Join(base, "photos")
	os.MkdirAll(filepath.Join(foreign, "2026"), 0o755)
	os.WriteFile(filepath.Join(foreign, "2026", "a.jpg"), []byte("jpeg"), 0o644)
	file := filepath.Join(base, "thesis.tex")
	os.WriteFile(file, []byte("\\documentclass{article}"), 0o644)
	link := filepath.Join(base, "link")
	os.Symlink(foreign, link)
	for _, tc := range []struct{ name, out, want string }{
		{"foreign directory", foreign, `"2026/"`},
		{"file", file, "is a file"},
		{"spec directory", d.dir, `"spec.yaml"`},
		{"symlink to a foreign directory", link, `"2026/"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before, beforeSpec := treeHash(t, base), treeHash(t, d.dir)
			_, err := runBuilder(t, "build", "-q", "--spec", d.spec, "--cache", d.cache, "--out", tc.out)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("build --out %s: %v, want a refusal naming %s", tc.out, err, tc.want)
			}
			if treeHash(t, base) != before || treeHash(t, d.dir) != beforeSpec {
				t.Error("the refused build changed files")
			}
			if fi, err := os.Lstat(link); err != nil || fi.Mode()&fs.ModeSymlink == 0 {
				t.Error("the symlink was replaced")
			}
		})
	}
	// A symlink to an earlier build's output is followed: the target is
	// rebuilt, the link stays.
	out := filepath.Join(base, "out")
	if _, err := runBuilder(t, "build", "-q", "--spec", d.spec, "--cache", d.cache, "--out", out); err != nil {
		t.Fatal(err)
	}
	outLink := filepath.Join(base, "out-link")
	os.Symlink(out, outLink)
	if _, err := runBuilder(t, "build", "-q", "--spec", d.spec, "--cache", d.cache, "--out", outLink); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Lstat(outLink); err != nil || fi.Mode()&fs.ModeSymlink == 0 {
		t.Error("the symlink to the output was replaced")
	}
	if _, err := os.Stat(filepath.Join(out, "report.json")); err != nil {
		t.Error(err)
	}
	// A user's file deep inside the earlier output: refused, named, kept.
	os.MkdirAll(filepath.Join(out, "x86_64", "mydata"), 0o755)
	os.WriteFile(filepath.Join(out, "x86_64", "mydata", "notes.txt"), []byte("mine"), 0o644)
	before := treeHash(t, out)
	if _, err := runBuilder(t, "build", "-q", "--spec", d.spec, "--cache", d.cache, "--out", out); err == nil || !strings.Contains(err.Error(), `"x86_64/mydata/"`) {
		t.Errorf("build over an output with a user's subdirectory: %v, want a refusal naming it", err)
	}
	if treeHash(t, out) != before {
		t.Error("the refused build changed the output")
	}
}

// leftovers lists the temporary files and directories the builder makes
// (".tmp-*", ".*.build-*", "nodeforge-import-*") under the given roots.
func leftovers(roots ...string) []string {
	var out []string
	for _, root := range roots {
		filepath.WalkDir(root, func(p string, e fs.DirEntry, err error) error {
			if err != nil {
				return nil
			}
			n := e.Name()
			if strings.HasPrefix(n, ".tmp-") || strings.Contains(n, ".build-") || strings.HasPrefix(n, "nodeforge-import-") {
				out = append(out, p)
				if e.IsDir() {
					return filepath.SkipDir
				}
			}
			return nil
		})
	}
	return out
}

// signalProcess runs the builder as a child process (see builderCommand)
// and sends it sig after at (never when sig is 0). After SIGINT nothing
// more is sent: the builder must stop by itself.
func signalProcess(t *testing.T, at time.Duration, sig syscall.Signal, args ...string) (string, error) {
	t.Helper()
	cmd := builderCommand(t, args...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	if sig != 0 {
		timer := time.AfterFunc(at, func() { cmd.Process.Signal(sig) })
		defer timer.Stop()
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		return out.String(), err
	case <-time.After(at + 5*time.Minute):
		cmd.Process.Kill()
		t.Fatalf("builder %s did not stop (signal %v after %v): %s", strings.Join(args, " "), sig, at, out.String())
		return "", nil
	}
}

// killPoints are ten points of a run of length full, each with its signal.
func killPoints(full time.Duration) []struct {
	at  time.Duration
	sig syscall.Signal
} {
	var out []struct {
		at  time.Duration
		sig syscall.Signal
	}
	for i := range 10 {
		sig := syscall.SIGKILL
		if i%2 == 1 {
			sig = syscall.SIGINT
		}
		out = append(out, struct {
			at  time.Duration
			sig syscall.Signal
		}{time.Duration(float64(full) * (0.05 + 0.09*float64(i))), sig})
	}
	return out
}

// setVersion rewrites the spec's version and removes its lock.
func setVersion(t *testing.T, d *demoRelease, version string) {
	t.Helper()
	spec, err := os.ReadFile(d.spec)
	if err != nil {
		t.Fatal(err)
	}
	i := bytes.Index(spec, []byte("\nversion: "))
	j := bytes.IndexByte(spec[i+1:], '\n')
	spec = append(append(bytes.Clone(spec[:i]), []byte("\nversion: "+version)...), spec[i+1+j:]...)
	os.WriteFile(d.spec, spec, 0o644)
	os.Remove(filepath.Join(d.dir, "demo.lock.json"))
}

// Acceptance 3: a release into a layout that holds another version, killed
// (SIGKILL) or interrupted (SIGINT) at ten points: the earlier version
// still verifies, the rerun completes, nothing temporary is left.
func TestReleaseKilledAtTenPoints(t *testing.T) {
	testutil.Slow(t)
	t.Parallel() // see TestMain
	d := newDemoRelease(t)
	if _, err := d.publish(t); err != nil {
		t.Fatal(err)
	}
	layout := filepath.Join(d.dir, "release", "dev")
	args := func() []string {
		return []string{"release", "-q", "--branch", "p11", "--spec", d.spec, "--cache", d.cache, "--key", d.devKey}
	}
	setVersion(t, d, "1.12.0-time")
	warmBuilder(t)
	start := time.Now()
	if out, err := builderProcess(t, args()...); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	full := time.Since(start)
	for i, p := range killPoints(full) {
		version := fmt.Sprintf("1.12.%d-demo", i+1)
		setVersion(t, d, version)
		out, err := signalProcess(t, p.at, p.sig, args()...)
		t.Logf("%v at %v of %v: %v %s", p.sig, p.at, full, err, lastLine(out))
		if p.sig == syscall.SIGINT && err != nil && !strings.Contains(out, "interrupted") {
			t.Errorf("SIGINT: the builder did not say it was interrupted: %s", out)
		}
		if out, err := builderProcess(t, "verify", "--key", d.devPub, "--version", demoVersion, "oci:"+layout); err != nil {
			t.Fatalf("the earlier version no longer verifies after %v at %v: %v\n%s", p.sig, p.at, err, out)
		}
		if out, err := builderProcess(t, args()...); err != nil {
			t.Fatalf("rerun after %v at %v: %v\n%s", p.sig, p.at, err, out)
		}
		if out, err := builderProcess(t, "verify", "--key", d.devPub, "--version", version, "oci:"+layout); err != nil {
			t.Fatalf("%s after the rerun: %v\n%s", version, err, out)
		}
		if left := leftovers(d.dir); len(left) > 0 {
			t.Errorf("after the rerun: leftovers %v", left)
		}
	}
}

// Acceptance 3 (build): a build killed or interrupted at ten points leaves
// the previous output whole (or the new one), and the rerun completes and
// leaves nothing temporary.
func TestBuildKilledAtTenPoints(t *testing.T) {
	testutil.Slow(t)
	d := newDemoRelease(t)
	if _, err := runBuilder(t, "lock", "-q", "--spec", d.spec, "--cache", d.cache); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "out")
	// Each build from scratch: the step caches would make every rerun short.
	args := []string{"build", "-q", "--no-step-caches", "--spec", d.spec, "--cache", d.cache, "--out", out}
	warmBuilder(t)
	start := time.Now()
	if o, err := builderProcess(t, args...); err != nil {
		t.Fatalf("%v\n%s", err, o)
	}
	full := time.Since(start)
	want := treeHash(t, out)
	for _, p := range killPoints(full) {
		o, err := signalProcess(t, p.at, p.sig, args...)
		t.Logf("%v at %v of %v: %v %s", p.sig, p.at, full, err, lastLine(o))
		if got := treeHash(t, out); got != want {
			t.Fatalf("the output changed after %v at %v", p.sig, p.at)
		}
		if _, err := runBuilder(t, args...); err != nil {
			t.Fatalf("rerun: %v", err)
		}
		if left := leftovers(filepath.Dir(out), d.cache); len(left) > 0 {
			t.Errorf("after the rerun: leftovers %v", left)
		}
	}
}

// Acceptance 5: two releases of different versions at once, as separate
// processes, into one layout, each locking and building on one shared
// cold cache (so two locks and two builds run on it at once too): every
// run succeeds (or waits its turn) and both versions verify, 20 times.
func TestConcurrentRuns(t *testing.T) {
	testutil.Slow(t)
	t.Parallel() // see TestMain
	a := newDemoRelease(t)
	b := &demoRelease{dir: filepath.Join(t.TempDir(), "demo")}
	if err := exec.Command("cp", "-a", a.dir, b.dir).Run(); err != nil {
		t.Fatal(err)
	}
	b.spec, b.devKey, b.devPub = filepath.Join(b.dir, "spec.yaml"), filepath.Join(b.dir, "keys/dev/cosign.key"), filepath.Join(b.dir, "keys/dev/cosign.pub")
	const vb = "1.11.1-demo"
	setVersion(t, b, vb)
	const rounds = 20
	for round := range rounds {
		start := time.Now()
		cache := filepath.Join(t.TempDir(), "cache")
		layout := filepath.Join(t.TempDir(), "shared")
		var wg sync.WaitGroup
		errs := make([]error, 2)
		outs := make([]string, 2)
		for i, d := range []*demoRelease{a, b} {
			os.Remove(filepath.Join(d.dir, "demo.lock.json"))
			wg.Add(1)
			go func() {
				defer wg.Done()
				outs[i], errs[i] = builderProcess(t, "release", "-q", "--branch", "p11", "--spec", d.spec, "--cache", cache, "--key", d.devKey, "--layout", layout)
			}()
		}
		wg.Wait()
		for i, err := range errs {
			if err != nil {
				t.Fatalf("round %d: %v\n%s", round, err, outs[i])
			}
		}
		for _, v := range []string{demoVersion, vb} {
			if out, err := builderProcess(t, "verify", "--key", a.devPub, "--version", v, "oci:"+layout); err != nil {
				t.Fatalf("round %d: %s: %v\n%s", round, v, err, out)
			}
		}
		if round == 0 || round == rounds-1 {
			t.Logf("round %d: %v", round, time.Since(start).Round(time.Millisecond))
		}
	}
}

// Acceptance 6: a flipped byte in a cached package is never pinned or
// used: lock and build fetch it again, naming it.
func TestCachedPackageFlipped(t *testing.T) {
	d := newDemoRelease(t)
	lockPath := filepath.Join(d.dir, "demo.lock.json")
	if _, err := runBuilder(t, "lock", "-q", "--spec", d.spec, "--cache", d.cache); err != nil {
		t.Fatal(err)
	}
	want, _ := os.ReadFile(lockPath)
	out := filepath.Join(t.TempDir(), "out")
	if _, err := runBuilder(t, "build", "-q", "--no-step-caches", "--spec", d.spec, "--cache", d.cache, "--out", out); err != nil {
		t.Fatal(err)
	}
	wantOut := treeHash(t, out)
	// The lock fetches by the index's digest (BLAKE2b for ALT), the build
	// by the sha256 the lock pins: flip a package in the directory the
	// command reads.
	flipCached := func(algo string) string {
		var rpms []string
		filepath.WalkDir(filepath.Join(d.cache, algo), func(p string, e fs.DirEntry, err error) error {
			if err == nil && e.Type().IsRegular() {
				rpms = append(rpms, p)
			}
			return nil
		})
		sort.Strings(rpms)
		if len(rpms) == 0 {
			t.Fatalf("no packages cached under %s/", algo)
		}
		p := rpms[len(rpms)/2]
		b, _ := os.ReadFile(p)
		b[200] ^= 1 // same size, another digest
		os.WriteFile(p, b, 0o644)
		return p
	}
	flipped := flipCached("blake2b")
	os.Remove(lockPath)
	stderr, err := builderProcess(t, "lock", "--spec", d.spec, "--cache", d.cache)
	if err != nil {
		t.Fatalf("lock: %v\n%s", err, stderr)
	}
	if got, _ := os.ReadFile(lockPath); !bytes.Equal(got, want) {
		t.Error("the lock pinned something else after a cached package was flipped")
	}
	if !strings.Contains(stderr, flipped) {
		t.Errorf("lock did not name the damaged cache entry %s:\n%s", flipped, stderr)
	}
	flipped = flipCached("sha256")
	stderr, err = builderProcess(t, "build", "--spec", d.spec, "--cache", d.cache, "--out", out)
	if err != nil {
		t.Fatalf("build: %v\n%s", err, stderr)
	}
	if !strings.Contains(stderr, flipped) {
		t.Errorf("build did not name the damaged cache entry %s:\n%s", flipped, stderr)
	}
	if treeHash(t, out) != wantOut {
		t.Error("the build output differs after a cached package was flipped")
	}
}

// Acceptance 7: a server that accepts connections and never answers makes
// release and verify fail within the timeout, naming the host.
func TestStalledServer(t *testing.T) {
	testutil.Slow(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	var mu sync.Mutex
	var conns []net.Conn
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c) // held open, never answered
			mu.Unlock()
		}
	}()
	defer func() {
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
	}()
	host := ln.Addr().String()
	d := newDemoRelease(t)
	for _, args := range [][]string{
		{"release", "-q", "--branch", "p11", "--spec", d.spec, "--cache", d.cache, "--key", d.devKey, "--registry", host + "/stalled", "--timeout", "2s"},
		{"verify", "--key", d.devPub, "--version", demoVersion, "--timeout", "2s", "docker://" + host + "/stalled"},
	} {
		start := time.Now()
		_, err := runBuilder(t, args...)
		took := time.Since(start)
		if err == nil || !strings.Contains(err.Error(), host) {
			t.Errorf("%s: %v, want an error naming %s", args[0], err, host)
		}
		if took > 15*time.Second {
			t.Errorf("%s took %v with --timeout 2s", args[0], took)
		}
		t.Logf("%s: %v after %v", args[0], err, took.Round(time.Millisecond))
	}
}

// smallDisk mounts a tmpfs of the given size (root only: skipped on a
// workstation that cannot, required in CI) and returns its directory and
// a function that gives it more room.
func smallDisk(t *testing.T, size string) (string, func(size string)) {
	t.Helper()
	dir := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size="+size, "tmpfs", dir).CombinedOutput(); err != nil {
		testutil.Missing(t, fmt.Sprintf("a tmpfs mount (%v: %s)", err, out))
	}
	t.Cleanup(func() { exec.Command("umount", "-l", dir).Run() })
	return dir, func(size string) {
		if out, err := exec.Command("mount", "-o", "remount,size="+size, dir).CombinedOutput(); err != nil {
			t.Fatalf("remount: %v: %s", err, out)
		}
	}
}

// Acceptance 4: a full disk under the layout, and under the cache: a
// clear error; once there is room again, the rerun completes and the
// release pulls with skopeo and verifies.
func TestFullDisk(t *testing.T) {
	testutil.Slow(t)
	t.Run("layout", func(t *testing.T) {
		d := newDemoRelease(t)
		disk, grow := smallDisk(t, "400k")
		layout := filepath.Join(disk, "dev")
		_, err := d.release(t, "--layout", layout)
		if err == nil || !strings.Contains(err.Error(), "no space left on device") {
			t.Fatalf("release onto a full disk: %v, want a no-space error", err)
		}
		t.Logf("full disk: %v", err)
		grow("16m")
		if _, err := d.publish(t, "--layout", layout); err != nil {
			t.Fatalf("rerun with room: %v", err)
		}
		if out, err := runBuilder(t, "verify", "--key", d.devPub, "--version", demoVersion, "oci:"+layout); err != nil {
			t.Fatalf("verify: %v\n%s", err, out)
		}
		judge(t, "skopeo", "copy", "--all", "oci:"+layout+":boot:"+demoVersion, "dir:"+t.TempDir())
		if left := leftovers(layout); len(left) > 0 {
			t.Errorf("leftovers %v", left)
		}
	})
	t.Run("cache", func(t *testing.T) {
		d := newDemoRelease(t)
		disk, grow := smallDisk(t, "64k")
		d.cache = filepath.Join(disk, "cache")
		_, err := d.release(t)
		if err == nil || !strings.Contains(err.Error(), "no space left on device") || !strings.Contains(err.Error(), d.cache) {
			t.Fatalf("release with a full cache: %v, want a no-space error naming the cache", err)
		}
		t.Logf("full cache: %v", err)
		grow("16m")
		if _, err := d.publish(t); err != nil {
			t.Fatalf("rerun with room: %v", err)
		}
		layout := filepath.Join(d.dir, "release", "dev")
		if out, err := runBuilder(t, "verify", "--key", d.devPub, "--version", demoVersion, "oci:"+layout); err != nil {
			t.Fatalf("verify: %v\n%s", err, out)
		}
		judge(t, "skopeo", "copy", "--all", "oci:"+layout+":boot:"+demoVersion, "dir:"+t.TempDir())
	})
}

// Acceptance 2 (mirror targets): an archive is never written over a file
// that is not an earlier archive, nor a layout into a foreign directory.
func TestMirrorTargetsRefuseForeign(t *testing.T) {
	testutil.Slow(t)
	d := newDemoRelease(t)
	if _, err := d.publish(t); err != nil {
		t.Fatal(err)
	}
	layout := "oci:" + filepath.Join(d.dir, "release", "dev")
	base := t.TempDir()
	file := filepath.Join(base, "thesis.tar")
	os.WriteFile(file, []byte("my thesis"), 0o644)
	dir := filepath.Join(base, "photos")
	os.MkdirAll(dir, 0o755)
	os.WriteFile(filepath.Join(dir, "a.jpg"), []byte("jpeg"), 0o644)
	before := treeHash(t, base)
	for _, dst := range []string{"oci-archive:" + file, "oci:" + dir} {
		if _, err := runBuilder(t, "mirror", "--version", demoVersion, layout, dst); err == nil {
			t.Errorf("mirror to %s: no error", dst)
		} else {
			t.Logf("%s: %v", dst, err)
		}
	}
	if treeHash(t, base) != before {
		t.Error("a refused mirror changed files")
	}
	// An earlier archive is replaced.
	archive := filepath.Join(base, "release.tar")
	for range 2 {
		if out, err := runBuilder(t, "mirror", "--version", demoVersion, layout, "oci-archive:"+archive); err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
	}
}
