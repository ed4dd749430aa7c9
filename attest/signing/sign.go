package signing

import (
	"bytes"
	"context"
	"crypto"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/types"
	cosignempty "github.com/sigstore/cosign/v2/pkg/oci/empty"
	"github.com/sigstore/cosign/v2/pkg/oci/static"
	"github.com/sigstore/sigstore/pkg/signature"
	"github.com/sigstore/sigstore/pkg/signature/dsse"
	"github.com/sigstore/sigstore/pkg/signature/payload"

	"github.com/nodeforge/builder/oci"
)

// Media and predicate types of what is attached to a release.
const (
	InTotoPayloadType  = "application/vnd.in-toto+json"
	DSSEMediaType      = "application/vnd.dsse.envelope.v1+json"
	PredicateSPDX      = "https://spdx.dev/Document"
	PredicateCycloneDX = "https://cyclonedx.org/bom"
	PredicateSLSA      = "https://slsa.dev/provenance/v1"
	PredicatePromotion = "https://nodeforge.dev/promotion/v1"
	// PredicateBuildReport is the build report (report.Report) attested
	// on the lock artifact: every file of every artifact and its origin.
	PredicateBuildReport = "https://nodeforge.dev/build-report/v1"
	// annPredicateType is the annotation of an attestation layer (cosign's
	// name) and of a referrer manifest (in-toto's).
	annPredicateType        = "predicateType"
	annReferrerPredicate    = "in-toto.io/predicate-type"
	annSignatureCosign      = "dev.cosignproject.cosign/signature"
	simpleSigningMediaType  = "application/vnd.dev.cosign.simplesigning.v1+json"
	cosignSignatureTypeName = "cosign container image signature"
)

// Signer signs and attests in cosign's formats with one key.
type Signer struct {
	sv signature.SignerVerifier
	// KeyID is the sha256 of the public key (DER), naming the key in
	// promotion attestations and messages.
	KeyID string
}

// NewSigner wraps a loaded key (see LoadPrivate).
func NewSigner(sv signature.SignerVerifier) (*Signer, error) {
	pub, err := sv.PublicKey()
	if err != nil {
		return nil, err
	}
	id, err := KeyID(pub)
	if err != nil {
		return nil, err
	}
	return &Signer{sv: sv, KeyID: id}, nil
}

// KeyID is "sha256:<hex>" of a public key's DER encoding.
func KeyID(pub crypto.PublicKey) (string, error) {
	der, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		return "", err
	}
	s := sha256.Sum256(der)
	return "sha256:" + hex.EncodeToString(s[:]), nil
}

// SignBlob signs a file's bytes as cosign sign-blob does: the base64 of
// the key's signature over them, which cosign verify-blob --key checks
// offline.
func (s *Signer) SignBlob(data []byte) ([]byte, error) { return s.SignReader(bytes.NewReader(data)) }

// SignReader is SignBlob of what r reads (a large file, streamed).
func (s *Signer) SignReader(r io.Reader) ([]byte, error) {
	sig, err := s.sv.SignMessage(r)
	if err != nil {
		return nil, err
	}
	return []byte(base64.StdEncoding.EncodeToString(sig)), nil
}

// Verifier returns the signer's public half.
func (s *Signer) Verifier() signature.Verifier { return s.sv }

// signingPayload is cosign's simple-signing payload for a manifest.
func signingPayload(dockerRef string, d v1.Hash, claims map[string]string) ([]byte, error) {
	var optional map[string]any
	if len(claims) > 0 {
		optional = map[string]any{}
		for k, v := range claims {
			optional[k] = v
		}
	}
	return json.Marshal(payload.SimpleContainerImage{Critical: payload.Critical{
		Identity: payload.Identity{DockerReference: dockerRef},
		Image:    payload.Image{DockerManifestDigest: d.String()},
		Type:     cosignSignatureTypeName,
	}, Optional: optional})
}

// SignOptions say what a signature claims beside the manifest's digest.
type SignOptions struct {
	// Identity is the docker-reference claimed: the reference users pull
	// (default: the repository in the store that is signed in).
	Identity string
	// Claims are signed with the digest, in the payload's optional
	// section (cosign verify --annotations checks them): what the
	// manifest is for, when its digest alone does not say.
	Claims map[string]string
}

// Sign adds a signature of manifest d of repo to its sha256-<hex>.sig
// tag, unless one by this key is there already (re-releasing signs
// nothing anew). It returns whether it signed.
func (s *Signer) Sign(ctx context.Context, st oci.Store, repo string, d v1.Hash) (bool, error) {
	return s.SignWith(ctx, st, repo, d, SignOptions{})
}

// SignWith is Sign with an identity and claims of the caller's: a
// signature by this key with the same claims is not added again.
func (s *Signer) SignWith(ctx context.Context, st oci.Store, repo string, d v1.Hash, o SignOptions) (bool, error) {
	base, existing, err := ReadSigs(ctx, st, repo, oci.SigTag(d))
	if err != nil {
		return false, err
	}
	for _, l := range existing {
		if p, err := SignedPayload(s.sv, l, d); err == nil && sameClaims(p, o.Claims) {
			return false, nil
		}
	}
	ref := st.Ref(repo, d.String())
	dockerRef := o.Identity
	if dockerRef == "" {
		dockerRef = oci.RepoName(st, repo)
	}
	p, err := signingPayload(dockerRef, d, o.Claims)
	if err != nil {
		return false, err
	}
	raw, err := s.sv.SignMessage(bytes.NewReader(p))
	if err != nil {
		return false, fmt.Errorf("signing %s: %w", ref, err)
	}
	sig, err := static.NewSignature(p, base64.StdEncoding.EncodeToString(raw))
	if err != nil {
		return false, err
	}
	ann, err := sig.Annotations()
	if err != nil {
		return false, err
	}
	img, err := mutate.Append(base, mutate.Addendum{Layer: sig, Annotations: ann})
	if err != nil {
		return false, err
	}
	if err := st.WriteImage(ctx, repo, oci.SigTag(d), img); err != nil {
		return false, fmt.Errorf("writing the signature of %s: %w", ref, err)
	}
	return true, nil
}

// Statement is an in-toto Statement v1.
type Statement struct {
	Type          string          `json:"_type"`
	Subject       []Subject       `json:"subject"`
	PredicateType string          `json:"predicateType"`
	Predicate     json.RawMessage `json:"predicate"`
}

// Subject is one subject of a statement.
type Subject struct {
	Name   string            `json:"name"`
	Digest map[string]string `json:"digest"`
}

// StatementV1 is the _type of an in-toto Statement v1.
const StatementV1 = "https://in-toto.io/Statement/v1"

// NewStatement marshals an in-toto Statement v1 about subjects, the
// statement Attest signs.
func NewStatement(subjects []Subject, predicateType string, predicate []byte) ([]byte, error) {
	return json.Marshal(Statement{Type: StatementV1, Subject: subjects, PredicateType: predicateType, Predicate: predicate})
}

// Attest signs statement (an in-toto statement about manifest d) as a
// DSSE envelope and attaches it twice: as a layer of cosign's
// sha256-<hex>.att image, and as an OCI referrer of d (a registry without
// the referrers API gets the sha256-<hex> fallback tag). An identical
// statement already attached by this key is not attached again.
func (s *Signer) Attest(ctx context.Context, st oci.Store, repo string, subject v1.Descriptor, predicateType string, statement []byte) (bool, error) {
	d := subject.Digest
	base, existing, err := ReadSigs(ctx, st, repo, oci.AttTag(d))
	if err != nil {
		return false, err
	}
	var envelope []byte
	for _, l := range existing {
		if env, err := LayerBytes(l.Layer); err == nil {
			if got, err := OpenEnvelope(s.sv, env); err == nil && bytes.Equal(got, statement) {
				envelope = env
			}
		}
	}
	added := false
	if envelope == nil {
		if envelope, err = s.Envelope(statement); err != nil {
			return false, fmt.Errorf("attesting %s: %w", st.Ref(repo, d.String()), err)
		}
		att, err := static.NewAttestation(envelope, static.WithLayerMediaType(DSSEMediaType),
			static.WithAnnotations(map[string]string{annPredicateType: predicateType}))
		if err != nil {
			return false, err
		}
		ann, _ := att.Annotations()
		img, err := mutate.Append(base, mutate.Addendum{Layer: att, Annotations: ann})
		if err != nil {
			return false, err
		}
		if err := st.WriteImage(ctx, repo, oci.AttTag(d), img); err != nil {
			return false, fmt.Errorf("writing the attestations of %s: %w", st.Ref(repo, d.String()), err)
		}
		added = true
	}
	ref, err := oci.NewArtifact(InTotoPayloadType, DSSEMediaType, envelope, &subject,
		map[string]string{annReferrerPredicate: predicateType})
	if err != nil {
		return false, err
	}
	rd, err := ref.Digest()
	if err != nil {
		return false, err
	}
	if _, err := st.Head(ctx, repo, rd.String()); err == nil {
		// Already pushed, by an earlier run that may have been cut before
		// listing it: ggcr would skip it, so list it here.
		rs, err := ref.Size()
		if err != nil {
			return false, err
		}
		if err := oci.EnsureReferrers(ctx, st, repo, d, []v1.Descriptor{{MediaType: types.OCIManifestSchema1, Size: rs, Digest: rd}}); err != nil {
			return false, fmt.Errorf("listing a referrer of %s: %w", st.Ref(repo, d.String()), err)
		}
	} else if err := st.WriteImage(ctx, repo, "", ref); err != nil {
		return false, fmt.Errorf("writing a referrer of %s: %w", st.Ref(repo, d.String()), err)
	}
	return added, nil
}

// Envelope signs statement as a DSSE envelope of an in-toto payload,
// without attaching it anywhere: what Attest attaches, and what a caller
// sealing a document of its own (an archive's manifest) stores.
func (s *Signer) Envelope(statement []byte) ([]byte, error) {
	return dsse.WrapSigner(s.sv, InTotoPayloadType).SignMessage(bytes.NewReader(statement))
}

// ReadSigs reads a cosign .sig or .att image (tag is SigTag or AttTag of
// the manifest) and its layers; a missing one is cosign's empty signature
// image. Verifiers read the signatures and attestations of a manifest
// with it.
func ReadSigs(ctx context.Context, st oci.Reader, repo, tag string) (v1.Image, []SigLayer, error) {
	img, err := st.Image(ctx, repo, tag)
	if errors.Is(err, oci.ErrNotFound) {
		return cosignempty.Signatures(), nil, nil
	}
	if err != nil {
		return nil, nil, err
	}
	m, err := img.Manifest()
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", st.Ref(repo, tag), err)
	}
	var out []SigLayer
	for _, d := range m.Layers {
		l, err := img.LayerByDigest(d.Digest)
		if err != nil {
			return nil, nil, fmt.Errorf("%s: %w", st.Ref(repo, tag), err)
		}
		out = append(out, SigLayer{Desc: d, Layer: l})
	}
	return img, out, nil
}

// SigLayer is one signature or attestation: its descriptor (with cosign's
// annotations) and its content.
type SigLayer struct {
	Desc  v1.Descriptor
	Layer v1.Layer
}

// maxSignatureLayer bounds what is read of a signature or attestation.
const maxSignatureLayer = 64 << 20

// LayerBytes reads a signature or attestation layer whole (at most 64
// MiB) and checks it against its digest: verifiers read DSSE envelopes
// with it, then open them with OpenEnvelope.
func LayerBytes(l v1.Layer) ([]byte, error) {
	rc, err := l.Compressed()
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	b, err := io.ReadAll(io.LimitReader(rc, maxSignatureLayer+1))
	if err != nil {
		return nil, err
	}
	if len(b) > maxSignatureLayer {
		return nil, fmt.Errorf("signature layer larger than %d bytes", maxSignatureLayer)
	}
	want, err := l.Digest()
	if err != nil {
		return nil, err
	}
	if got := sha256.Sum256(b); hex.EncodeToString(got[:]) != want.Hex {
		return nil, fmt.Errorf("layer %s: content does not match its digest", want)
	}
	return b, nil
}

// CheckSignatureLayer verifies one layer of a .sig image (from ReadSigs)
// against v and manifest d: a verifier counts the signatures each key
// verifies with it.
func CheckSignatureLayer(v signature.Verifier, l SigLayer, d v1.Hash) error {
	_, err := SignedPayload(v, l, d)
	return err
}

// Claims returns the signed claims of a payload (SignOptions.Claims):
// its optional section's string values.
func Claims(p *payload.SimpleContainerImage) map[string]string {
	out := map[string]string{}
	for k, v := range p.Optional {
		if s, ok := v.(string); ok {
			out[k] = s
		}
	}
	return out
}

// sameClaims says whether a payload claims exactly want.
func sameClaims(p *payload.SimpleContainerImage, want map[string]string) bool {
	got := Claims(p)
	if len(got) != len(want) || len(p.Optional) != len(got) {
		return false
	}
	for k, v := range want {
		if got[k] != v {
			return false
		}
	}
	return true
}

// SignedPayload verifies one layer of a .sig image against v and
// manifest d, and returns the payload that signature vouches for (its
// identity and claims).
func SignedPayload(v signature.Verifier, l SigLayer, d v1.Hash) (*payload.SimpleContainerImage, error) {
	p, err := LayerBytes(l.Layer)
	if err != nil {
		return nil, err
	}
	lh := l.Desc.Digest
	b64 := l.Desc.Annotations[annSignatureCosign]
	if b64 == "" {
		return nil, fmt.Errorf("signature %s has no %s annotation", lh, annSignatureCosign)
	}
	raw, err := base64.StdEncoding.DecodeString(b64)
	if err != nil {
		return nil, fmt.Errorf("signature %s: %w", lh, err)
	}
	if err := v.VerifySignature(bytes.NewReader(raw), bytes.NewReader(p)); err != nil {
		return nil, fmt.Errorf("signature %s does not verify with the key: %w", lh, err)
	}
	var sp payload.SimpleContainerImage
	if err := json.Unmarshal(p, &sp); err != nil {
		return nil, fmt.Errorf("signature %s: payload: %w", lh, err)
	}
	if sp.Critical.Image.DockerManifestDigest != d.String() {
		return nil, fmt.Errorf("signature %s is for %s, not %s", lh, sp.Critical.Image.DockerManifestDigest, d)
	}
	return &sp, nil
}

// OpenEnvelope verifies a DSSE envelope with v and returns its in-toto
// payload: what a verifier of an attestation trusts.
func OpenEnvelope(v signature.Verifier, env []byte) ([]byte, error) {
	var e struct {
		PayloadType string `json:"payloadType"`
		Payload     string `json:"payload"`
	}
	if err := json.Unmarshal(env, &e); err != nil {
		return nil, fmt.Errorf("not a DSSE envelope: %w", err)
	}
	if e.PayloadType != InTotoPayloadType {
		return nil, fmt.Errorf("DSSE payload type %q, want %s", e.PayloadType, InTotoPayloadType)
	}
	if err := dsse.WrapVerifier(v).VerifySignature(bytes.NewReader(env), nil); err != nil {
		return nil, fmt.Errorf("DSSE signature does not verify with the key: %w", err)
	}
	return base64.StdEncoding.DecodeString(e.Payload)
}

// EmptySignatures is cosign's image of no signatures (what a .sig or .att
// tag starts from).
func EmptySignatures() (v1.Image, error) { return cosignempty.Signatures(), nil }

// Verifier checks signatures with a public key (see LoadPublic).
type Verifier = signature.Verifier
