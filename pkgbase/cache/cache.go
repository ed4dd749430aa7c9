// Package cache is the content-addressed download cache for packages. A
// file enters the cache only after its size and hash match what the signed
// index promised; until then it lives under a temporary name, so a reader
// of the cache never sees a partial or unverified package.
package cache

import (
	"context"
	"crypto/md5"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/crypto/blake2b"

	"github.com/nodeforge/builder/internal/atomicfile"
	"github.com/nodeforge/builder/internal/flock"
	"github.com/nodeforge/builder/internal/httptimeout"
	"github.com/nodeforge/builder/internal/retry"
	"github.com/nodeforge/builder/pkgbase/repo"
)

// Cache is a directory of verified files, addressed by digest.
type Cache struct {
	Dir string
	// Workers is the number of concurrent downloads (default 4).
	Workers int
	// Retries for an interrupted or failed download (default 4).
	Retries int
	// Backoff is the first wait between retries (default 500ms, doubling).
	Backoff time.Duration
	// HTTPClient for http(s) sources; nil uses a client that gives up on a
	// server silent for Timeout (default httptimeout.Default).
	HTTPClient *http.Client
	Timeout    time.Duration
	// Progress, when set, receives events (from several goroutines, serialised).
	Progress func(Event)

	mu sync.Mutex
}

// Event reports download progress.
type Event struct {
	Kind  string // "start", "progress", "done", "cached", "damaged", "retry", "failed"
	Name  string // package NEVRA or file name
	Bytes int64  // bytes so far (progress) or total (done)
	Total int64
	Err   error
}

// Want is one file to fetch: where it is and what it must hash to.
type Want struct {
	Name     string // for messages
	Source   repo.Source
	Location string // relative to the source
	Size     int64  // expected size; -1 if unknown (refused unless a hash is given)
	Algo     string // "sha256", "blake2b", "sha1", "md5"
	Hash     string // expected hex digest
}

// WantFor builds a Want for an index entry, choosing the strongest hash the
// index carries.
func WantFor(p *repo.Package, src repo.Source) (Want, error) {
	w := Want{Name: p.NEVRA(), Source: src, Location: p.Location, Size: p.FileSize}
	switch {
	case p.SHA256 != "":
		w.Algo, w.Hash = "sha256", p.SHA256
	case p.BLAKE2b != "":
		w.Algo, w.Hash = "blake2b", p.BLAKE2b
	case p.SHA1 != "":
		w.Algo, w.Hash = "sha1", p.SHA1
	case p.MD5 != "":
		w.Algo, w.Hash = "md5", p.MD5
	default:
		return w, fmt.Errorf("%s: the index carries no checksum for it", p.NEVRA())
	}
	if p.Location == "" {
		return w, fmt.Errorf("%s: the index gives no location", p.NEVRA())
	}
	return w, nil
}

// Path is where a verified file with this digest lives in the cache.
func (c *Cache) Path(algo, hexDigest string) string {
	return filepath.Join(c.Dir, algo, strings.ToLower(hexDigest))
}

func newHash(algo string) (hash.Hash, error) {
	switch algo {
	case "sha256":
		return sha256.New(), nil
	case "blake2b":
		return blake2b.New512(nil)
	case "sha1":
		return sha1.New(), nil
	case "md5":
		return md5.New(), nil
	}
	return nil, fmt.Errorf("unsupported digest algorithm %q", algo)
}

// Fetch makes every wanted file present and verified in the cache, with
// up to Workers downloads at once. It returns the cache paths in the order
// of wants. On failure every error is reported, and nothing unverified is
// left under a final name.
func (c *Cache) Fetch(ctx context.Context, wants []Want) ([]string, error) {
	workers := c.Workers
	if workers <= 0 {
		workers = 4
	}
	paths := make([]string, len(wants))
	errs := make([]error, len(wants))
	jobs := make(chan int)
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range jobs {
				paths[i], errs[i] = c.fetchOne(ctx, wants[i])
			}
		}()
	}
	for i := range wants {
		select {
		case jobs <- i:
		case <-ctx.Done():
		}
	}
	close(jobs)
	wg.Wait()
	var msgs, full []string
	var fullErr error
	for i, err := range errs {
		var fe *fullError
		switch {
		case errors.As(err, &fe):
			full = append(full, fe.name)
			fullErr = fe.err
		case err != nil:
			msgs = append(msgs, err.Error())
		case paths[i] == "":
			msgs = append(msgs, fmt.Sprintf("%s: not fetched: %v", wants[i].Name, ctx.Err()))
		}
	}
	sort.Strings(msgs)
	if len(full) > 0 {
		// One cause, one line: the disk, not each package.
		sort.Strings(full)
		names := strings.Join(full[:min(3, len(full))], ", ")
		if len(full) > 3 {
			names += ", ..."
		}
		msgs = append([]string{fmt.Sprintf("the cache %s is full: no room for %d packages (%s): %v; free space and run again, the downloads resume",
			c.Dir, len(full), names, fullErr)}, msgs...)
	}
	if len(msgs) > 0 {
		return nil, errors.New(strings.Join(msgs, "\n"))
	}
	return paths, nil
}

// fullError is a download stopped by a full disk.
type fullError struct {
	name string
	err  error
}

func (e *fullError) Error() string { return e.name + ": " + e.err.Error() }
func (e *fullError) Unwrap() error { return e.err }

func (c *Cache) emit(ev Event) {
	if c.Progress == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.Progress(ev)
}

func (c *Cache) fetchOne(ctx context.Context, w Want) (string, error) {
	if w.Hash == "" {
		return "", fmt.Errorf("%s: no expected digest: refusing to cache an unverifiable file", w.Name)
	}
	final := c.Path(w.Algo, w.Hash)
	if p, ok := c.hit(w, final); ok {
		return p, nil
	}
	if err := os.MkdirAll(filepath.Join(c.Dir, "partial"), 0o755); err != nil {
		return "", err
	}
	if err := os.MkdirAll(filepath.Dir(final), 0o755); err != nil {
		return "", err
	}
	// One process at a time downloads a file: the others wait on the
	// partial file's lock and then find the verified file in place.
	partial := filepath.Join(c.Dir, "partial", w.Algo+"-"+strings.ToLower(w.Hash))
	l, err := lockPartial(ctx, partial)
	if err != nil {
		return "", fmt.Errorf("%s: %w", w.Name, err)
	}
	defer l.Release()
	if p, ok := c.hit(w, final); ok {
		// Another process finished it while this one waited; an empty
		// partial file this one made is removed.
		if mine, err := l.Stat(); err == nil {
			if fi, err := os.Stat(partial); err == nil && fi.Size() == 0 && os.SameFile(fi, mine) {
				os.Remove(partial)
			}
		}
		return p, nil
	}
	retries := c.Retries
	if retries <= 0 {
		retries = 4
	}
	backoff := c.Backoff
	if backoff <= 0 {
		backoff = 500 * time.Millisecond
	}
	c.emit(Event{Kind: "start", Name: w.Name, Total: w.Size})
	p := retry.Policy{Retries: retries, Wait: backoff, MaxWait: 30 * time.Second}
	_, lastErr := p.Do(ctx, func() (time.Duration, error) { return 0, c.download(ctx, w, partial) }, func(err error) bool {
		var perm *permanentError
		return !errors.As(err, &perm) && ctx.Err() == nil && !diskFull(err)
	}, func(err error) { c.emit(Event{Kind: "retry", Name: w.Name, Err: err}) })
	var stopped *retry.Stopped
	if errors.As(lastErr, &stopped) {
		return "", ctx.Err()
	}
	if lastErr != nil && !fileComplete(partial, w.Size) {
		// Keep a partial download for a later resume, unless it can never
		// become the promised file.
		var perm *permanentError
		if errors.As(lastErr, &perm) {
			os.Remove(partial)
		}
		c.emit(Event{Kind: "failed", Name: w.Name, Err: lastErr})
		if diskFull(lastErr) {
			return "", &fullError{name: w.Name, err: lastErr}
		}
		return "", fmt.Errorf("%s: %w", w.Name, lastErr)
	}
	if err := verifyFile(partial, w); err != nil {
		os.Remove(partial) // a mismatching file must not be resumed either
		c.emit(Event{Kind: "failed", Name: w.Name, Err: err})
		return "", err
	}
	if err := os.Rename(partial, final); err != nil {
		return "", err
	}
	if err := atomicfile.SyncDir(filepath.Dir(final)); err != nil {
		return "", err
	}
	c.emit(Event{Kind: "done", Name: w.Name, Bytes: w.Size, Total: w.Size})
	return final, nil
}

// lockPartial takes the lock on a partial download, making the file when
// missing (another process may rename it into place at any moment: then
// the lock is taken on a new one).
func lockPartial(ctx context.Context, partial string) (*flock.Lock, error) {
	for {
		f, err := os.OpenFile(partial, os.O_CREATE|os.O_WRONLY, 0o644)
		if err != nil {
			return nil, err
		}
		f.Close()
		l, err := flock.Acquire(ctx, partial, true, nil)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		return l, err
	}
}

// hit reports whether the verified file is in the cache. Its content is
// hashed again: a file changed since it entered (a flipped byte, a
// replaced signature) must never be used, so it is removed (the caller
// fetches it again) and a "damaged" event names it.
func (c *Cache) hit(w Want, final string) (string, bool) {
	st, err := os.Stat(final)
	if err != nil {
		return "", false
	}
	if err := verifyFile(final, w); err != nil {
		os.Remove(final)
		c.emit(Event{Kind: "damaged", Name: w.Name, Err: fmt.Errorf("cached file %s changed since it was verified (%v): removed, fetching it again", final, err)})
		return "", false
	}
	c.emit(Event{Kind: "cached", Name: w.Name, Bytes: st.Size(), Total: st.Size()})
	return final, true
}

// diskFull reports a write that failed for want of space; retrying at
// once cannot help.
func diskFull(err error) bool {
	return errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT)
}

func fileComplete(path string, size int64) bool {
	st, err := os.Stat(path)
	return err == nil && size >= 0 && st.Size() == size
}

// permanentError stops retries (404, a file larger than promised).
type permanentError struct{ err error }

func (e *permanentError) Error() string { return e.err.Error() }
func (e *permanentError) Unwrap() error { return e.err }

// download appends to partial, resuming where a previous attempt stopped.
func (c *Cache) download(ctx context.Context, w Want, partial string) error {
	f, err := os.OpenFile(partial, os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return &permanentError{err}
	}
	defer f.Close()
	have, err := f.Seek(0, io.SeekEnd)
	if err != nil {
		return err
	}
	if w.Size >= 0 && have > w.Size {
		// Longer than promised: start over.
		if err := f.Truncate(0); err != nil {
			return err
		}
		have, _ = f.Seek(0, io.SeekStart)
	}
	if w.Size >= 0 && have == w.Size {
		return nil
	}
	body, offset, err := c.open(ctx, w, have)
	if err != nil {
		return err
	}
	defer body.Close()
	if offset != have {
		if err := f.Truncate(offset); err != nil {
			return err
		}
		if _, err := f.Seek(offset, io.SeekStart); err != nil {
			return err
		}
	}
	limit := int64(-1)
	if w.Size >= 0 {
		limit = w.Size - offset
	}
	var r io.Reader = body
	if limit >= 0 {
		r = io.LimitReader(body, limit+1)
	}
	pw := &progressWriter{c: c, name: w.Name, n: offset, total: w.Size}
	n, err := io.Copy(io.MultiWriter(f, pw), r)
	if err != nil {
		return fmt.Errorf("download interrupted after %d bytes: %w", offset+n, err)
	}
	if limit >= 0 && n > limit {
		f.Truncate(0)
		return &permanentError{fmt.Errorf("size differs from the index: more than %d bytes", w.Size)}
	}
	if limit >= 0 && n < limit {
		return fmt.Errorf("download ended early: %d of %d bytes", offset+n, w.Size)
	}
	return f.Sync()
}

type progressWriter struct {
	c     *Cache
	name  string
	n     int64
	total int64
	last  time.Time
}

func (p *progressWriter) Write(b []byte) (int, error) {
	p.n += int64(len(b))
	if now := time.Now(); now.Sub(p.last) > 200*time.Millisecond {
		p.last = now
		p.c.emit(Event{Kind: "progress", Name: p.name, Bytes: p.n, Total: p.total})
	}
	return len(b), nil
}

// open starts reading w at offset. For http(s) sources it asks for a
// Range; it returns the offset the body actually starts at (0 when the
// server ignores ranges).
func (c *Cache) open(ctx context.Context, w Want, offset int64) (io.ReadCloser, int64, error) {
	base := w.Source.URL()
	if (strings.HasPrefix(base, "http://") || strings.HasPrefix(base, "https://")) && offset > 0 {
		u := strings.TrimRight(base, "/") + "/" + w.Location
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
		if err != nil {
			return nil, 0, &permanentError{err}
		}
		req.Header.Set("Range", fmt.Sprintf("bytes=%d-", offset))
		client := c.HTTPClient
		if client == nil {
			client = httptimeout.Client(c.Timeout)
		}
		resp, err := client.Do(req)
		if err != nil {
			return nil, 0, fmt.Errorf("GET %s: %w", u, err)
		}
		switch resp.StatusCode {
		case http.StatusPartialContent:
			return resp.Body, offset, nil
		case http.StatusOK:
			return resp.Body, 0, nil
		case http.StatusRequestedRangeNotSatisfiable:
			resp.Body.Close()
			return io.NopCloser(strings.NewReader("")), offset, nil
		case http.StatusNotFound, http.StatusGone, http.StatusForbidden:
			resp.Body.Close()
			return nil, 0, &permanentError{fmt.Errorf("GET %s: %s", u, resp.Status)}
		default:
			resp.Body.Close()
			return nil, 0, fmt.Errorf("GET %s: %s", u, resp.Status)
		}
	}
	rc, err := w.Source.Open(ctx, w.Location)
	if err != nil {
		if errors.Is(err, repo.ErrNotFound) {
			return nil, 0, &permanentError{err}
		}
		return nil, 0, err
	}
	return rc, 0, nil
}

// verifyFile checks size and digest of a downloaded file.
func verifyFile(path string, w Want) error {
	h, err := newHash(w.Algo)
	if err != nil {
		return fmt.Errorf("%s: %w", w.Name, err)
	}
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	n, err := io.Copy(h, f)
	if err != nil {
		return err
	}
	if w.Size >= 0 && n != w.Size {
		return fmt.Errorf("%s: size differs from the index: %d bytes, index says %d", w.Name, n, w.Size)
	}
	if got := hex.EncodeToString(h.Sum(nil)); !strings.EqualFold(got, w.Hash) {
		return fmt.Errorf("%s: %s differs from the index: got %s, index says %s", w.Name, w.Algo, got, w.Hash)
	}
	return nil
}

// SHA256File returns the hex sha256 of a file.
func SHA256File(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}
