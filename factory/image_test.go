package factory

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/v1/random"

	"github.com/nodeforge/builder/internal/ocilayout"
)

// TestReplaceableLayout: builder image --release replaces an earlier
// installer layout, never a directory with a user's files in it.
func TestReplaceableLayout(t *testing.T) {
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "installer")
	if err := replaceableLayout(ctx, dir); err != nil {
		t.Errorf("missing: %v", err)
	}
	idx, err := random.Index(16, 1, 1)
	if err != nil {
		t.Fatal(err)
	}
	if err := ocilayout.WriteRoot(ctx, dir, idx); err != nil {
		t.Fatal(err)
	}
	if err := replaceableLayout(ctx, dir); err != nil {
		t.Errorf("an earlier installer: %v", err)
	}
	os.MkdirAll(filepath.Join(dir, "mine"), 0o755)
	if err := replaceableLayout(ctx, dir); err == nil || !strings.Contains(err.Error(), `"mine/"`) {
		t.Errorf("with a user's directory: %v, want a refusal naming it", err)
	}
}
