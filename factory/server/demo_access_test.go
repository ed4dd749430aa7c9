package server

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nodeforge/builder/factory"
	"github.com/nodeforge/builder/internal/testutil"
	"github.com/nodeforge/builder/oci"
	"github.com/nodeforge/builder/pipeline/pipelinetest"
)

// TestFactoryHangUp: a client that disconnects mid-build does not cancel
// the build: it ends, is cached, and the next request gets it from the
// cache.
func TestFactoryHangUp(t *testing.T) {
	rel := pipelinetest.Demo(t)
	cache, err := oci.CreateLayout(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	work := t.TempDir()
	srv, err := New(context.Background(), Options{Service: factory.Options{Releases: []factory.ReleaseStore{{Store: rel.Store(t), Keys: rel.Keys}},
		Cache: cache, Signer: rel.Signer, BuilderVersion: "test", Work: work}})
	if err != nil {
		t.Fatal(err)
	}
	testutil.WaitBuildsAtEnd(t, srv.WaitBuilds)
	hs := httptest.NewServer(srv.Handler())
	defer hs.Close()
	resp, err := http.Post(hs.URL+"/schematics", "application/yaml", strings.NewReader("{}"))
	if err != nil || resp.StatusCode != 201 {
		t.Fatalf("POST /schematics: %v %v", err, resp)
	}
	resp.Body.Close()
	iso := hs.URL + "/image/376567988ad370138ad8b2698212367b8edcb69b5fd68c80be1f2ec7d603b4ba/1.11.0-demo/metal-amd64.iso"
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, "GET", iso, nil)
	answered := make(chan error, 1)
	go func() {
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			resp.Body.Close()
		}
		answered <- err
	}()
	// The build runs once its scratch directory is there (beside the
	// directory of the kept layers).
	for {
		if m, _ := filepath.Glob(filepath.Join(work, "compose-*")); len(m) > 0 {
			break
		}
		select {
		case err := <-answered:
			t.Fatalf("the request was answered (%v) before its build was seen", err)
		default:
			time.Sleep(time.Millisecond)
		}
	}
	cancel()
	if err := <-answered; err == nil {
		t.Fatal("the request was answered, not cut")
	}
	for start := time.Now(); srv.Stats().Builds == 0; time.Sleep(10 * time.Millisecond) {
		if time.Since(start) > 10*time.Minute {
			t.Fatal("the build did not end")
		}
	}
	resp, err = http.Get(iso)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || len(b) == 0 {
		t.Errorf("after the hang-up: %d, %d bytes", resp.StatusCode, len(b))
	}
	if st := srv.Stats(); st.Builds != 1 {
		t.Errorf("stats %+v: the hang-up cancelled the build", st)
	}
}

// TestFactoryRegistryAccess: the registry front behind a login (build and
// pull) over TLS with a certificate of a CA the tools are told to trust:
// crane and skopeo pull with the credentials of a docker config.json,
// and not without them; cosign verifies the factory's signature.
// (builder factory serve's own TLS and login flags: cmd/builder's
// TestFactoryAccess.)
func TestFactoryRegistryAccess(t *testing.T) {
	for _, tool := range []string{"crane", "skopeo", "cosign"} {
		testutil.NeedTool(t, tool)
	}
	rel := pipelinetest.Demo(t)
	cache, err := oci.CreateLayout(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	srv, err := New(context.Background(), Options{Service: factory.Options{Releases: []factory.ReleaseStore{{Store: rel.Store(t), Keys: rel.Keys}},
		Cache: cache, Signer: rel.Signer, BuilderVersion: "test", Work: t.TempDir()},
		Access: Access{Login: []string{"build", "pull"}, Credentials: testCredentials(t)}})
	if err != nil {
		t.Fatal(err)
	}
	testutil.WaitBuildsAtEnd(t, srv.WaitBuilds)
	hs := httptest.NewUnstartedServer(testutil.NoLocalPaths(t, srv.Handler(), rel.Dir))
	hs.StartTLS()
	t.Cleanup(hs.Close)
	dir := t.TempDir()
	caFile := filepath.Join(dir, "ca.pem")
	os.WriteFile(caFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: hs.Certificate().Raw}), 0o644)
	host := strings.TrimPrefix(hs.URL, "https://")
	req, _ := http.NewRequest("POST", hs.URL+"/schematics", strings.NewReader("{}"))
	req.SetBasicAuth("alice", alicePassword)
	resp, err := hs.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	var created struct{ ID string }
	if json.Unmarshal(body, &created); resp.StatusCode != 201 {
		t.Fatalf("POST /schematics: %d %q", resp.StatusCode, body)
	}
	ref := host + "/installer/" + created.ID + ":1.11.0-demo"

	// A docker config.json with the login; skopeo's --cert-dir wants the
	// CA as *.crt.
	docker, anonymous, certs := filepath.Join(dir, "docker"), filepath.Join(dir, "anonymous"), filepath.Join(dir, "certs")
	for _, d := range []string{docker, anonymous, certs} {
		os.MkdirAll(d, 0o700)
	}
	auth := base64.StdEncoding.EncodeToString([]byte("alice:" + alicePassword))
	os.WriteFile(filepath.Join(docker, "config.json"), []byte(fmt.Sprintf(`{"auths":{%q:{"auth":%q}}}`, host, auth)), 0o600)
	os.WriteFile(filepath.Join(anonymous, "config.json"), []byte(`{"auths":{}}`), 0o600)
	ca, _ := os.ReadFile(caFile)
	os.WriteFile(filepath.Join(certs, "ca.crt"), ca, 0o644)
	env := []string{"SSL_CERT_FILE=" + caFile, "DOCKER_CONFIG=" + docker}

	if out, err := tool(env, "crane", "manifest", ref); err != nil || !strings.Contains(out, `"manifests"`) {
		t.Errorf("crane manifest with config.json: %v\n%s", err, out)
	}
	if out, err := tool([]string{"SSL_CERT_FILE=" + caFile, "DOCKER_CONFIG=" + anonymous}, "crane", "manifest", ref); err == nil || !strings.Contains(out, "UNAUTHORIZED") {
		t.Errorf("crane manifest without a login: %v\n%s", err, out)
	}
	if out, err := tool(env, "crane", "pull", "--format", "oci", ref, t.TempDir()); err != nil {
		t.Errorf("crane pull with config.json: %v\n%s", err, out)
	}
	if out, err := tool(env, "skopeo", "inspect", "--raw", "--cert-dir", certs, "--authfile", filepath.Join(docker, "config.json"), "docker://"+ref); err != nil || !strings.Contains(out, `"manifests"`) {
		t.Errorf("skopeo inspect with --authfile: %v\n%s", err, out)
	}
	if out, err := tool(env, "skopeo", "copy", "--all", "--src-cert-dir", certs, "--src-authfile", filepath.Join(docker, "config.json"), "docker://"+ref, "oci:"+filepath.Join(t.TempDir(), "copy")+":v"); err != nil {
		t.Errorf("skopeo copy with --src-authfile: %v\n%s", err, out)
	}
	if out, err := tool(env, "cosign", "verify", "--key", rel.PubFile, "--insecure-ignore-tlog=true", ref); err != nil {
		t.Errorf("cosign verify over TLS with config.json: %v\n%s", err, out)
	}
}

// tool runs an outside tool with env added to the test's.
func tool(env []string, name string, args ...string) (string, error) {
	cmd := exec.Command(name, args...)
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	return string(out), err
}
