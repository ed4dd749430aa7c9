package oci

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"sync"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/partial"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/remote/transport"
	"golang.org/x/sync/errgroup"

	"github.com/nodeforge/builder/internal/retry"
)

// Writing to a registry. ggcr's writer sends four requests for every blob
// (HEAD, POST, PATCH, PUT); this one sends at most two: a POST that
// mounts the blob from the repository itself (a registry that has it
// answers 201 at once; one that cannot mount answers 202, as the
// distribution spec asks) and, for a blob not there, one PUT with the
// content. Registries spend most of their time per request, and a distant
// one costs a round trip per request, so this halves the cost of copying
// the many small blobs of signatures and attestations. Manifests still go
// through ggcr (remote.Put), which also keeps the referrers fallback tag.

// pushJobs is how many blobs of one manifest (or children of one index)
// are written at once.
const pushJobs = 4

// pushImage writes img's blobs and then its manifest to repo as ref,
// unless ref already names the same manifest there.
func (r *Remote) pushImage(ctx context.Context, repo string, ref name.Reference, img v1.Image) error {
	d, err := img.Digest()
	if err != nil {
		return err
	}
	if r.hasManifest(ctx, ref, d) {
		return nil
	}
	m, err := img.Manifest()
	if err != nil {
		return err
	}
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(pushJobs)
	blobs := append([]v1.Descriptor{m.Config}, m.Layers...)
	for _, b := range blobs {
		if !b.MediaType.IsDistributable() {
			continue // foreign layers stay where they are, as with docker and ggcr
		}
		g.Go(func() error {
			return r.pushBlob(gctx, repo, b, func() (io.ReadCloser, error) {
				if b.Digest == m.Config.Digest {
					l, err := partial.ConfigLayer(img)
					if err != nil {
						return nil, err
					}
					return l.Compressed()
				}
				l, err := img.LayerByDigest(b.Digest)
				if err != nil {
					return nil, err
				}
				return l.Compressed()
			})
		})
	}
	if err := g.Wait(); err != nil {
		return err
	}
	return remote.Put(ref, img, r.ctxOpts(ctx)...)
}

// pushIndex writes idx's children (by digest) and then idx to repo as
// ref, unless ref already names the same index there.
func (r *Remote) pushIndex(ctx context.Context, repo string, ref name.Reference, idx v1.ImageIndex) error {
	d, err := idx.Digest()
	if err != nil {
		return err
	}
	if r.hasManifest(ctx, ref, d) {
		return nil
	}
	m, err := idx.IndexManifest()
	if err != nil {
		return err
	}
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(pushJobs)
	for _, c := range m.Manifests {
		g.Go(func() error {
			cref, err := r.reference(repo, c.Digest.String())
			if err != nil {
				return err
			}
			switch {
			case c.MediaType.IsIndex():
				child, err := idx.ImageIndex(c.Digest)
				if err != nil {
					return err
				}
				return r.pushIndex(gctx, repo, cref, child)
			case c.MediaType.IsImage():
				child, err := idx.Image(c.Digest)
				if err != nil {
					return err
				}
				return r.pushImage(gctx, repo, cref, child)
			}
			return fmt.Errorf("index %s: child %s has media type %s, neither an image nor an index", d, c.Digest, c.MediaType)
		})
	}
	if err := g.Wait(); err != nil {
		return err
	}
	return remote.Put(ref, idx, r.ctxOpts(ctx)...)
}

// hasManifest reports whether ref names manifest d at the registry. Any
// error means no: the write that follows reports what is wrong.
func (r *Remote) hasManifest(ctx context.Context, ref name.Reference, d v1.Hash) bool {
	got, err := remote.Head(ref, r.ctxOpts(ctx)...)
	return err == nil && got.Digest == d
}

// pushBlob makes sure repo holds blob b, reading it with open only when
// it must be sent. A blob is asked about once per process: writers of
// the same blob (an empty config shared by referrers, say) wait for the
// first.
func (r *Remote) pushBlob(ctx context.Context, repo string, b v1.Descriptor, open func() (io.ReadCloser, error)) error {
	v, _ := r.pushed.LoadOrStore(repo+"@"+b.Digest.String(), &blobPush{})
	bp := v.(*blobPush)
	bp.mu.Lock()
	defer bp.mu.Unlock()
	if bp.done {
		return nil
	}
	rt, nr, err := r.repoTransport(ctx, repo)
	if err != nil {
		return err
	}
	client := &http.Client{Transport: rt}
	p := retry.Policy{Retries: r.retries - 1, Wait: r.retryDelay}
	_, err = p.Do(ctx, func() (time.Duration, error) { return 0, r.uploadBlob(ctx, client, nr, b, open) },
		func(err error) bool { return retryable(err) && ctx.Err() == nil }, nil)
	var stopped *retry.Stopped
	if errors.As(err, &stopped) {
		return ctx.Err()
	}
	if err != nil {
		return fmt.Errorf("blob %s: %w", b.Digest, err)
	}
	bp.done = true
	return nil
}

// blobPush is one blob of one repository: whether it is there.
type blobPush struct {
	mu   sync.Mutex
	done bool
}

// uploadBlob is one attempt: POST with mount, then PUT when needed.
func (r *Remote) uploadBlob(ctx context.Context, client *http.Client, nr name.Repository, b v1.Descriptor, open func() (io.ReadCloser, error)) error {
	start := url.URL{Scheme: nr.Scheme(), Host: nr.RegistryStr(), Path: "/v2/" + nr.RepositoryStr() + "/blobs/uploads/"}
	mount := url.Values{"mount": {b.Digest.String()}, "from": {nr.RepositoryStr()}}
	start.RawQuery = mount.Encode()
	resp, err := post(ctx, client, start.String())
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusCreated && resp.StatusCode != http.StatusAccepted {
		// Some registries refuse a mount instead of starting an upload:
		// ask again without one, as ggcr does.
		resp.Body.Close()
		start.RawQuery = ""
		if resp, err = post(ctx, client, start.String()); err != nil {
			return err
		}
	}
	defer resp.Body.Close()
	if err := transport.CheckError(resp, http.StatusCreated, http.StatusAccepted); err != nil {
		return err
	}
	if resp.StatusCode == http.StatusCreated {
		return nil // it was there
	}
	loc, err := resp.Location()
	if err != nil {
		return fmt.Errorf("upload of %s started without a location: %w", b.Digest, err)
	}
	q := loc.Query()
	q.Set("digest", b.Digest.String())
	loc.RawQuery = q.Encode()
	body, err := open()
	if err != nil {
		return err
	}
	defer body.Close()
	req, err := http.NewRequestWithContext(ctx, http.MethodPut, loc.String(), body)
	if err != nil {
		return err
	}
	req.ContentLength = b.Size
	req.Header.Set("Content-Type", "application/octet-stream")
	put, err := client.Do(req)
	if err != nil {
		return err
	}
	defer put.Body.Close()
	return transport.CheckError(put, http.StatusCreated)
}

func post(ctx context.Context, client *http.Client, u string) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u, http.NoBody)
	if err != nil {
		return nil, err
	}
	return client.Do(req)
}

// repoTransport returns the authenticated transport for pushing to repo,
// made once per repository: the registry is pinged and a token fetched
// once, not per blob.
func (r *Remote) repoTransport(ctx context.Context, repo string) (http.RoundTripper, name.Repository, error) {
	nr, err := name.NewRepository(r.repoName(repo), r.nameOpts...)
	if err != nil {
		return nil, nr, err
	}
	v, _ := r.transports.LoadOrStore(nr.String(), &repoTransport{})
	rt := v.(*repoTransport)
	rt.mu.Lock()
	defer rt.mu.Unlock()
	if rt.t != nil {
		return rt.t, nr, nil
	}
	auth, err := authn.Resolve(ctx, r.keychain, nr.Registry)
	if err != nil {
		return nil, nr, fmt.Errorf("credentials for %s: %w", r.Host, err)
	}
	// A failure is not kept: the next blob tries again.
	rt.t, err = transport.NewWithContext(ctx, nr.Registry, auth, transport.NewUserAgent(r.transport, userAgent), []string{nr.Scope(transport.PushScope)})
	return rt.t, nr, err
}

// repoTransport is the transport of one repository, made by the first
// writer that needs it while the others wait.
type repoTransport struct {
	mu sync.Mutex
	t  http.RoundTripper
}
