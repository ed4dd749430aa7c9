package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/nodeforge/builder/pkgbase/demobase"
)

func init() { register(newDemoBaseCmd) }

func newDemoBaseCmd() *cobra.Command {
	var force bool
	var kernelCache, initPath string
	cmd := &cobra.Command{
		Use:   "demo-base [--force] [--kernel-cache DIR --init FILE] DIR",
		Short: "Write a small signed ALT-style demo package base and a release spec for it",
		Long: `demo-base writes a small package base in the layout of an ALT Linux branch, so
the builder can be tried and tested end to end without a mirror:

  DIR/alt/x86_64/RPMS.classic/*.rpm   the packages (noarch ones in DIR/alt/noarch)
  DIR/alt/*/base/pkglist.classic.xz   the apt-rpm indexes
  DIR/alt/*/base/release              signed releases (MD5Sum and BLAKE2b)
  DIR/keys/demo.asc                   the demo public key
  DIR/spec.yaml                       release spec "demo" (branch p11)

The base has about thirty packages with the names and dependency shapes a node
OS draws from an ALT branch: two kernel-image-std-def versions (epoch 2), zfs
and nvidia modules pinned to one kernel, set-versioned library dependencies,
subpackages pinned to each other, file dependencies, sisyphus+ disttags and a
%pre scriptlet. Their files are small shell scripts and text: nothing in it
runs or boots.

With --kernel-cache and --init the base boots (make demo does this when it
can): Debian's kernel (the newest linux-image-6.1.0-N-amd64 .deb in the
cache directory: vmlinuz and the module trees the node needs, signatures
kept) and Debian's systemd-boot-efi replace the stand-in kernel-image-std-def
and systemd-boot-efi, the node init (--init: a static linux/amd64 build of
cmd/nodeforge-init) is packaged as nodeforge-init, and the spec boots it
with its console on the serial port. When the cache directory's
extension-debs/ holds Debian's containerd, runc, containernetworking-plugins,
btrfs-progs and the libraries they load, they replace the stand-ins of the
cri and btrfs extensions (under their Debian names, the libraries in the
root: libc6 in glibc-core's place), placed where the extension contract
allows by the definitions in DIR/extensions/, and the spec lists a container
image, hello, of the nodeforge-init package (run as "init hello"), which the
release publishes beside the node (make demo-boot exports it with builder
image --release --kind container and attaches it for the node to run).
scripts/fetch-test-kernel.sh --demo DIR fetches all of them into DIR. The
rest stays stand-ins.

Every package and release is signed with the demo key. It is a demo-only key
whose secret half is public by design: trust it for nothing else.

The output is byte-identical on every run (a bootable base: for the same
Debian packages and init), whatever the clock, time zone,
umask, user or working directory. The spec refers to the repository and key
by paths relative to itself, so DIR may be moved or copied.

DIR must be empty or missing. The base is written into a temporary directory
beside DIR and renamed into place, so a failure leaves nothing half-written.
With --force, a non-empty DIR is accepted: its alt/, keys/ and spec.yaml are
replaced and everything else in it is left alone.`,
		Example: `  builder demo-base /tmp/demo && builder lock --spec /tmp/demo/spec.yaml

  # rewrite an existing demo base in place
  builder demo-base --force /tmp/demo

  # a demo base that boots (what make demo writes)
  scripts/fetch-test-kernel.sh --demo /var/cache/nodeforge
  CGO_ENABLED=0 go build -o bin/nodeforge-init ./cmd/nodeforge-init
  builder demo-base --kernel-cache /var/cache/nodeforge --init bin/nodeforge-init /tmp/demo`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			dir, err := filepath.Abs(args[0])
			if err != nil {
				return err
			}
			// Write where a symlink points, rather than replacing the link.
			if real, err := filepath.EvalSymlinks(dir); err == nil {
				dir = real
			}
			if (kernelCache == "") != (initPath == "") {
				return errors.New("--kernel-cache and --init go together: the bootable base needs both")
			}
			if kernelCache != "" {
				return writeBootable(cmd, dir, force, kernelCache, initPath)
			}
			if err := writeDemoBase(dir, force, demobase.Write); err != nil {
				return err
			}
			n, err := demobase.Packages()
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "demo base: %d packages in %s; spec %s (stand-ins: nothing in it boots)\n",
				n, filepath.Join(dir, demobase.RepoDir), filepath.Join(dir, demobase.SpecFile))
			return nil
		},
	}
	cmd.Flags().BoolVar(&force, "force", false, "accept a non-empty DIR: replace its alt/, keys/demo.asc and spec.yaml, keep everything else (signing keys under keys/ included)")
	cmd.Flags().StringVar(&kernelCache, "kernel-cache", "", "make the base bootable with Debian's kernel and systemd-boot-efi .debs from this directory, and its cri and btrfs extensions Debian's containerd, runc, CNI plugins and btrfs-progs from DIR/extension-debs when they are there (scripts/fetch-test-kernel.sh --demo DIR fetches them all); needs --init")
	cmd.Flags().StringVar(&initPath, "init", "", "the node init packaged as nodeforge-init: a static linux/amd64 build of cmd/nodeforge-init; needs --kernel-cache")
	return cmd
}

// demoEntries are what demobase.Write creates and --force replaces: the
// repository, the base's public key and the spec, and a bootable base's
// extension definitions (removed when the new base has none), and the
// container image file earlier bootable bases wrote beside the spec
// (removed: the image is the release's own now). The rest of keys/ (the
// channels' signing keys the spec points at) is the user's and stays.
var demoEntries = []string{demobase.RepoDir, demobase.KeyFile, demobase.SpecFile, demobase.ExtensionsDir, oldImageFile}

// oldImageFile is the container image earlier bootable demo bases wrote.
const oldImageFile = "hello-image.tar"

// writeBootable writes the bootable demo base.
func writeBootable(cmd *cobra.Command, dir string, force bool, kernelCache, initPath string) error {
	b, err := demobase.BootFromCache(kernelCache, initPath)
	if err != nil {
		return err
	}
	var sum demobase.Summary
	err = writeDemoBase(dir, force, func(tmp string) error {
		sum, err = demobase.WriteBootable(tmp, b)
		return err
	})
	if err != nil {
		return err
	}
	exts := "cri and btrfs: stand-ins (no Debian packages for them in " + filepath.Join(kernelCache, "extension-debs") + ")"
	if len(sum.Extensions) > 0 {
		exts = "cri and btrfs: Debian's " + strings.Join(sum.Extensions, ", ")
	}
	fmt.Fprintf(cmd.OutOrStdout(), "demo base: %d packages in %s; spec %s (bootable: kernel %s from %s, systemd-boot from %s, init %s; %s)\n",
		sum.Packages, filepath.Join(dir, demobase.RepoDir), filepath.Join(dir, demobase.SpecFile), sum.KernelVersion, sum.KernelDeb, sum.BootDeb, initPath, exts)
	return nil
}

// writeDemoBase writes the base (with write) into a temporary directory
// beside dir and moves it into place only once it is complete.
func writeDemoBase(dir string, force bool, write func(string) error) error {
	empty := true
	switch fi, err := os.Stat(dir); {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return err
	case !fi.IsDir():
		return fmt.Errorf("%s exists and is not a directory", dir)
	default:
		ents, err := os.ReadDir(dir)
		if err != nil {
			return err
		}
		if len(ents) > 0 && !force {
			return fmt.Errorf("%s is not empty (give --force to replace the demo base in it)", dir)
		}
		empty = len(ents) == 0
	}
	parent := filepath.Dir(dir)
	if err := os.MkdirAll(parent, 0o755); err != nil {
		return err
	}
	tmp, err := os.MkdirTemp(parent, "."+filepath.Base(dir)+".demo-base-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	if err := write(tmp); err != nil {
		return err
	}
	// MkdirTemp makes 0700; the base is meant to be read by others.
	if err := os.Chmod(tmp, 0o755); err != nil {
		return err
	}
	if empty {
		// Go's Rename refuses an existing directory, even an empty one;
		// Remove fails if something appeared in it meanwhile.
		if err := os.Remove(dir); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("moving the demo base into place: %w", err)
		}
		if err := os.Rename(tmp, dir); err != nil {
			return fmt.Errorf("moving the demo base into place: %w", err)
		}
		return nil
	}
	return replaceEntries(tmp, dir)
}

// replaceEntries moves the demo entries of src into dst, putting the old
// ones aside first and restoring them if a move fails.
func replaceEntries(src, dst string) error {
	old, err := os.MkdirTemp(dst, ".demo-base-old-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(old)
	var moved []string
	restore := func() {
		for _, e := range demoEntries {
			os.RemoveAll(filepath.Join(dst, e))
		}
		for _, e := range moved {
			os.Rename(filepath.Join(old, e), filepath.Join(dst, e))
		}
	}
	for _, e := range demoEntries {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(old, e)), 0o755); err != nil {
			return err
		}
		err := os.Rename(filepath.Join(dst, e), filepath.Join(old, e))
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			restore()
			return fmt.Errorf("putting the old %s aside: %w", e, err)
		}
		moved = append(moved, e)
	}
	for _, e := range demoEntries {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(dst, e)), 0o755); err != nil {
			restore()
			return err
		}
		if _, err := os.Lstat(filepath.Join(src, e)); errors.Is(err, fs.ErrNotExist) {
			continue // not in this kind of base
		}
		if err := os.Rename(filepath.Join(src, e), filepath.Join(dst, e)); err != nil {
			restore()
			return fmt.Errorf("moving %s into place: %w", e, err)
		}
	}
	return nil
}
