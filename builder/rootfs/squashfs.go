package rootfs

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// SquashfsOptions pins the image format.
type SquashfsOptions struct {
	Compressor string // "zstd" (default), "xz", "gzip", "lz4"
	Level      int    // compression level; 0 is the tool's default
	BlockSize  int    // default 131072
	Jobs       int    // compressor threads; output does not depend on it
	// Tool is the tar2sqfs binary (default: found on PATH).
	Tool string
}

// SquashfsTool reports the tool and version that writes squashfs images,
// for the build report.
func SquashfsTool(opts SquashfsOptions) (string, error) {
	tool := opts.Tool
	if tool == "" {
		tool = "tar2sqfs"
	}
	out, err := exec.Command(tool, "--version").CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("%s is needed to write squashfs (Debian package squashfs-tools-ng): %v", tool, err)
	}
	line, _, _ := strings.Cut(string(out), "\n")
	return strings.TrimSpace(line), nil
}

// WriteSquashfs streams the tree as a sorted tar into tar2sqfs, which
// writes the squashfs image at dst. No file of the tree touches the host
// disk. The image is written under a temporary name and renamed.
func (t *Tree) WriteSquashfs(ctx context.Context, dst string, owners Owners, mtime int64, opts SquashfsOptions) error {
	tool := opts.Tool
	if tool == "" {
		tool = "tar2sqfs"
	}
	comp := opts.Compressor
	if comp == "" {
		comp = "zstd"
	}
	bs := opts.BlockSize
	if bs == 0 {
		bs = 131072
	}
	jobs := opts.Jobs
	if jobs <= 0 {
		jobs = 1
	}
	tmp := filepath.Join(filepath.Dir(dst), "."+filepath.Base(dst)+".tmp")
	os.Remove(tmp)
	defer os.Remove(tmp)
	args := []string{"--quiet", "--force", "--no-skip", "--compressor", comp, "--block-size", fmt.Sprint(bs), "--num-jobs", fmt.Sprint(jobs),
		"--defaults", fmt.Sprintf("uid=0,gid=0,mode=0755,mtime=%d", mtime)}
	if opts.Level > 0 && comp != "lz4" {
		args = append(args, "--comp-extra", fmt.Sprintf("level=%d", opts.Level))
	}
	cmd := exec.CommandContext(ctx, tool, append(args, tmp)...)
	// Nothing of the caller's environment reaches the tool (exec finds
	// it on our PATH; it needs none of its own).
	cmd.Env = []string{"LC_ALL=C", "TZ=UTC"}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("%s: %w", tool, err)
	}
	werr := t.WriteTar(stdin, owners, mtime)
	stdin.Close()
	if err := cmd.Wait(); err != nil {
		return fmt.Errorf("%s failed: %v: %s", tool, err, strings.TrimSpace(stderr.String()))
	}
	if werr != nil && werr != io.ErrClosedPipe {
		return werr
	}
	return os.Rename(tmp, dst)
}
