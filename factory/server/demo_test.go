package server

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nodeforge/builder/factory"
	"github.com/nodeforge/builder/internal/testutil"
	"github.com/nodeforge/builder/oci"
	"github.com/nodeforge/builder/pipeline/pipelinetest"
)

// TestMain removes the demo release the tests shared (pipelinetest.Demo)
// and gives the outside tools (crane, skopeo, cosign) a HOME of their own:
// no ~/.docker/config.json of the machine.
func TestMain(m *testing.M) {
	home, err := testutil.NewHome()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := m.Run()
	pipelinetest.Cleanup()
	os.RemoveAll(home)
	os.Exit(code)
}

// demoFactory is a factory serving the demo release (pipelinetest.Demo,
// made once for the process by the pipeline, verified here with its key)
// from its layout, with a cache layout of its own, signing with the
// release's key. No response may show a local path.
type demoFactory struct {
	rel      *pipelinetest.Release
	cacheDir string
	srv      *Server
	hs       *httptest.Server
	host     string // 127.0.0.1:PORT
}

func newDemoFactory(t *testing.T) *demoFactory {
	t.Helper()
	f := &demoFactory{rel: pipelinetest.Demo(t), cacheDir: filepath.Join(t.TempDir(), "factory-cache")}
	if _, err := oci.CreateLayout(f.cacheDir); err != nil {
		t.Fatal(err)
	}
	f.srv, f.hs = f.serve(t)
	f.host = strings.TrimPrefix(f.hs.URL, "http://")
	return f
}

// serve is a factory on the fixture's stores (its options as set, then
// changed by each of with), served on a test server of its own.
func (f *demoFactory) serve(t *testing.T, with ...func(*Options)) (*Server, *httptest.Server) {
	t.Helper()
	cache, err := oci.OpenLayout(f.cacheDir)
	if err != nil {
		t.Fatal(err)
	}
	o := Options{Service: factory.Options{Releases: []factory.ReleaseStore{{Store: f.rel.Store(t), Keys: f.rel.Keys}},
		Cache: cache, Signer: f.rel.Signer, BuilderVersion: "test", Work: t.TempDir()}}
	for _, w := range with {
		w(&o)
	}
	srv, err := New(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	testutil.WaitBuildsAtEnd(t, srv.WaitBuilds)
	hs := httptest.NewServer(testutil.NoLocalPaths(t, srv.Handler(), f.rel.Dir, f.cacheDir))
	t.Cleanup(hs.Close)
	return srv, hs
}

// replica is another factory on the fixture's stores (what a restart, or
// a second replica, reads), served on its own test server.
func (f *demoFactory) replica(t *testing.T) (*Server, string) {
	t.Helper()
	srv, hs := f.serve(t)
	return srv, hs.URL
}

// postSchematic creates a schematic and returns its ID.
func (f *demoFactory) postSchematic(t *testing.T, yaml string) string {
	t.Helper()
	resp, err := http.Post(f.hs.URL+"/schematics", "application/yaml", strings.NewReader(yaml))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var created struct{ ID string }
	if err := json.NewDecoder(resp.Body).Decode(&created); err != nil || resp.StatusCode != 201 {
		t.Fatalf("POST /schematics: %d %v", resp.StatusCode, err)
	}
	return created.ID
}

// judge runs an outside tool and fails the test when it fails.
func judge(t *testing.T, name string, args ...string) string {
	t.Helper()
	out, err := exec.Command(testutil.NeedTool(t, name), args...).CombinedOutput()
	if err != nil {
		t.Errorf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return string(out)
}
