package builder

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/nodeforge/builder/api/report"
	"github.com/nodeforge/builder/api/specs"
	"github.com/nodeforge/builder/builder/compose"
	"github.com/nodeforge/builder/builder/rootfs"
	"github.com/nodeforge/builder/internal/digest"
	ocilayout "github.com/nodeforge/builder/internal/ocilayout"
)

// containerGenerators describe the files only container images get, for
// the report of a build that has images.
var containerGenerators = map[string]string{
	"image-link": "a symbolic link a container image's spec declares (images.<name>.links)",
	"ca-bundle":  "/etc/ssl/certs/ca-certificates.crt: the certificates the image's packages ship under /usr/share/ca-certificates, in path order",
}

// ImagesDir is where a build writes a container image's OCI layout,
// slash-separated and relative to the output: images/<name>.
func ImagesDir(name string) string { return "images/" + name }

// buildContainers assembles every container image the lock builds for the
// architecture, from its own locked packages, checks it (checkContainer)
// and keeps its layer for the image's layout.
func (b *archBuild) buildContainers(ctx context.Context, ar *report.ArchReport) error {
	for _, name := range b.spec.ImageNames() {
		nevras, ok := b.locked.Images[name]
		if !ok {
			continue
		}
		done := step(b.logf, "%s: container image %s (%d packages)", b.arch, name, len(nevras))
		ir, layer, err := b.containerImage(ctx, name, nevras)
		if err != nil {
			return fmt.Errorf("%s: image %s: %w", b.arch, name, err)
		}
		if ar.Images == nil {
			ar.Images = map[string]*report.ImageReport{}
		}
		ar.Images[name] = ir
		if b.containers[name] == nil {
			b.containers[name] = map[string]v1.Layer{}
		}
		b.containers[name][b.arch] = layer
		done()
	}
	return nil
}

// containerImage lays one image's packages into a tree of its own, as the
// root is laid (payloads checked, accounts from the base, the spec and
// scriptlets, the OS release file, drop rules, setuid policy, loader
// cache), adds its links and CA bundle, checks it, and makes its layer.
func (b *archBuild) containerImage(ctx context.Context, name string, nevras []string) (*report.ImageReport, *compose.ImageLayer, error) {
	im := b.spec.Images[name]
	as := &assembly{tree: rootfs.New(), packages: nevras}
	all, ghosts, err := layLocked(ctx, as.tree, b.arch, b.locked, nevras, b.paths, layInputs{shuffle: b.opts.Shuffle, cache: b.layCache})
	if err != nil {
		return nil, nil, err
	}
	if err := as.applyAccounts(im.Users, im.Groups, all); err != nil {
		return nil, nil, err
	}
	osr := osRelease(b.spec)
	if err := as.tree.Replace(&rootfs.Node{Path: "/etc/os-release", Kind: rootfs.KindFile, Mode: 0o644, User: "root", Group: "root", Data: osr, Digest: digest.SHA256Hex(osr), Origin: generated("os-release")}); err != nil {
		return nil, nil, err
	}
	for _, p := range slices.Sorted(maps.Keys(im.Links)) {
		if err := as.tree.Replace(&rootfs.Node{Path: p, Kind: rootfs.KindSymlink, Mode: 0o777, User: "root", Group: "root", Target: im.Links[p], Origin: generated("image-link")}); err != nil {
			return nil, nil, fmt.Errorf("links: %s: %w", p, err)
		}
	}
	if err := caBundle(as.tree); err != nil {
		return nil, nil, err
	}
	if err := as.finish(b.arch, im.Drop, rootfs.Policy{Setuid: set(im.Setuid), Section: "images." + name}); err != nil {
		return nil, nil, err
	}
	if err := checkContainer(as.tree, as.accounts, im, as.libraries, b.target.Machines()); err != nil {
		return nil, nil, err
	}
	owners := as.accounts.Owners()
	var tarData bytes.Buffer
	if err := as.tree.WriteTar(&tarData, owners, b.sde); err != nil {
		return nil, nil, err
	}
	files, err := treeEntries(as.tree, owners)
	if err != nil {
		return nil, nil, err
	}
	newLayer := compose.NewImageLayer
	if im.Compression == "zstd" {
		newLayer = compose.NewZstdImageLayer
	}
	layer, err := newLayer(tarData.Bytes())
	if err != nil {
		return nil, nil, err
	}
	d, _ := layer.Digest()
	slices.Sort(ghosts)
	ir := &report.ImageReport{Packages: nevras, Scriptlets: as.scriptlets, Ghosts: ghosts, Dropped: as.drops, Policy: as.policy,
		Libraries: as.libraries, Layer: d.String(), Files: files}
	if ir.Ghosts == nil {
		ir.Ghosts = []string{}
	}
	return ir, layer, nil
}

// caBundle writes /etc/ssl/certs/ca-certificates.crt, the bundle
// update-ca-certificates would make at installation, when the packages
// ship certificates under /usr/share/ca-certificates and no bundle there.
// A package that ships the bundle itself (ALT's ca-certificates) is left
// alone.
func caBundle(t *rootfs.Tree) error {
	const bundle = "/etc/ssl/certs/ca-certificates.crt"
	if t.Get(bundle) != nil {
		return nil
	}
	var data []byte
	for _, p := range t.Paths() {
		n := t.Get(p)
		if n.Kind != rootfs.KindFile || filepath.Ext(p) != ".crt" || !inDir(p, "/usr/share/ca-certificates") {
			continue
		}
		data = append(data, n.Data...)
		if len(n.Data) > 0 && n.Data[len(n.Data)-1] != '\n' {
			data = append(data, '\n')
		}
	}
	if data == nil {
		return nil
	}
	return t.Replace(&rootfs.Node{Path: bundle, Kind: rootfs.KindFile, Mode: 0o644, User: "root", Group: "root", Data: data, Digest: digest.SHA256Hex(data), Origin: generated("ca-bundle")})
}

// inDir says whether p is below dir.
func inDir(p, dir string) bool { return len(p) > len(dir) && p[:len(dir)] == dir && p[len(dir)] == '/' }

// writeContainers writes the OCI layout of every container image,
// OUT/images/<name>: an index over one image per architecture it was built
// for, with the spec's run-time configuration.
func (r *buildRun) writeContainers(ctx context.Context) error {
	for _, name := range slices.Sorted(maps.Keys(r.containers)) {
		im := r.spec.Images[name]
		ann := map[string]string{
			"org.opencontainers.image.title":    name,
			"org.opencontainers.image.version":  r.spec.Version,
			"org.opencontainers.image.created":  time.Unix(r.sde, 0).UTC().Format(time.RFC3339),
			"org.opencontainers.image.revision": "sha256:" + r.rep.LockSHA256,
			"dev.nodeforge.branch":              r.spec.Branch,
		}
		maps.Copy(ann, im.Annotations)
		idx, err := containerIndex(r.sde, im, ann, r.containers[name])
		if err != nil {
			return fmt.Errorf("image %s: %w", name, err)
		}
		if err := ocilayout.WriteRoot(ctx, filepath.Join(r.work, filepath.FromSlash(ImagesDir(name))), idx); err != nil {
			return fmt.Errorf("image %s: oci layout: %w", name, err)
		}
		d, err := idx.Digest()
		if err != nil {
			return err
		}
		if r.rep.Images == nil {
			r.rep.Images = map[string]string{}
		}
		r.rep.Images[name] = d.String()
	}
	return nil
}

// containerIndex is the image index of one container image: per
// architecture (in name order) an image of its one layer, created at the
// source date, configured as the spec says.
func containerIndex(sde int64, im specs.ContainerImage, ann map[string]string, layers map[string]v1.Layer) (v1.ImageIndex, error) {
	created := v1.Time{Time: time.Unix(sde, 0).UTC()}
	idx := mutate.IndexMediaType(empty.Index, types.OCIImageIndex)
	for _, arch := range slices.Sorted(maps.Keys(layers)) {
		img := mutate.ConfigMediaType(mutate.MediaType(empty.Image, types.OCIManifestSchema1), types.OCIConfigJSON)
		img, err := mutate.Append(img, mutate.Addendum{Layer: layers[arch]})
		if err != nil {
			return nil, err
		}
		cf, err := img.ConfigFile()
		if err != nil {
			return nil, err
		}
		cf = cf.DeepCopy()
		cf.Architecture, cf.OS, cf.Created, cf.History = specs.GoArch(arch), "linux", created, nil
		cf.Config = containerConfig(im)
		if img, err = mutate.ConfigFile(img, cf); err != nil {
			return nil, err
		}
		img = mutate.Annotations(img, ann).(v1.Image)
		idx = mutate.AppendManifests(idx, mutate.IndexAddendum{Add: img, Descriptor: v1.Descriptor{
			Platform: &v1.Platform{OS: "linux", Architecture: specs.GoArch(arch)},
		}})
	}
	return compose.PlainIndex(mutate.Annotations(idx, ann).(v1.ImageIndex))
}

// containerConfig is the run-time configuration of an image's config.
func containerConfig(im specs.ContainerImage) v1.Config {
	env := maps.Clone(im.Env)
	if env == nil {
		env = map[string]string{}
	}
	if _, ok := env["PATH"]; !ok {
		env["PATH"] = specs.DefaultContainerPath
	}
	c := v1.Config{Entrypoint: im.Entrypoint, Cmd: im.Cmd, WorkingDir: im.Workdir, User: im.User, Labels: im.Labels, StopSignal: im.StopSignal}
	for _, k := range slices.Sorted(maps.Keys(env)) {
		c.Env = append(c.Env, k+"="+env[k])
	}
	for _, p := range im.Ports {
		if c.ExposedPorts == nil {
			c.ExposedPorts = map[string]struct{}{}
		}
		c.ExposedPorts[p] = struct{}{}
	}
	if h := im.Healthcheck; h != nil {
		d := func(s string) time.Duration { v, _ := time.ParseDuration(s); return v } // checked by the spec's reader
		c.Healthcheck = &v1.HealthConfig{Test: append([]string{"CMD"}, h.Command...), Interval: d(h.Interval),
			Timeout: d(h.Timeout), StartPeriod: d(h.StartPeriod), Retries: h.Retries}
	}
	return c
}
