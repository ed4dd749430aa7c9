package deploy

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"go.yaml.in/yaml/v3"

	"github.com/nodeforge/builder/internal/testutil"
)

// renderAll is helm template's manifests of the chart, in order, with
// helm's flags (--set, --set-string: a store naming the bundled registry is
// a template, a string).
func renderAll(t *testing.T, helm string, flags ...string) []map[string]any {
	t.Helper()
	args := append([]string{"template", "factory", chart}, flags...)
	dec := yaml.NewDecoder(strings.NewReader(run(t, "", helm, args...)))
	var docs []map[string]any
	for {
		var d map[string]any
		if err := dec.Decode(&d); errors.Is(err, io.EOF) {
			return docs
		} else if err != nil {
			t.Fatalf("helm template's output: %v", err)
		}
		if d != nil {
			docs = append(docs, d)
		}
	}
}

// named is the manifest of that kind and name.
func named(docs []map[string]any, kind, name string) map[string]any {
	for _, d := range docs {
		if d["kind"] == kind && at(d, "metadata", "name") == name {
			return d
		}
	}
	return nil
}

// selects says whether a selector's labels all hold on labels.
func selects(selector, labels any) bool {
	s, _ := selector.(map[string]any)
	l, _ := labels.(map[string]any)
	for k, v := range s {
		if l[k] != v {
			return false
		}
	}
	return len(s) > 0
}

// TestHelmBundledRegistry: registry.bundled adds a CNCF distribution
// registry (PVC, Deployment, Service) that the factory's config can name
// through the factory.registry template, the factory gets --allow-http for
// it, and no selector of the one takes the other's pods. Debian's
// docker-registry, started with the rendered container's environment,
// honours it (deletes enabled: factory gc needs them).
func TestHelmBundledRegistry(t *testing.T) {
	helm := testutil.NeedTool(t, "helm")
	for _, v := range []string{"HELM_CACHE_HOME", "HELM_CONFIG_HOME", "HELM_DATA_HOME"} {
		t.Setenv(v, t.TempDir())
	}
	store := `config.release[0].store=docker://{{ include "factory.registry" . }}/nodeforge/p11`
	run(t, "", helm, "lint", "--strict", chart, "--set", "registry.bundled=true", "--set-string", store)
	docs := renderAll(t, helm, "--set", "registry.bundled=true", "--set-string", store)
	const name = "factory-nodeforge-factory"
	factory, registry := named(docs, "Deployment", name), named(docs, "Deployment", name+"-registry")
	svc, pvc := named(docs, "Service", name+"-registry"), named(docs, "PersistentVolumeClaim", name+"-registry")
	if factory == nil || registry == nil || svc == nil || pvc == nil {
		t.Fatalf("bundled: factory %v, registry Deployment %v, Service %v, PVC %v", factory != nil, registry != nil, svc != nil, pvc != nil)
	}
	cfg, _ := at(named(docs, "ConfigMap", name), "data", "factory.yaml").(string)
	want := fmt.Sprintf("docker://%s-registry.default.svc:%v/nodeforge/p11", name, at(svc, "spec", "ports", 0, "port"))
	if !strings.Contains(cfg, "store: "+want) {
		t.Errorf("the config does not name the bundled registry's Service (%s):\n%s", want, cfg)
	}
	if args := fmt.Sprint(at(factory, "spec", "template", "spec", "containers", 0, "args")); !strings.Contains(args, "--allow-http") {
		t.Errorf("the factory is not allowed plain HTTP to the bundled registry: %s", args)
	}
	factoryPods, registryPods := at(factory, "spec", "template", "metadata", "labels"), at(registry, "spec", "template", "metadata", "labels")
	for _, s := range []struct {
		what     string
		selector any
	}{
		{"the factory's Deployment", at(factory, "spec", "selector", "matchLabels")},
		{"the factory's Service", at(named(docs, "Service", name), "spec", "selector")},
		{"the PodDisruptionBudget", at(named(docs, "PodDisruptionBudget", name), "spec", "selector", "matchLabels")},
	} {
		if selects(s.selector, registryPods) || !selects(s.selector, factoryPods) {
			t.Errorf("%s's selector %v: takes the registry's pods or not the factory's", s.what, s.selector)
		}
	}
	if !selects(at(svc, "spec", "selector"), registryPods) || selects(at(svc, "spec", "selector"), factoryPods) ||
		!selects(at(registry, "spec", "selector", "matchLabels"), registryPods) {
		t.Errorf("the registry's selectors: Service %v, Deployment %v", at(svc, "spec", "selector"), at(registry, "spec", "selector"))
	}
	if at(registry, "spec", "template", "spec", "volumes", 0, "persistentVolumeClaim", "claimName") != name+"-registry" {
		t.Errorf("the registry's storage is not its claim: %v", at(registry, "spec", "template", "spec", "volumes"))
	}

	// Off (the default): none of it, and naming it is refused.
	docs = renderAll(t, helm)
	if named(docs, "Deployment", name+"-registry") != nil || strings.Contains(fmt.Sprint(at(named(docs, "Deployment", name), "spec", "template", "spec", "containers", 0, "args")), "--allow-http") {
		t.Error("without registry.bundled, a registry or --allow-http is rendered")
	}
	cmd := exec.Command(helm, "template", "factory", chart, "--set-string", store)
	if out, err := cmd.CombinedOutput(); err == nil || !strings.Contains(string(out), "set registry.bundled=true") {
		t.Errorf("naming the bundled registry without it: %v\n%s", err, out)
	}

	serveRendered(t, at(registry, "spec", "template", "spec", "containers", 0, "env"))
}

// serveRendered starts Debian's docker-registry (the CNCF distribution
// registry the chart's image runs) with the rendered environment, on a
// loopback port and a temporary root instead of the pod's, and deletes a
// manifest through its API.
func serveRendered(t *testing.T, env any) {
	bin := testutil.NeedTool(t, "docker-registry")
	dir := t.TempDir()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	host := ln.Addr().String()
	ln.Close()
	cfg := filepath.Join(dir, "config.yml")
	os.WriteFile(cfg, []byte("version: 0.1\nlog:\n  accesslog:\n    disabled: true\nstorage:\n  filesystem:\n    rootdirectory: /nonexistent\n"), 0o644)
	cmd := exec.Command(bin, "serve", cfg)
	list, _ := env.([]any)
	for _, e := range list {
		k, v := fmt.Sprint(at(e, "name")), fmt.Sprint(at(e, "value"))
		switch k {
		case "REGISTRY_HTTP_ADDR":
			v = host
		case "REGISTRY_STORAGE_FILESYSTEM_ROOTDIRECTORY":
			v = filepath.Join(dir, "data")
		}
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	log, _ := os.Create(filepath.Join(dir, "registry.log"))
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait(); log.Close() })
	for i := 0; ; i++ {
		resp, err := http.Get("http://" + host + "/v2/")
		if err == nil {
			resp.Body.Close()
			break
		}
		if i == 100 {
			b, _ := os.ReadFile(log.Name())
			t.Fatalf("docker-registry with the rendered environment did not start: %v\n%s", err, b)
		}
		time.Sleep(100 * time.Millisecond)
	}
	img, err := random.Image(64, 1)
	if err != nil {
		t.Fatal(err)
	}
	ref, err := name.ParseReference(host+"/nodeforge/p11/boot:v1", name.Insecure)
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.Write(ref, img); err != nil {
		t.Fatalf("push to the rendered registry: %v", err)
	}
	d, _ := img.Digest()
	if err := remote.Delete(ref.Context().Digest(d.String())); err != nil {
		t.Errorf("the rendered registry refuses deletes (factory gc needs them): %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "data", "docker")); err != nil {
		t.Errorf("the registry did not store under the rendered root: %v", err)
	}
}
