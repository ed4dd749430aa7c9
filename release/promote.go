package release

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/sigstore/sigstore/pkg/signature"

	"github.com/nodeforge/builder/attest/signing"
	"github.com/nodeforge/builder/oci"
)

// Repositories lists the repositories of the release tagged tag in st,
// from its lock artifact.
func Repositories(ctx context.Context, st oci.Reader, tag string) ([]string, error) {
	img, err := st.Image(ctx, RepoLock, tag)
	if err != nil {
		return nil, fmt.Errorf("release %s: %w", tag, err)
	}
	m, err := img.Manifest()
	if err != nil {
		return nil, err
	}
	list := m.Annotations[AnnRepositories]
	if list == "" {
		return nil, fmt.Errorf("%s has no %s annotation: not a release's lock artifact", st.Ref(RepoLock, tag), AnnRepositories)
	}
	return strings.Split(list, ","), nil
}

// PromoteOptions are the inputs of a promotion.
type PromoteOptions struct {
	Version string
	// From and To are the source and destination channels' names and stores.
	FromChannel, ToChannel string
	From, To               oci.Store
	// FromKeys verify the source; Signer signs for the destination.
	FromKeys []signature.Verifier
	Signer   *signing.Signer
	Policy   *Policy
	// Now is the promotion's time (recorded in its attestation).
	Now time.Time
	Log func(format string, args ...any)
}

// Promotion is what a promotion did.
type Promotion struct {
	Version string    `json:"version"`
	From    string    `json:"from"`
	To      string    `json:"to"`
	Images  []Image   `json:"images"`
	Stats   oci.Stats `json:"uploaded"`
	Refused []string  `json:"refused,omitempty"`
	// RootCause, when set, is the one reason behind every refusal.
	RootCause string `json:"rootCause,omitempty"`
}

// PromotionPredicate records a promotion.
type PromotionPredicate struct {
	Version     string    `json:"version"`
	From        string    `json:"from"` // source channel
	To          string    `json:"to"`
	Source      string    `json:"source"` // repo@digest in the source store
	Destination string    `json:"destination"`
	SourceKeys  []string  `json:"sourceKeys"` // keys that verified the source
	Key         string    `json:"key"`        // the key signing the destination
	Time        time.Time `json:"time"`
}

// ErrRefused is returned when the source does not verify.
var ErrRefused = errors.New("promotion refused")

// Promote copies a release from one store to another by digest, never
// rebuilding, after verifying every image of it (signatures, attestations,
// single-base policy) with the source keys. At the destination each
// manifest is signed with the destination key, the verified SBOM and
// provenance statements are attested again with it, and a promotion
// attestation is added.
func Promote(ctx context.Context, o PromoteOptions) (*Promotion, error) {
	logf := o.Log
	if logf == nil {
		logf = func(string, ...any) {}
	}
	tag, err := oci.ValidTag(o.Version)
	if err != nil {
		return nil, err
	}
	repos, err := Repositories(ctx, o.From, tag)
	if err != nil {
		return nil, err
	}
	res := &Promotion{Version: o.Version, From: o.From.String(), To: o.To.String(), Images: []Image{}}
	var keyIDs []string
	for _, k := range o.FromKeys {
		if pub, err := k.PublicKey(); err == nil {
			if id, err := signing.KeyID(pub); err == nil {
				keyIDs = append(keyIDs, id)
			}
		}
	}
	checked := map[string]*Verification{}
	var all []*Verification
	for _, repo := range repos {
		logf("verifying %s", o.From.Ref(repo, tag))
		v, err := Verify(ctx, o.From, repo, tag, o.FromKeys, o.Policy)
		if err != nil {
			res.Refused = append(res.Refused, err.Error())
			continue
		}
		res.Refused = append(res.Refused, v.Problems...)
		checked[repo] = v
		all = append(all, v)
	}
	if len(res.Refused) > 0 {
		if len(all) == len(repos) {
			res.RootCause = RootCause(all, o.FromKeys)
		}
		return res, fmt.Errorf("%w: %s", ErrRefused, strings.Join(res.Refused, "\n  "))
	}
	for _, repo := range repos {
		v := checked[repo]
		logf("copying %s to %s", o.From.Ref(repo, v.Digest), o.To.Ref(repo, tag))
		d, err := o.From.Head(ctx, repo, v.Digest)
		if err != nil {
			return res, err
		}
		err = oci.Retry(ctx, func() error {
			if d.MediaType.IsIndex() {
				idx, err := o.From.Index(ctx, repo, v.Digest)
				if err != nil {
					return err
				}
				return o.To.WriteIndex(ctx, repo, tag, idx)
			}
			img, err := o.From.Image(ctx, repo, v.Digest)
			if err != nil {
				return err
			}
			return o.To.WriteImage(ctx, repo, tag, img)
		})
		if err != nil {
			return res, fmt.Errorf("copying %s: %w", o.From.Ref(repo, tag), err)
		}
		got, err := o.To.Head(ctx, repo, tag)
		if err != nil {
			return res, err
		}
		if got.Digest.String() != v.Digest {
			return res, fmt.Errorf("%s has digest %s after the copy, the source %s", o.To.Ref(repo, tag), got.Digest, v.Digest)
		}
		img := Image{Repo: repo, Ref: o.To.Ref(repo, tag), Digest: v.Digest}
		for _, m := range v.Manifests {
			if m.Digest != v.Digest {
				img.Children = append(img.Children, m.Digest)
			}
		}
		res.Images = append(res.Images, img)
		// Sign and attest each manifest (the index and its children).
		for _, m := range v.Manifests {
			h, err := v1.NewHash(m.Digest)
			if err != nil {
				return res, err
			}
			desc, err := o.To.Head(ctx, repo, m.Digest)
			if err != nil {
				return res, err
			}
			if err := promoteManifest(ctx, o, repo, *desc, h, keyIDs); err != nil {
				return res, err
			}
		}
	}
	res.Stats = o.To.Stats()
	return res, nil
}

// promoteManifest signs one manifest at the destination, re-attests the
// source's verified statements and adds the promotion attestation.
func promoteManifest(ctx context.Context, o PromoteOptions, repo string, desc v1.Descriptor, h v1.Hash, keyIDs []string) error {
	return oci.Retry(ctx, func() error {
		if _, err := o.Signer.Sign(ctx, o.To, repo, h); err != nil {
			return err
		}
		_, atts, err := signing.ReadSigs(ctx, o.From, repo, oci.AttTag(h))
		if err != nil {
			return err
		}
		for _, l := range atts {
			env, err := signing.LayerBytes(l.Layer)
			if err != nil {
				continue
			}
			var payload []byte
			for _, k := range o.FromKeys {
				if payload, err = signing.OpenEnvelope(k, env); err == nil {
					break
				}
			}
			var s signing.Statement
			if payload == nil || json.Unmarshal(payload, &s) != nil || s.PredicateType == signing.PredicatePromotion {
				continue
			}
			if _, err := o.Signer.Attest(ctx, o.To, repo, desc, s.PredicateType, payload); err != nil {
				return err
			}
		}
		pred, err := json.Marshal(PromotionPredicate{Version: o.Version, From: o.FromChannel, To: o.ToChannel,
			Source: o.From.Ref(repo, h.String()), Destination: o.To.Ref(repo, h.String()),
			SourceKeys: keyIDs, Key: o.Signer.KeyID, Time: o.Now.UTC().Truncate(time.Second)})
		if err != nil {
			return err
		}
		st, err := signing.NewStatement(subjectOf(o.To.Ref(repo, o.Version), h), signing.PredicatePromotion, pred)
		if err != nil {
			return err
		}
		_, err = o.Signer.Attest(ctx, o.To, repo, desc, signing.PredicatePromotion, st)
		return err
	})
}

// LockBytes returns the lock file of the release tagged tag in st, from
// its lock artifact (the content is checked against the layer digest).
func LockBytes(ctx context.Context, st oci.Reader, tag string) ([]byte, error) {
	img, err := st.Image(ctx, RepoLock, tag)
	if err != nil {
		return nil, fmt.Errorf("release %s: %w", tag, err)
	}
	layers, err := img.Layers()
	if err != nil {
		return nil, err
	}
	if len(layers) != 1 {
		return nil, fmt.Errorf("%s has %d layers, a lock artifact has one", st.Ref(RepoLock, tag), len(layers))
	}
	return signing.LayerBytes(layers[0])
}
