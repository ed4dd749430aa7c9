package oci

import (
	"context"
	"io"
	"log"
	"net/http/httptest"
	"net/url"
	"testing"

	ggcrregistry "github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// A referrer written under WithDeferredFallback is not listed in the
// fallback tag of a registry without the referrers API until
// EnsureReferrers lists it, its artifactType and annotations read from
// its manifest; listing it again changes nothing.
func TestEnsureReferrers(t *testing.T) {
	ctx := context.Background()
	srv := httptest.NewServer(ggcrregistry.New(ggcrregistry.WithReferrersSupport(false), ggcrregistry.Logger(log.New(io.Discard, "", 0))))
	t.Cleanup(srv.Close)
	u, _ := url.Parse(srv.URL)
	st, err := NewRemote(u.Host+"/test", RemoteOptions{})
	if err != nil {
		t.Fatal(err)
	}
	img, err := random.Image(64, 1)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.WriteImage(ctx, "app", "v1", img); err != nil {
		t.Fatal(err)
	}
	subject, err := st.Head(ctx, "app", "v1")
	if err != nil {
		t.Fatal(err)
	}
	ref, err := NewArtifact("application/vnd.example+json", "application/vnd.example+json", []byte(`{}`), subject, map[string]string{"k": "v"})
	if err != nil {
		t.Fatal(err)
	}
	if err := st.WriteImage(WithDeferredFallback(ctx), "app", "", ref); err != nil {
		t.Fatal(err)
	}
	if got, err := st.Referrers(ctx, "app", subject.Digest); err != nil || len(got) != 0 {
		t.Fatalf("referrers before EnsureReferrers: %v %v, want none", got, err)
	}
	rd, _ := ref.Digest()
	rs, _ := ref.Size()
	for range 2 {
		if err := EnsureReferrers(ctx, st, "app", subject.Digest, []v1.Descriptor{{MediaType: types.OCIManifestSchema1, Size: rs, Digest: rd}}); err != nil {
			t.Fatal(err)
		}
		got, err := st.Referrers(ctx, "app", subject.Digest)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != 1 || got[0].Digest != rd || got[0].ArtifactType != "application/vnd.example+json" || got[0].Annotations["k"] != "v" {
			t.Fatalf("referrers: %+v, want the artifact with its type and annotations", got)
		}
	}
	// A layout finds referrers by their subject: nothing to list.
	l, err := CreateLayout(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if err := EnsureReferrers(ctx, l, "app", subject.Digest, []v1.Descriptor{{Digest: rd}}); err != nil {
		t.Errorf("layout: %v", err)
	}
}
