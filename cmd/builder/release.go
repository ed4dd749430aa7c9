package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/sigstore/sigstore/pkg/signature"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/nodeforge/builder/api/specs"
	"github.com/nodeforge/builder/attest/signing"
	"github.com/nodeforge/builder/builder"
	"github.com/nodeforge/builder/oci"
	"github.com/nodeforge/builder/pipeline"
	"github.com/nodeforge/builder/pkgbase/locker"
)

func init() { register(newReleaseCmd) }

// storeFlags choose where a channel's releases live.
type storeFlags struct {
	registry, layout, caFile string
	allowHTTP                bool
	retries                  int
}

func (f *storeFlags) add(cmd *cobra.Command, what string) {
	cmd.Flags().StringVar(&f.registry, "registry", "", what+": HOST[:PORT][/PREFIX] instead of the channel's registry (plain HTTP only for loopback unless --allow-http)")
	cmd.Flags().StringVar(&f.layout, "layout", "", what+": a local OCI image layout directory instead of the channel's")
	f.addRemote(cmd.Flags())
	cmd.Flags().IntVar(&f.retries, "retries", 5, "retries of a failed registry request (5xx, 429, cut connections), with exponential backoff")
}

// addRemote adds the flags that say how registries are reached: every
// command that reads or writes one takes them.
func (f *storeFlags) addRemote(fl *pflag.FlagSet) {
	fl.StringVar(&f.caFile, "ca-file", "", "PEM bundle of CAs trusted for registries besides the system's")
	fl.BoolVar(&f.allowHTTP, "allow-http", false, "permit plain HTTP to a registry that is not on loopback")
}

// remote is how registries are reached, as the flags say.
func (f *storeFlags) remote(ctx context.Context) oci.RemoteOptions {
	return oci.RemoteOptions{Timeout: netTimeout(ctx), CAFile: f.caFile, AllowHTTP: f.allowHTTP, Retries: f.retries}
}

// openStore opens the store a location names (docker://HOST/PREFIX or
// oci:DIR), a layout made when missing if create is set.
func (f *storeFlags) openStore(ctx context.Context, loc string, create bool) (oci.Store, error) {
	l, err := oci.ParseLocation(loc)
	if err != nil {
		return nil, err
	}
	return oci.Open(l, oci.OpenOptions{Create: create, Remote: f.remote(ctx)})
}

// open returns the store of channel c, overridden by the flags: to write
// to (a layout is made when missing) or only to read from.
func (f *storeFlags) open(ctx context.Context, c specs.Channel, write bool) (oci.Store, error) {
	reg, lay := c.Registry, c.Layout
	if f.registry != "" {
		reg, lay = f.registry, ""
	}
	if f.layout != "" {
		reg, lay = "", f.layout
	}
	ca := c.CAFile
	if f.caFile != "" {
		ca = f.caFile
	}
	if reg != "" {
		return oci.NewRemote(reg, oci.RemoteOptions{Timeout: netTimeout(ctx), CAFile: ca, AllowHTTP: c.AllowHTTP || f.allowHTTP, Retries: f.retries})
	}
	if write {
		return oci.CreateLayout(lay)
	}
	return oci.OpenLayout(lay)
}

// reachable fails early, before any work, when a registry store does not
// answer as a registry.
func reachable(ctx context.Context, st oci.Store) error {
	if p, ok := st.(oci.Pinger); ok {
		return p.Ping(ctx)
	}
	return nil
}

// loadSigner reads a cosign.key with the password in $COSIGN_PASSWORD.
func loadSigner(path string) (*signing.Signer, error) {
	if path == "" {
		return nil, errors.New("no signing key: set the channel's key in the spec (channels: NAME: key: FILE) or give --key FILE (builder keys generate writes one)")
	}
	if strings.Contains(path, "://") {
		return nil, fmt.Errorf("key %s: KMS keys are not compiled into this builder; use a cosign.key file", path)
	}
	pw, ok := os.LookupEnv("COSIGN_PASSWORD")
	if !ok {
		return nil, fmt.Errorf("set COSIGN_PASSWORD to the password of %s", path)
	}
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("signing key %s does not exist: make the channel's key pair with COSIGN_PASSWORD=... builder keys generate --out %s (or give --key FILE)", path, filepath.Dir(path))
	}
	if err != nil {
		return nil, err
	}
	sv, err := signing.LoadPrivate(b, []byte(pw))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return signing.NewSigner(sv)
}

// loadVerifiers reads cosign.pub files.
func loadVerifiers(paths []string) ([]signature.Verifier, error) {
	var out []signature.Verifier
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			return nil, err
		}
		v, err := signing.LoadPublic(b)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", p, err)
		}
		out = append(out, v)
	}
	return out, nil
}

// selfDigest is the sha256 of the running builder, for the provenance.
func selfDigest() string {
	exe, err := os.Executable()
	if err != nil {
		return ""
	}
	f, err := os.Open(exe)
	if err != nil {
		return ""
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return ""
	}
	return hex.EncodeToString(h.Sum(nil))
}

func newReleaseCmd() *cobra.Command {
	var b buildFlags
	var sf storeFlags
	var channel, key string
	var asJSON, relock bool
	cmd := &cobra.Command{
		Use:   "release (--branch NAME | --spec FILE) [--channel dev] [--registry HOST[:PORT][/PREFIX]] [--key FILE] [--relock]",
		Short: "Lock (when there is no lock), build, and publish a signed, attested release to a channel",
		Long: `release is the whole pipeline: it locks the spec when the lock file does not
exist yet (an existing lock is used as it is; one made before the spec was
edited is refused, and --relock locks the spec again over it), builds every
artifact from the lock, and publishes them to the channel's registry under its repository prefix,
tagged with the version:

  PREFIX/boot:VERSION          boot assets (vmlinuz, initramfs, rootfs, cmdline, SBOM) per architecture
  PREFIX/installer:VERSION     the installer image (an index, one image per architecture)
  PREFIX/extensions/NAME:VERSION  each system extension
  PREFIX/lock:VERSION          the lock file

Only blobs the registry lacks are uploaded. Every manifest (each index and each
per-architecture child) is then signed with the channel's key in cosign's
format (the sha256-<hex>.sig tag) and gets three signed in-toto attestations:
SPDX 2.3 and CycloneDX 1.5 SBOMs of its packages, and SLSA v1 provenance of the
release (spec, branch, version, channel, every RPM by sha256, every index by
digest, the keyrings, the builder's version and digest). Attestations are
attached in cosign's .att tag and as OCI referrers (with the sha256-<hex>
fallback tag on registries without the referrers API). Nothing needs a
transparency log: verify offline with the public key, by builder verify or
by cosign verify --key cosign.pub --insecure-ignore-tlog.

Channels come from the spec (channels: dev: registry: ..., key: ...); without
them, each channel is a local OCI image layout beside the spec
(release/<channel>), so a release needs no network and no registry.
Registry credentials come from docker's config.json ($DOCKER_CONFIG) and its
credential helpers; plain HTTP is used only for loopback hosts unless
--allow-http. Failed requests are retried with backoff; a tag is written only
after every blob of its manifest arrived, so an interrupted release leaves no
tag pointing at a partial image, and running it again completes it.

The signing key's password is read from $COSIGN_PASSWORD.`,
		Example: `  # the demo base into a local OCI layout (no network, no registry)
  builder demo-base /tmp/demo
  COSIGN_PASSWORD=demo builder keys generate --out /tmp/demo/keys/dev
  COSIGN_PASSWORD=demo builder release --branch p11 --spec /tmp/demo/spec.yaml
  builder verify --key /tmp/demo/keys/dev/cosign.pub --version 1.11.0-demo oci:/tmp/demo/release/dev

  # the shipped p11 spec to the dev channel's registry, overridden for one run
  builder release --branch p11 --registry registry.internal:5000/nodeforge/p11 --key keys/dev/cosign.key`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			// Before the store is opened (a layout is made there): a
			// builder that cannot write a release's bytes writes nothing.
			if err := builder.CheckBuilder(); err != nil {
				return err
			}
			s, err := b.sf.load()
			if err != nil {
				return err
			}
			ch, err := s.Channel(channel)
			if err != nil {
				return err
			}
			if key == "" {
				key = ch.Key
			}
			signer, err := loadSigner(key)
			if err != nil {
				return err
			}
			st, err := sf.open(cmd.Context(), ch, true)
			if err != nil {
				return err
			}
			if err := reachable(cmd.Context(), st); err != nil {
				return err
			}
			stderr := cmd.ErrOrStderr()
			bo, err := b.options(cmd, s, nil)
			if err != nil {
				return err
			}
			defer bo.SecureBoot.Close()
			collectOften()
			pub, err := pipeline.Release(cmd.Context(), pipeline.ReleaseOptions{Spec: s, LockPath: b.lockPath, Relock: relock,
				Locker: locker.Options{Cache: bo.Cache, Source: bo.Source}, Build: bo,
				Store: st, Signer: signer, Channel: channel, BuilderID: ch.BuilderID, Log: b.view.logf,
				Locked: func() { b.view.finish(stageDownloads) }})
			b.view.end()
			if err != nil {
				return err
			}
			w := cmd.OutOrStdout()
			if asJSON {
				return printJSON(w, pub)
			}
			for _, img := range pub.Images {
				fmt.Fprintf(w, "%s@%s\n", img.Ref, img.Digest)
			}
			fmt.Fprintf(stderr, "released %s to %s (channel %s): %d manifests, %d blobs uploaded (%d bytes), %d signatures and %d attestations added, key %s\n",
				pub.Version, pub.Store, channel, pub.Stats.Manifests, pub.Stats.Blobs, pub.Stats.BlobBytes, pub.Signed, pub.Attested, pub.KeyID)
			return nil
		},
	}
	b.add(cmd)
	sf.add(cmd, "publish to")
	cmd.Flags().StringVar(&channel, "channel", "dev", "channel to publish to (the spec's channels; default dev and prod)")
	cmd.Flags().StringVar(&key, "key", "", "signing key (cosign.key) instead of the channel's; password in $COSIGN_PASSWORD")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print what was published as JSON")
	cmd.Flags().BoolVar(&relock, "relock", false, "lock the spec again when the lock was made before the spec was edited (package versions may move), instead of refusing")
	return cmd
}
