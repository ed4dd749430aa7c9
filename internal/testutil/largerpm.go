package testutil

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// LargeFileSize is the size of LargeFileRPM's big file: the smallest that
// makes rpm (4.12 and later) write LONGFILESIZES and the stripped cpio
// payload (07070X) instead of newc, whose size field has 32 bits.
const LargeFileSize = 4<<30 + 1

// LargeFileDir is where LargeFileRPM's files live: big.img (LargeFileSize
// bytes of "y\n", as yes(1) writes), small.txt ("hello\n"), link (->
// small.txt), and hard1 and hard2 (one hard-linked file, "same\n").
const LargeFileDir = "/usr/share/largefile"

// largeFileSpec builds it with a zstd level 1 payload (the package is
// ~400 KB), without build-id links, debuginfo or brp scripts reading the
// big file. The big file is "y\n" repeated rather than a sparse file of
// zeros: zstd stores zeros as RLE blocks, which klauspost/zstd expands byte
// by byte in Go: 4 Gi instrumented writes under the race detector
// (100 s). A short period gives compressed blocks, which its assembly
// decodes (3 s); the build writes the 4 GiB to its stage, then deletes them.
const largeFileSpec = `%define _build_id_links none
%define debug_package %{nil}
%define __spec_install_post %{nil}
%define __arch_install_post %{nil}
%define _binary_payload w1.zstdio
Name: largefile
Version: 1
Release: 1
Summary: A file of 4 GiB and one byte, and small ones
License: MIT
BuildArch: noarch
AutoReqProv: no
%description
Test package of nodeforge: rpm writes its payload in the stripped cpio form.
%install
d=%{buildroot}` + LargeFileDir + `
mkdir -p $d
yes | head -c 4294967297 > $d/big.img
printf 'hello\n' > $d/small.txt
ln -s small.txt $d/link
printf 'same\n' > $d/hard1
ln $d/hard1 $d/hard2
%files
%dir ` + LargeFileDir + `
` + LargeFileDir + `/big.img
` + LargeFileDir + `/small.txt
` + LargeFileDir + `/link
` + LargeFileDir + `/hard1
` + LargeFileDir + `/hard2
`

// LargeFileRPM returns the path of a package with a file of 4 GiB and one
// byte, built with Debian's rpmbuild (about 25 s on two cores) and kept
// under os.TempDir, keyed by the spec and rpmbuild's version, for the next
// run and the other packages' tests. It skips (fails in CI) without
// rpmbuild.
func LargeFileRPM(t testing.TB) string {
	t.Helper()
	rpmbuild := NeedTool(t, "rpmbuild")
	NeedTool(t, "yes")
	ver, err := exec.Command(rpmbuild, "--version").Output()
	if err != nil {
		t.Fatalf("rpmbuild --version: %v", err)
	}
	sum := sha256.Sum256(append([]byte(largeFileSpec), ver...))
	dir := filepath.Join(os.TempDir(), "nodeforge-largerpm-"+hex.EncodeToString(sum[:8]))
	rpm := filepath.Join(dir, "largefile-1-1.noarch.rpm")
	if _, err := os.Stat(rpm); err == nil {
		return rpm
	}
	stage, err := os.MkdirTemp(os.TempDir(), ".nodeforge-largerpm-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(stage)
	spec := filepath.Join(stage, "largefile.spec")
	if err := os.WriteFile(spec, []byte(largeFileSpec), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(stage, "out")
	cmd := exec.Command(rpmbuild, "-bb", "--quiet",
		"--define", "_topdir "+filepath.Join(stage, "top"),
		"--define", "_rpmdir "+out,
		"--define", "_build_name_fmt %{NAME}-%{VERSION}-%{RELEASE}.%{ARCH}.rpm",
		"--define", "use_source_date_epoch_as_buildtime 1",
		"--define", "clamp_mtime_to_source_date_epoch 1",
		spec)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + stage, "LC_ALL=C", "TZ=UTC", "SOURCE_DATE_EPOCH=1700000000"}
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("rpmbuild: %v\n%s", err, b)
	}
	// Drop the build tree (its sparse file) before publishing the result.
	os.RemoveAll(filepath.Join(stage, "top"))
	if err := os.Rename(out, dir); err != nil {
		if _, serr := os.Stat(rpm); serr != nil { // not another test's build
			t.Fatal(err)
		}
	}
	return rpm
}
