package sbom

import (
	"maps"
	"slices"
	"strconv"

	"github.com/nodeforge/builder/api/lock"
	"github.com/nodeforge/builder/api/specs"
)

// FromLock describes the packages (NEVRAs, per architecture) of the
// lock that an artifact holds.
func FromLock(s *specs.Spec, l *lock.Lock, name string, packages map[string][]string, lockSHA string, sde int64, tool string) Document {
	d := Document{Name: name, Version: s.Version, Branch: s.Branch, Vendor: "altlinux",
		Tool: tool, LockSHA256: lockSHA, SourceDateEpoch: sde}
	seen := map[string]bool{}
	for _, arch := range slices.Sorted(maps.Keys(packages)) {
		a := l.Architectures[arch]
		if a == nil {
			continue
		}
		byNEVRA := map[string]*lock.Package{}
		for i := range a.Packages {
			byNEVRA[a.Packages[i].NEVRA] = &a.Packages[i]
		}
		for _, nevra := range packages[arch] {
			p := byNEVRA[nevra]
			if p == nil || seen[p.SHA256] {
				continue
			}
			seen[p.SHA256] = true
			epoch := ""
			if p.Epoch != nil {
				epoch = strconv.Itoa(*p.Epoch)
			}
			d.Packages = append(d.Packages, Package{Name: p.Name, Epoch: epoch, Version: p.Version, Release: p.Release, Arch: p.Arch,
				NEVRA: p.NEVRA, SourceRPM: p.SourceRPM, License: p.License, SHA256: p.SHA256, Repository: p.Repository})
		}
	}
	return d
}
