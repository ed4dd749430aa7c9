package oci

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/remote/transport"

	ocilayout "github.com/nodeforge/builder/internal/ocilayout"
)

// Deleter is a store that removes what it holds. Only a factory's cache
// collection needs it (releases are never deleted), so Store does not
// carry it.
type Deleter interface {
	// Delete removes repo:tag (the tag only: the manifest stays for
	// what else names it) or repo@digest (the manifest, and with it every
	// tag naming it). What is not there is a wrapped ErrNotFound, so a
	// caller cut short can run again.
	Delete(ctx context.Context, repo, ref string) error
}

// Pruner is a store that frees the blobs nothing names any more, as a
// local layout must itself (a registry does it in its own garbage
// collection).
type Pruner interface {
	// Prune removes the blobs no manifest names that are older than
	// grace, so that a write in progress keeps its blobs.
	Prune(ctx context.Context, grace time.Duration) (Pruned, error)
}

// ErrTagDeleteUnsupported is returned (wrapped) when a registry deletes
// manifests only by digest, as CNCF distribution 2.x does (400
// DIGEST_INVALID for a tag), or not at all: deleting the manifest by
// digest removes its tags there, or says deletes are refused.
var ErrTagDeleteUnsupported = errors.New("the registry does not delete tags, only manifests by digest")

// Delete implements Deleter through the registry's delete API (DELETE
// /v2/NAME/manifests/REF). The registry frees the blobs in its own
// garbage collection (distribution: registry garbage-collect).
func (r *Remote) Delete(ctx context.Context, repo, ref string) error {
	nr, err := r.reference(repo, ref)
	if err != nil {
		return err
	}
	err = remote.Delete(nr, r.ctxOpts(ctx)...)
	if err == nil {
		return nil
	}
	var te *transport.Error
	if isNotFound(err) || !errors.As(err, &te) {
		return r.explain(nr.String(), err)
	}
	refused := te.StatusCode == http.StatusMethodNotAllowed || hasCode(te, transport.UnsupportedErrorCode)
	if !digestRef(ref) && (refused || hasCode(te, transport.DigestInvalidErrorCode)) {
		return fmt.Errorf("%s: %w (%v)", nr, ErrTagDeleteUnsupported, err)
	}
	if refused {
		return fmt.Errorf("%s: registry %s refuses deletes (%d %s): enable them in its configuration (CNCF distribution: storage: delete: enabled: true)", nr, r.Host, te.StatusCode, http.StatusText(te.StatusCode))
	}
	return r.explain(nr.String(), err)
}

func hasCode(te *transport.Error, code transport.ErrorCode) bool {
	for _, d := range te.Errors {
		if d.Code == code {
			return true
		}
	}
	return false
}

// Delete implements Deleter: repo:tag, or every entry of repo@digest
// (tagged or not), leaves index.json in one atomic update under the
// layout's lock. Blobs stay until Prune, which frees those nothing leads
// to any more (a registry's garbage collection, for a layout).
func (l *Layout) Delete(ctx context.Context, repo, ref string) error {
	match := func(x v1.Descriptor) bool {
		return x.Annotations[annRepository] == repo && x.Annotations[annRefName] == repo+":"+ref
	}
	if digestRef(ref) {
		match = func(x v1.Descriptor) bool { return x.Annotations[annRepository] == repo && x.Digest.String() == ref }
	}
	n, err := l.d.Remove(ctx, match)
	if err != nil {
		return fmt.Errorf("%s: %w", l.Ref(repo, ref), err)
	}
	if n == 0 {
		return notFound(l.Ref(repo, ref))
	}
	return nil
}

// Pruned says what Prune freed.
type Pruned = ocilayout.Pruned

// Prune removes the blobs of the layout that no entry leads to and that
// are older than grace: a grace longer than any write spares the blobs a
// writer in another process stored and has not named yet.
func (l *Layout) Prune(ctx context.Context, grace time.Duration) (Pruned, error) {
	p, err := l.d.Prune(ctx, time.Now().Add(-grace))
	if err != nil {
		return p, fmt.Errorf("pruning %s: %w", l, err)
	}
	return p, nil
}
