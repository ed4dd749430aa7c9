package main

// The handover: after the banner the init switches into the stacked root
// and starts what the schematic's extensions provide, one marker line per
// step ("nodeforge-init: [cri N/5] ...", "[btrfs N/4]"). Extensions put
// their programs where Talos's contract does (/usr/local/bin, sbin and
// lib/cni/bin), and the init looks for them there. Disks are chosen by
// their virtio serial number, never by position: the container image comes
// from the disk with serial imageDiskSerial (an OCI archive written raw
// onto it, its image named in index.json as ctr images import reads it:
// make demo-boot's is the demo release's own image), and only the disk with serial scratchDiskSerial is
// ever formatted. A missing disk skips its steps with a line saying so;
// an extension whose program is a stand-in (the stand-in demo base's text
// files) starts nothing, and says so.

import (
	"archive/tar"
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Disk serial numbers (qemu: -drive ...,serial=...).
const (
	imageDiskSerial   = "nodeforge-images"
	scratchDiskSerial = "nodeforge-scratch"
)

// helloArg makes the init a container's program: it prints helloLine and
// exits (the boot tests' container image runs the init this way).
const helloArg = "hello"

// helloLine is what the init prints in hello mode.
func helloLine() string {
	host, _ := os.Hostname()
	return fmt.Sprintf("hello from a container: pid %d, hostname %s", os.Getpid(), host)
}

// extPath is where the init looks for the extensions' programs.
const extPath = "/usr/local/sbin:/usr/local/bin:/usr/local/lib/cni/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// handOver starts what the stacked extensions provide; nothing (and no
// switch into the root) when none of them is one it knows.
func handOver(exts []extension, modDir string) error {
	has := map[string]bool{}
	for _, e := range exts {
		has[e.Metadata.Name] = true
	}
	for _, name := range []string{"zfs", "nvidia"} {
		if has[name] {
			say("nodeforge-init: %s: no %s kernel module this kernel can load is in this base (out of tree, not built here): nothing started", name, name)
		}
	}
	if !has["cri"] && !has["btrfs"] {
		return nil
	}
	if err := switchRoot("/sysroot/root"); err != nil {
		return err
	}
	os.Setenv("PATH", extPath)
	say("nodeforge-init: switched into the stacked root; programs from %s", extPath)
	if has["cri"] && program("cri", "containerd") {
		if err := runCRI(); err != nil {
			return fmt.Errorf("cri: %w", err)
		}
	}
	if has["btrfs"] && program("btrfs", "mkfs.btrfs") {
		if err := runBtrfs(modDir); err != nil {
			return fmt.Errorf("btrfs: %w", err)
		}
	}
	say("nodeforge-init: zfs, nvidia: not in this base (their kernel modules are out of tree; Debian ships them outside bookworm main)")
	return nil
}

// switchRoot moves the API file systems into root, moves root onto / and
// enters it (switch_root's way, so runc's pivot_root works inside).
func switchRoot(root string) error {
	for _, d := range []string{"/dev", "/proc", "/sys", "/run"} {
		if err := os.MkdirAll(root+d, 0o755); err != nil {
			return err
		}
		if err := unix.Mount(d, root+d, "", unix.MS_MOVE, ""); err != nil {
			return fmt.Errorf("move %s into %s: %w", d, root, err)
		}
	}
	if err := unix.Chdir(root); err != nil {
		return err
	}
	if err := unix.Mount(".", "/", "", unix.MS_MOVE, ""); err != nil {
		return fmt.Errorf("move %s onto /: %w", root, err)
	}
	if err := unix.Chroot("."); err != nil {
		return err
	}
	return unix.Chdir("/")
}

// program reports whether an extension's program is one the init can
// start: an ELF executable on the path, not a stand-in (the stand-in demo
// base's packages hold text), which it says.
func program(ext, name string) bool {
	p, err := exec.LookPath(name)
	if err != nil {
		say("nodeforge-init: %s: no %s in %s: nothing started", ext, name, extPath)
		return false
	}
	f, err := os.Open(p)
	if err == nil {
		head := make([]byte, 4)
		_, err = f.Read(head)
		f.Close()
		if err == nil && string(head) == "\x7fELF" {
			return true
		}
	}
	say("nodeforge-init: %s: %s is a stand-in, not a program (a stand-in base): nothing started", ext, p)
	return false
}

// run runs a program of the root and returns its output (stdout and
// stderr), bounded by limit.
func run(limit time.Duration, name string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	out, err := exec.CommandContext(ctx, name, args...).CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("%s %s: %v: %s", name, strings.Join(args, " "), err, lastLines(out, 8))
	}
	return string(out), nil
}

// lastLines is the end of a program's output, for an error.
func lastLines(out []byte, n int) string {
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, " | ")
}

// firstLine is the first line of s.
func firstLine(s string) string {
	l, _, _ := strings.Cut(strings.TrimSpace(s), "\n")
	return l
}

// diskBySerial is the /dev path of the virtio disk with that serial.
func diskBySerial(serial string) (string, bool) {
	ss, _ := filepath.Glob("/sys/block/vd*/serial")
	for _, s := range ss {
		if b, err := os.ReadFile(s); err == nil && strings.TrimSpace(string(b)) == serial {
			return "/dev/" + filepath.Base(filepath.Dir(s)), true
		}
	}
	return "", false
}

// containerdConfig is containerd's configuration: state on tmpfs, the CRI
// plugin's CNI from the cri extension.
const containerdConfig = `version = 2
root = "/var/lib/containerd"
state = "/run/containerd"
[grpc]
  address = "/run/containerd/containerd.sock"
[plugins."io.containerd.grpc.v1.cri".cni]
  bin_dir = "/usr/local/lib/cni/bin"
  conf_dir = "/etc/cni/net.d"
`

const ctrNamespace = "nodeforge"

// runCRI starts containerd, checks runc and a CNI plugin, imports the
// image disk's images and runs the first, printing what it prints.
func runCRI() error {
	// overlayfs cannot take the root's overlay as its upper layer.
	if err := mount("tmpfs", "/var/lib/containerd", "tmpfs", 0, "mode=0711"); err != nil {
		return err
	}
	if err := os.WriteFile("/run/nodeforge-containerd.toml", []byte(containerdConfig), 0o644); err != nil {
		return err
	}
	t0 := time.Now()
	logf, err := os.Create("/run/containerd.log")
	if err != nil {
		return err
	}
	defer logf.Close()
	cmd := exec.Command("containerd", "--config", "/run/nodeforge-containerd.toml")
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		return err
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	defer stopContainerd(cmd, exited)
	ver, err := waitContainerd(exited, 180*time.Second)
	if err != nil {
		b, _ := os.ReadFile("/run/containerd.log")
		return fmt.Errorf("%w; containerd's log ends: %s", err, lastLines(b, 10))
	}
	step1 := fmt.Sprintf("containerd %s started from %s (pid %d) in %s", ver, cmd.Path, cmd.Process.Pid, time.Since(t0).Round(100*time.Millisecond))
	say("nodeforge-init: [cri 1/5] %s", step1)
	plugins, err := run(60*time.Second, "ctr", "plugins", "ls")
	if err != nil {
		return err
	}
	say("nodeforge-init: [cri 2/5] containerd plugins: %s", pluginStatus(plugins, "io.containerd.grpc.v1.cri", "io.containerd.snapshotter.v1.overlayfs", "io.containerd.runtime.v2.task"))
	if err := checkRuntime(); err != nil {
		return err
	}
	return runImage()
}

// waitContainerd waits until containerd answers on its socket and returns
// its version; exited reports containerd's end.
func waitContainerd(exited chan error, limit time.Duration) (string, error) {
	deadline := time.Now().Add(limit)
	for {
		select {
		case err := <-exited:
			exited <- err
			return "", fmt.Errorf("containerd exited: %v", err)
		case <-time.After(500 * time.Millisecond):
		}
		if _, err := os.Stat("/run/containerd/containerd.sock"); err == nil {
			if out, err := run(30*time.Second, "ctr", "version"); err == nil {
				return serverVersion(out), nil
			}
		}
		if time.Now().After(deadline) {
			return "", fmt.Errorf("containerd did not answer within %s", limit)
		}
	}
}

// serverVersion is the server's Version of ctr version's output.
func serverVersion(out string) string {
	_, server, _ := strings.Cut(out, "Server:")
	sc := bufio.NewScanner(strings.NewReader(server))
	for sc.Scan() {
		if v, ok := strings.CutPrefix(strings.TrimSpace(sc.Text()), "Version:"); ok {
			return strings.TrimSpace(v)
		}
	}
	return "(version unknown)"
}

// pluginStatus reports the status of the plugins (TYPE.ID) in ctr plugins
// ls's table (TYPE ID PLATFORMS STATUS).
func pluginStatus(table string, ids ...string) string {
	status := map[string]string{}
	for _, line := range strings.Split(table, "\n") {
		f := strings.Fields(line)
		if len(f) >= 3 {
			status[f[0]+"."+f[1]] = f[len(f)-1]
		}
	}
	var out []string
	for _, id := range ids {
		s := status[id]
		if s == "" {
			s = "absent"
		}
		out = append(out, id+" "+s)
	}
	return strings.Join(out, ", ")
}

// checkRuntime runs runc and a CNI plugin of the extension.
func checkRuntime() error {
	rv, err := run(30*time.Second, "runc", "--version")
	if err != nil {
		return err
	}
	cni, err := exec.LookPath("loopback")
	if err != nil {
		return err
	}
	c := exec.Command(cni)
	c.Env = append(os.Environ(), "CNI_COMMAND=VERSION")
	c.Stdin = strings.NewReader(`{"cniVersion":"1.0.0"}`)
	cv, err := c.Output()
	if err != nil {
		return fmt.Errorf("%s (CNI_COMMAND=VERSION): %w", cni, err)
	}
	say("nodeforge-init: [cri 3/5] %s; CNI plugin %s: %s", firstLine(rv), cni, strings.TrimSpace(string(cv)))
	return nil
}

// runImage imports the image of the image disk and runs it, by the name
// the archive gives it.
func runImage() error {
	disk, ok := diskBySerial(imageDiskSerial)
	if !ok {
		say("nodeforge-init: [cri 4/5] no disk with serial %s: no container image to run (qemu: -device virtio-blk-pci,drive=...,serial=%s)", imageDiskSerial, imageDiskSerial)
		return nil
	}
	f, err := os.Open(disk)
	if err != nil {
		return err
	}
	image, err := archiveImageName(f)
	f.Close()
	if err != nil {
		return fmt.Errorf("%s: %w", disk, err)
	}
	if _, err := run(180*time.Second, "ctr", "-n", ctrNamespace, "images", "import", disk); err != nil {
		return err
	}
	names, err := run(30*time.Second, "ctr", "-n", ctrNamespace, "images", "ls", "-q")
	if err != nil {
		return err
	}
	if !slices.Contains(strings.Fields(names), image) {
		return fmt.Errorf("ctr images import of %s made no image %s (the archive's name); it has: %s", disk, image, strings.Join(strings.Fields(names), ", "))
	}
	say("nodeforge-init: [cri 4/5] image %s imported from %s", image, disk)
	t0 := time.Now()
	out, err := run(180*time.Second, "ctr", "-n", ctrNamespace, "run", "--rm", image, "nodeforge-hello")
	if err != nil {
		return err
	}
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		say("nodeforge-init: container printed: %s", l)
	}
	say("nodeforge-init: [cri 5/5] container nodeforge-hello of %s ran with runc and exited 0 in %s", image, time.Since(t0).Round(100*time.Millisecond))
	return nil
}

// annImageName is the annotation of an index.json entry that ctr images
// import names the image by.
const annImageName = "io.containerd.image.name"

// archiveImageName is the name of the image of an OCI archive (a tar of an
// OCI image layout): the io.containerd.image.name of its index.json's one
// entry.
func archiveImageName(r io.Reader) (string, error) {
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return "", errors.New("not an OCI archive: no index.json")
		}
		if err != nil {
			return "", fmt.Errorf("not an OCI archive: %w", err)
		}
		if path.Clean(h.Name) != "index.json" {
			continue
		}
		var idx struct {
			Manifests []struct {
				Annotations map[string]string `json:"annotations"`
			} `json:"manifests"`
		}
		if err := json.NewDecoder(io.LimitReader(tr, 1<<20)).Decode(&idx); err != nil {
			return "", fmt.Errorf("index.json: %w", err)
		}
		if len(idx.Manifests) != 1 {
			return "", fmt.Errorf("index.json lists %d images, not one", len(idx.Manifests))
		}
		name := idx.Manifests[0].Annotations[annImageName]
		if name == "" {
			return "", fmt.Errorf("index.json names no image (no %s annotation)", annImageName)
		}
		return name, nil
	}
}

// stopContainerd ends containerd (SIGTERM, then SIGKILL after 10 s).
func stopContainerd(cmd *exec.Cmd, exited chan error) {
	cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-exited:
	case <-time.After(10 * time.Second):
		cmd.Process.Kill()
		<-exited
	}
}

// btrfsFile is what runBtrfs writes and reads back.
const btrfsFile = "written by nodeforge-init on btrfs"

// runBtrfs loads the btrfs module, formats the scratch disk with the
// extension's mkfs.btrfs, mounts it, writes a file and reads it back.
func runBtrfs(modDir string) error {
	mods, err := readModules(modDir)
	if err != nil {
		return err
	}
	btrfs := mods.resolve("btrfs")
	if btrfs == "" {
		return fmt.Errorf("%s/modules.dep lists no btrfs module", modDir)
	}
	loaded, err := mods.load([]string{btrfs})
	if err != nil {
		return err
	}
	say("nodeforge-init: [btrfs 1/4] module btrfs loaded with its dependencies and softdeps (signatures checked): %s", strings.Join(loaded, " "))
	disk, ok := diskBySerial(scratchDiskSerial)
	if !ok {
		say("nodeforge-init: [btrfs 2/4] no disk with serial %s: nothing formatted (qemu: -device virtio-blk-pci,drive=...,serial=%s)", scratchDiskSerial, scratchDiskSerial)
		return nil
	}
	mkfs, err := exec.LookPath("mkfs.btrfs")
	if err != nil {
		return err
	}
	out, err := run(120*time.Second, mkfs, "-f", "-L", "nodeforge", disk)
	if err != nil {
		return err
	}
	ver, _ := run(30*time.Second, mkfs, "--version")
	say("nodeforge-init: [btrfs 2/4] %s formatted by %s (%s): %s", disk, mkfs, firstLine(ver), mkfsSummary(out))
	mnt := "/var/mnt/scratch"
	if err := mount(disk, mnt, "btrfs", 0, ""); err != nil {
		return err
	}
	say("nodeforge-init: [btrfs 3/4] btrfs mounted: %s on %s", disk, mnt)
	p := filepath.Join(mnt, "hello.txt")
	if err := os.WriteFile(p, []byte(btrfsFile+"\n"), 0o644); err != nil {
		return err
	}
	unix.Sync()
	b, err := os.ReadFile(p)
	if err != nil {
		return err
	}
	if err := unix.Unmount(mnt, 0); err != nil {
		return fmt.Errorf("unmount %s: %w", mnt, err)
	}
	if !bytes.Equal(b, []byte(btrfsFile+"\n")) {
		return errors.New("the file read back differs from the one written")
	}
	say("nodeforge-init: [btrfs 4/4] btrfs file read back: %s: %s (unmounted)", p, strings.TrimSpace(string(b)))
	return nil
}

// mkfsSummary picks mkfs.btrfs's label, UUID and size lines.
func mkfsSummary(out string) string {
	var keep []string
	for _, l := range strings.Split(out, "\n") {
		k, v, ok := strings.Cut(l, ":")
		k = strings.TrimSpace(k)
		if ok && (k == "Label" || k == "UUID" || k == "Filesystem size") {
			keep = append(keep, k+" "+strings.TrimSpace(v))
		}
	}
	return strings.Join(keep, ", ")
}
