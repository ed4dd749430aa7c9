// Package pipeline runs the job that spans the floors: a release, which
// locks the spec when it has no lock yet, builds from the lock and
// publishes what the build made. It is the one package that knows both
// the build and the release; the command calls it once and prints what it
// returns.
package pipeline

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"

	"github.com/nodeforge/builder/api/lock"
	"github.com/nodeforge/builder/api/specs"
	"github.com/nodeforge/builder/attest/signing"
	"github.com/nodeforge/builder/builder"
	"github.com/nodeforge/builder/oci"
	"github.com/nodeforge/builder/pkgbase/locker"
	"github.com/nodeforge/builder/release"
)

// ReleaseOptions are what a release is made from and where it goes.
type ReleaseOptions struct {
	Spec *specs.Spec
	// LockPath is the lock to build from (the spec's, <dir>/<name>.lock.json,
	// when empty); it is made with Locker when it does not exist.
	LockPath string
	// Relock locks the spec again, over the lock, when the lock was made
	// for another spec or before the spec was edited (builder.CheckLock).
	Relock bool
	Locker locker.Options
	// Build says how to build; its spec and lock are set here.
	Build builder.Options
	// Store, Signer and Channel say where the release goes and who signs.
	Store     oci.Store
	Signer    *signing.Signer
	Channel   string
	BuilderID string
	Log       func(format string, args ...any)
	// Locked, when not nil, is called once the lock is there (made or
	// read), before the build starts: a command ends its progress line.
	Locked func()
}

// Release locks the spec when it has no lock, builds from the lock (into
// Build.Out, or the spec's output directory) and publishes the build,
// signed and attested. The lock is read once: the bytes parsed are the
// bytes digested and published. A builder that cannot write a release's
// bytes refuses before it locks or writes anything (builder.CheckBuilder).
func Release(ctx context.Context, o ReleaseOptions) (*release.Published, error) {
	if err := builder.CheckBuilder(); err != nil {
		return nil, err
	}
	logf := o.Log
	if logf == nil {
		logf = func(string, ...any) {}
	}
	in, err := ReadOrCreateLock(ctx, o.Spec, o.LockPath, o.Locker, o.Relock, logf)
	if o.Locked != nil {
		o.Locked()
	}
	if err != nil {
		return nil, err
	}
	bo := o.Build
	bo.Spec, bo.Lock, bo.LockBytes, bo.LockPath = in.Spec, in.Lock, in.LockBytes, in.LockPath
	if bo.Out == "" {
		bo.Out = in.Spec.OutDir()
	}
	rep, err := builder.Build(ctx, bo)
	if err != nil {
		return nil, err
	}
	outs, err := builder.OpenOutputs(bo.Out, rep)
	if err != nil {
		return nil, err
	}
	return release.Publish(ctx, o.Store, o.Signer, release.Inputs{Spec: in.Spec, Lock: in.Lock, LockBytes: in.LockBytes,
		Report: rep, ReportJSON: outs.ReportJSON, Boot: outs.Boot, Installer: outs.Installer, Extensions: outs.Extensions,
		Images:  outs.Images,
		Channel: o.Channel, BuilderID: o.BuilderID, BuilderVersion: bo.Version, BuilderSHA256: bo.BuilderSHA256, Log: logf,
		Progress: bo.Progress})
}

// Inputs are a spec and its lock, the lock as parsed and as read.
type Inputs struct {
	Spec      *specs.Spec
	Lock      *lock.Lock
	LockBytes []byte
	LockPath  string
}

// ReadLock reads the lock of a spec (at path, or the spec's default).
func ReadLock(s *specs.Spec, path string) (*Inputs, error) {
	if path == "" {
		path = s.LockPath()
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	l, err := lock.Parse(b, path)
	if err != nil {
		return nil, err
	}
	return &Inputs{Spec: s, Lock: l, LockBytes: b, LockPath: path}, nil
}

// ReadOrCreateLock reads the lock of a spec, or locks the spec and writes
// the lock there when there is none, or (relock) when it is not the
// spec's as the spec is now.
func ReadOrCreateLock(ctx context.Context, s *specs.Spec, path string, lo locker.Options, relock bool, logf func(string, ...any)) (*Inputs, error) {
	if path == "" {
		path = s.LockPath()
	}
	in, err := ReadLock(s, path)
	switch {
	case err == nil && relock && builder.CheckLock(s, in.Lock) != nil:
		logf("%s is not the spec's as it is now: locking the spec again", path)
	case !errors.Is(err, fs.ErrNotExist):
		return in, err
	default:
		logf("no lock at %s: locking the spec", path)
	}
	if lo.Log == nil {
		lo.Log = logf
	}
	l, err := locker.Create(ctx, s, lo)
	if err != nil {
		return nil, err
	}
	b, err := locker.Write(path, l, s.Path("."))
	if err != nil {
		return nil, fmt.Errorf("writing the lock: %w", err)
	}
	return &Inputs{Spec: s, Lock: l, LockBytes: b, LockPath: path}, nil
}
