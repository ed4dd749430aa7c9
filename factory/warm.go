package factory

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/nodeforge/builder/api/platform"
	"github.com/nodeforge/builder/api/schematic"
)

// WarmOptions say what Warm builds ahead of the requests.
type WarmOptions struct {
	// Version is a version the factory serves, either spelling (v1.11.0
	// or 1.11.0).
	Version string
	// Schematics are IDs of schematics in the cache store.
	Schematics []string
	// Platforms are those whose media are built (none: metal).
	Platforms []string
	// Artifacts name what is built for each schematic, platform and
	// architecture: kernel, initramfs, cmdline, installer (installer/ID:V
	// for metal, PLATFORM-installer/ID:V for another platform) or a disk
	// format (iso, raw, qcow2, vhd, raw.tar.gz; iso, raw and vhd also with
	// .xz or .zst). None: kernel, initramfs, cmdline, the platform's own
	// formats and installer.
	Artifacts []string
	// Progress, when set, hears of each artifact once the cache holds it.
	Progress func(WarmItem)
}

// WarmItem is one artifact warmed.
type WarmItem struct {
	Schematic string `json:"schematic"`
	// Artifact is the artifact's name (metal-x86_64.iso), or the installer
	// image's reference at the factory's registry front
	// (installer/ID:VERSION).
	Artifact string  `json:"artifact"`
	Built    bool    `json:"built"` // false: the cache held it
	Seconds  float64 `json:"seconds"`
}

// WarmReport says what Warm did.
type WarmReport struct {
	Version string     `json:"version"`
	Items   []WarmItem `json:"items"`
	Built   int        `json:"built"`
	Cached  int        `json:"cached"`
}

// warmTarget is one artifact of a plan, for any schematic: a file, or
// (kind installer) the installer image of a.platform, every architecture
// in one index.
type warmTarget struct {
	a    Artifact
	arch string // the release's name of the architecture; "" for an installer
}

// Warm builds artifacts of schematics into the cache through the code
// path of requests (the same cache keys, build slots and signatures), so
// a factory on the cache serves them without a build. Everything is
// checked before the first build: the version, each schematic, each
// platform and artifact name. One artifact at a time: counts of built
// and cached are exact as long as nothing else builds on this Server.
func (s *Service) Warm(ctx context.Context, o WarmOptions) (*WarmReport, error) {
	c := s.served()
	rel := c.find(o.Version)
	if rel == nil {
		return nil, fmt.Errorf("version %q is not served (served: %s)", o.Version, strings.Join(c.talosVersions(), ", "))
	}
	if s.broken(rel.Version) {
		return nil, fmt.Errorf("version %s is marked broken: the factory does not serve it", TalosVersion(rel.Version))
	}
	if s.o.Signer == nil {
		return nil, errors.New("without a signing key nothing is cached: warming would build for nothing")
	}
	var schs []*schematic.Schematic
	for _, id := range o.Schematics {
		sch, err := s.schematics.get(ctx, id)
		if errors.Is(err, ErrUnknownSchematic) {
			return nil, fmt.Errorf("schematic %s is not in the cache store %s (create it first: POST /schematics)", id, s.o.Cache)
		}
		if err != nil {
			return nil, fmt.Errorf("reading schematic %s: %w", id, err)
		}
		schs = append(schs, sch)
	}
	plan, err := warmPlan(rel.PlatformTable(), rel.Params.Architectures, o.Platforms, o.Artifacts)
	if err != nil {
		return nil, err
	}
	// The release's spelling, as the cache entries (and gc) name it.
	rep := &WarmReport{Version: rel.Version, Items: []WarmItem{}}
	for i, sch := range schs {
		for _, t := range plan {
			it, err := s.warmOne(ctx, rel, sch, o.Schematics[i], t)
			if err != nil {
				return rep, err
			}
			rep.Items = append(rep.Items, it)
			if it.Built {
				rep.Built++
			} else {
				rep.Cached++
			}
			if o.Progress != nil {
				o.Progress(it)
			}
		}
	}
	return rep, nil
}

// warmOne makes one artifact, as a request for it would.
func (s *Service) warmOne(ctx context.Context, rel *VerifiedRelease, sch *schematic.Schematic, id string, t warmTarget) (WarmItem, error) {
	it := WarmItem{Schematic: id, Artifact: t.a.FileName(t.arch)}
	before, start := s.built.Load(), time.Now()
	installer := t.a.kind == "installer"
	if installer {
		it.Artifact = InstallerKind{Platform: t.a.platform}.ref(id, rel.Version)
	}
	// What a request would refuse (400), warming refuses by the same words.
	err := Unhonoured(rel, sch, t.a.Output(), rel.Version)
	if err != nil {
		return it, fmt.Errorf("warming %s of schematic %s: %w", it.Artifact, id, err)
	}
	if installer {
		_, err = s.Installer(ctx, rel, sch, InstallerKind{Platform: t.a.platform}, "")
	} else {
		var a *CachedArtifact
		if a, err = s.Compose(ctx, rel, sch, t.a, t.arch); err == nil {
			// Warmed means cached: a request's entry is written while it is
			// served, and warm exits once it reports. Built, it is cached
			// even when warm is being stopped (a moment, bounded by the
			// build time limit): the build is not lost.
			err = a.Cached(context.WithoutCancel(ctx))
		}
	}
	if err != nil {
		return it, fmt.Errorf("warming %s of schematic %s: %w", it.Artifact, id, err)
	}
	it.Built, it.Seconds = s.built.Load() > before, time.Since(start).Seconds()
	return it, nil
}

// warmPlan lists the artifacts named for every platform (of the release's
// table) and architecture, each once (the kernel and the initramfs are
// the same on every platform).
func warmPlan(table platform.Table, arches, platforms, names []string) ([]warmTarget, error) {
	if len(platforms) == 0 {
		platforms = []string{platform.Default}
	}
	var plan []warmTarget
	seen := map[string]bool{}
	add := func(t warmTarget) {
		n := t.a.FileName(t.arch)
		if t.a.kind == "installer" {
			n = InstallerRepo(t.a.platform)
		}
		if !seen[n] {
			seen[n] = true
			plan = append(plan, t)
		}
	}
	for _, pn := range platforms {
		p, err := table.Lookup(pn)
		if err != nil {
			return nil, err
		}
		want := names
		if len(want) == 0 {
			want = slices.Concat([]string{"kernel", "initramfs", "cmdline"}, p.Formats, []string{"installer"})
		}
		for _, n := range want {
			if n == "installer" {
				pl := p.Name
				if pl == platform.Default {
					pl = "" // installer/ID:V
				}
				add(warmTarget{a: Artifact{kind: "installer", platform: pl}})
				continue
			}
			for _, arch := range arches {
				a, err := warmArtifact(n, p.Name, arch)
				if err != nil {
					return nil, err
				}
				add(warmTarget{a: a, arch: arch})
			}
		}
	}
	return plan, nil
}

// warmArtifact is the artifact a warm name means on a platform and
// architecture: parseArtifact's, of the file the name stands for.
func warmArtifact(name, pl, arch string) (Artifact, error) {
	switch name {
	case "kernel":
		return ParseArtifact("kernel-" + arch)
	case "initramfs":
		return ParseArtifact("initramfs-" + arch + ".xz")
	case "cmdline":
		return ParseArtifact("cmdline-" + pl + "-" + arch)
	}
	a, err := ParseArtifact(pl + "-" + arch + "." + name)
	if a.kind != "disk" {
		return Artifact{}, fmt.Errorf("unknown artifact %q: kernel, initramfs, cmdline, installer, or a disk format (%s; also .xz, .zst or .gz)", name, strings.Join(platform.Formats, ", "))
	}
	return a, err
}
