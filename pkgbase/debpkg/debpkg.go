// Package debpkg reads Debian packages with Debian's dpkg-deb: control
// fields, a kernel package's image and chosen module trees, whole trees,
// and the newest of a cache directory's kernel packages. The demo base
// (pkgbase/demobase) and the boot tests' base (pkgbase/testbase) wrap
// what it extracts into RPMs.
package debpkg

import (
	"archive/tar"
	"bufio"
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"time"
)

// Extract unpacks the whole package into dir (dpkg-deb -x).
func Extract(deb, dir string) error {
	if out, err := exec.Command("dpkg-deb", "-x", deb, dir).CombinedOutput(); err != nil {
		return fmt.Errorf("debpkg: dpkg-deb -x %s: %v\n%s", deb, err, out)
	}
	return nil
}

// Newest is the last, in name order, of dir's files matching pattern
// (a filepath.Match pattern: systemd-boot-efi_*_amd64.deb), "" when none.
func Newest(dir, pattern string) string {
	m, _ := filepath.Glob(filepath.Join(dir, pattern))
	sort.Strings(m)
	if len(m) == 0 {
		return ""
	}
	return m[len(m)-1]
}

// ModuleName is a module's kmod name from its file name.
func ModuleName(file string) string {
	if i := strings.Index(file, ".ko"); i >= 0 {
		file = file[:i]
	}
	return strings.ReplaceAll(file, "-", "_")
}

// Field is a control field of a package (dpkg-deb --field).
func Field(deb, field string) (string, error) {
	out, err := exec.Command("dpkg-deb", "--field", deb, field).Output()
	if err != nil {
		return "", fmt.Errorf("debpkg: dpkg-deb --field %s %s: %w", deb, field, err)
	}
	return strings.TrimSpace(string(out)), nil
}

// RPMVersion maps a Debian version to an RPM version and release:
// "6.1.192-3" gives 6.1.192 and 3 (an epoch is dropped).
func RPMVersion(v string) (string, string) {
	if _, rest, ok := strings.Cut(v, ":"); ok {
		v = rest
	}
	clean := func(s string) string { return strings.NewReplacer("-", ".", ":", ".").Replace(s) }
	if i := strings.LastIndex(v, "-"); i > 0 {
		return clean(v[:i]), clean(v[i+1:])
	}
	return clean(v), "1"
}

// ExtractKernel unpacks /boot/vmlinuz-<kver> and the chosen parts of
// /lib/modules/<kver>/ from the package (dpkg-deb's data tarball, read here
// so the other 250 MB of modules never touch the disk). It returns the
// kernel version and vmlinuz's mtime.
func ExtractKernel(deb, root string, trees []string) (string, time.Time, error) {
	cmd := exec.Command("dpkg-deb", "--fsys-tarfile", deb)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	pipe, err := cmd.StdoutPipe()
	if err != nil {
		return "", time.Time{}, err
	}
	if err := cmd.Start(); err != nil {
		return "", time.Time{}, err
	}
	waited := false
	defer func() {
		if !waited {
			cmd.Process.Kill()
			cmd.Wait()
		}
	}()
	keep := func(name string) bool {
		if strings.HasPrefix(name, "boot/vmlinuz-") {
			return true
		}
		rest, ok := strings.CutPrefix(name, "lib/modules/")
		if !ok {
			return false
		}
		_, rel, ok := strings.Cut(rest, "/")
		if !ok {
			return false
		}
		for _, t := range trees {
			if rel == t || strings.HasPrefix(rel, t+"/") {
				return true
			}
		}
		return false
	}
	var kver string
	var mtime time.Time
	tr := tar.NewReader(bufio.NewReaderSize(pipe, 1<<20))
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return "", time.Time{}, fmt.Errorf("debpkg: reading %s: %v %s", deb, err, stderr.String())
		}
		name := strings.TrimPrefix(path.Clean(h.Name), "./")
		if strings.HasPrefix(name, "..") || path.IsAbs(name) || !keep(name) {
			continue
		}
		dst := filepath.Join(root, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			return "", time.Time{}, err
		}
		switch h.Typeflag {
		case tar.TypeDir:
			if err := os.MkdirAll(dst, 0o755); err != nil {
				return "", time.Time{}, err
			}
			continue
		case tar.TypeSymlink:
			if err := os.Symlink(h.Linkname, dst); err != nil {
				return "", time.Time{}, err
			}
			continue
		case tar.TypeReg:
		default:
			return "", time.Time{}, fmt.Errorf("debpkg: %s: unexpected entry type %q for %s", deb, h.Typeflag, name)
		}
		f, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, os.FileMode(h.Mode).Perm())
		if err != nil {
			return "", time.Time{}, err
		}
		if _, err := io.Copy(f, tr); err != nil {
			f.Close()
			return "", time.Time{}, err
		}
		if err := f.Close(); err != nil {
			return "", time.Time{}, err
		}
		os.Chtimes(dst, h.ModTime, h.ModTime)
		if v, ok := strings.CutPrefix(name, "boot/vmlinuz-"); ok {
			if kver != "" {
				return "", time.Time{}, fmt.Errorf("debpkg: %s holds two kernels (%s, %s)", deb, kver, v)
			}
			kver, mtime = v, h.ModTime
		}
	}
	io.Copy(io.Discard, pipe)
	waited = true
	if err := cmd.Wait(); err != nil {
		return "", time.Time{}, fmt.Errorf("debpkg: dpkg-deb --fsys-tarfile %s: %v %s", deb, err, stderr.String())
	}
	if kver == "" {
		return "", time.Time{}, fmt.Errorf("debpkg: %s ships no /boot/vmlinuz-*", deb)
	}
	if _, err := os.Stat(filepath.Join(root, "lib", "modules", kver)); err != nil {
		return "", time.Time{}, fmt.Errorf("debpkg: %s has no modules for kernel %s", deb, kver)
	}
	return kver, mtime, nil
}

// NewestKernel picks the cached linux-image-6.1.0-N-<debArch> with the
// highest ABI number N (the generic flavour, not cloud or rt).
func NewestKernel(dir, debArch string) string {
	m, _ := filepath.Glob(filepath.Join(dir, "linux-image-6.1.0-*-"+debArch+"_*.deb"))
	best, bestABI := "", -1
	for _, p := range m {
		b := filepath.Base(p)
		var abi int
		var rest string
		if n, _ := fmt.Sscanf(b, "linux-image-6.1.0-%d-%s", &abi, &rest); n != 2 || !strings.HasPrefix(rest, debArch+"_") {
			continue
		}
		if abi > bestABI || abi == bestABI && p > best {
			best, bestABI = p, abi
		}
	}
	return best
}
