package factory

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"

	"github.com/nodeforge/builder/builder/compressors"
)

// TestCacheKeyNamesCompressors: factories whose compressors differ (one
// built without cgo) never share a cache entry under one key, whatever
// builder version they give; the one that is not the reference says so
// when it starts.
func TestCacheKeyNamesCompressors(t *testing.T) {
	rel := &VerifiedRelease{Version: "1.0", Digests: map[string]string{"boot": "sha256:00"}}
	ref := cacheKey(rel, "id", "metal-amd64.iso", "test")
	list := compressors.This()
	list[0].Module = "github.com/klauspost/compress"
	old := composeWith
	composeWith = compressors.Key(list)
	t.Cleanup(func() { composeWith = old })
	if other := cacheKey(rel, "id", "metal-amd64.iso", "test"); other == ref {
		t.Error("another squashfs zstd gives the same cache key")
	}
	var logs bytes.Buffer
	log := slog.New(slog.NewTextHandler(&logs, nil))
	logCompressors(log, compressors.This())
	if !strings.Contains(logs.String(), "composing with") || strings.Contains(logs.String(), "WARN") {
		t.Errorf("the reference factory's start: %s", logs.String())
	}
	logs.Reset()
	logCompressors(log, list)
	if !strings.Contains(logs.String(), "level=WARN") || !strings.Contains(logs.String(), "squashfs zstd=github.com/klauspost/compress@") {
		t.Errorf("the start of a factory built without cgo: %s", logs.String())
	}
}
