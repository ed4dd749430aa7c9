package builder

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path"
	"path/filepath"
	"runtime"
	"slices"
	"strings"

	"golang.org/x/sync/errgroup"

	"github.com/nodeforge/builder/api/report"
	"github.com/nodeforge/builder/builder/media/secureboot"
	"github.com/nodeforge/builder/internal/atomicfile"
	"github.com/nodeforge/builder/internal/flock"
	"github.com/nodeforge/builder/pkgbase/cache"
)

// A build whose inputs did not change need not run again: its output
// directory already holds what it would write. The inputs are named by a
// key (the builder binary, the spec and its extension definitions, the
// lock, the options that reach the bytes); after each build a stamp in the
// cache records the key and every entry of the output with its content
// digest. The next build with the same key re-hashes the output against
// the stamp and, if nothing differs, returns the report it holds. Nothing
// is trusted for its name or time: a file changed, added or removed since
// makes the build run.

// stampFormat changes whenever the key or the stamp changes meaning.
const stampFormat = "nodeforge build stamp v2"

// buildKey digests what decides the output of a build, or returns "" when
// the build must always run (no builder digest to name the code, or an
// experiment of builder repro).
func buildKey(opts Options, sde int64) (string, error) {
	if opts.BuilderSHA256 == "" || opts.Shuffle != 0 || opts.NoStepCaches {
		return "", nil
	}
	exts, err := json.Marshal(opts.Spec.Extensions)
	if err != nil {
		return "", err
	}
	sch, err := json.Marshal(opts.Schematic)
	if err != nil {
		return "", err
	}
	h := sha256.New()
	for _, part := range [][]byte{
		[]byte(stampFormat), []byte(opts.BuilderSHA256), []byte(opts.Version), opts.Spec.Raw, exts, opts.LockBytes,
		fmt.Appendf(nil, "%d %s %d %d %s %q %q %q %t %t", sde, opts.Squashfs.Compressor, opts.Squashfs.Level, opts.Squashfs.BlockSize, opts.Squashfs.Tool, opts.DiskCompressions, opts.Platform, opts.DiskFormats, opts.DiskFormats == nil, opts.UKI),
		sch, secureBootKey(opts.SecureBoot),
	} {
		fmt.Fprintf(h, "%d:", len(part))
		h.Write(part)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// stamp is what a build left in an output directory.
type stamp struct {
	Format  string       `json:"format"`
	Key     string       `json:"key"`
	Entries []stampEntry `json:"entries"`
}

type stampEntry struct {
	Path   string      `json:"path"` // relative to the output, slash-separated
	Mode   fs.FileMode `json:"mode"`
	Size   int64       `json:"size,omitempty"`
	SHA256 string      `json:"sha256,omitempty"` // files
	Target string      `json:"target,omitempty"` // symlinks
}

// stampPath is where the stamp of the output directory out is kept.
func stampPath(cacheDir, out string) string {
	sum := sha256.Sum256([]byte(out))
	return filepath.Join(cacheDir, "builds", hex.EncodeToString(sum[:])+".json")
}

// describeOutput lists every entry under out, hashing files on every core
// except those whose digest known gives for their path and size (nil:
// none).
func describeOutput(ctx context.Context, out string, known func(rel string, size int64) (string, bool)) ([]stampEntry, error) {
	var entries []stampEntry
	err := filepath.WalkDir(out, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if p == out {
			return nil
		}
		rel, err := filepath.Rel(out, p)
		if err != nil {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		e := stampEntry{Path: filepath.ToSlash(rel), Mode: fi.Mode()}
		switch {
		case fi.Mode().IsRegular():
			e.Size = fi.Size()
		case fi.Mode()&fs.ModeSymlink != 0:
			if e.Target, err = os.Readlink(p); err != nil {
				return err
			}
		}
		entries = append(entries, e)
		return nil
	})
	if err != nil {
		return nil, err
	}
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(runtime.GOMAXPROCS(0))
	for i := range entries {
		if !entries[i].Mode.IsRegular() {
			continue
		}
		if known != nil {
			if sum, ok := known(entries[i].Path, entries[i].Size); ok {
				entries[i].SHA256 = sum
				continue
			}
		}
		g.Go(func() error {
			if err := gctx.Err(); err != nil {
				return err
			}
			sum, err := cache.SHA256File(filepath.Join(out, filepath.FromSlash(entries[i].Path)))
			entries[i].SHA256 = sum
			return err
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	return entries, nil
}

// blobName is the digest an OCI layout's blob path names, if it is one.
func blobName(rel string) (string, bool) {
	dir, name := path.Split(rel)
	if !strings.HasSuffix(dir, "blobs/sha256/") || len(name) != sha256.Size*2 {
		return "", false
	}
	if _, err := hex.DecodeString(name); err != nil || strings.ToLower(name) != name {
		return "", false
	}
	return name, true
}

// unchanged returns the report of the build already in out when nothing
// that decides it changed: a stamp with the key, and the output byte for
// byte as the stamp lists it. The locked packages are fetched (and so
// verified) as by any build. Any doubt is a miss (nil, nil): the build
// then runs.
func unchanged(ctx context.Context, opts Options, stampFile, out, key string, logf func(string, ...any)) (*report.Report, error) {
	b, err := os.ReadFile(stampFile)
	if err != nil {
		return nil, nil
	}
	var st stamp
	if json.Unmarshal(b, &st) != nil || st.Format != stampFormat || st.Key != key {
		return nil, nil
	}
	for _, arch := range slices.Sorted(maps.Keys(opts.Lock.Architectures)) {
		if _, err := fetchArch(ctx, opts, opts.Lock.Architectures[arch]); err != nil {
			return nil, err
		}
	}
	rep, ok := outputAsStamped(ctx, &st, out)
	if !ok {
		return nil, ctx.Err()
	}
	logf("%s is up to date: the spec, the lock, the builder and every output file are as the last build left them", out)
	return rep, nil
}

// outputAsStamped returns the report in out when out is what st lists.
func outputAsStamped(ctx context.Context, st *stamp, out string) (*report.Report, bool) {
	// Builds into this output take turns: none may swap it while it is read.
	l, err := flock.Acquire(ctx, filepath.Dir(out), false, nil)
	if err != nil {
		return nil, false
	}
	defer l.Release()
	got, err := describeOutput(ctx, out, nil)
	if err != nil || !slices.Equal(got, st.Entries) {
		return nil, false
	}
	rb, err := os.ReadFile(filepath.Join(out, "report.json"))
	if err != nil {
		return nil, false
	}
	var rep report.Report
	if json.Unmarshal(rb, &rep) != nil {
		return nil, false
	}
	return &rep, true
}

// newStamp describes the output being made in dir as the build of key.
//
// It does not hash again what the build hashed as it wrote it: the
// report's artifacts (files "<arch>/<name>" of the bytes it records) and
// the blobs of its OCI layouts (blobs/sha256/<hex>), which ocilayout
// renames into place only under the digest of what it wrote. On a release
// that is nearly every byte; checking an output in place hashes them all.
func newStamp(ctx context.Context, dir, key string, artifacts map[string]report.ArtifactInfo) (*stamp, error) {
	entries, err := describeOutput(ctx, dir, func(rel string, size int64) (string, bool) {
		if a, ok := artifacts[rel]; ok && a.Size == size {
			return a.SHA256, true
		}
		return blobName(rel)
	})
	if err != nil {
		return nil, err
	}
	return &stamp{Format: stampFormat, Key: key, Entries: entries}, nil
}

// write stores the stamp; a failure only costs the next build its
// shortcut.
func (st *stamp) write(stampFile string) error {
	b, err := json.Marshal(st)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(stampFile), 0o755); err != nil {
		return err
	}
	return atomicfile.Write(stampFile, b, 0o644)
}

// secureBootKey names the Secure Boot keys of a build: the signing
// certificate and the .auth files (nothing without Secure Boot).
func secureBootKey(s *secureboot.Signing) []byte {
	if s == nil {
		return nil
	}
	h := sha256.New()
	h.Write(s.Signer.Cert.Raw)
	for _, n := range secureboot.Names {
		fmt.Fprintf(h, "%d:", len(s.Auth[n]))
		h.Write(s.Auth[n])
	}
	return h.Sum(nil)
}
