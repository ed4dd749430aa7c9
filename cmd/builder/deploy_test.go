package main

import (
	"encoding/json"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/nodeforge/builder/builder/compose"
	"github.com/nodeforge/builder/internal/testutil"
)

// deployDir is the repository's deploy/ (the tests' working directory is
// this package's).
const deployDir = "../../deploy"

// settleServe parses args as factory serve's and settles them with the
// config file they name: what the factory does before it opens anything.
func settleServe(t *testing.T, args []string) *serveFlags {
	t.Helper()
	cmd, f := factoryServeCommand()
	if err := cmd.ParseFlags(args); err != nil {
		t.Fatalf("factory serve %s: %v", strings.Join(args, " "), err)
	}
	if err := f.settle(cmd.Flags()); err != nil {
		t.Fatalf("factory serve %s: %v", strings.Join(args, " "), err)
	}
	return f
}

// TestDeploySystemd: the units' command lines are the builder's, and
// with the example config the factory settles (the schema accepts the
// file, the flags go together).
func TestDeploySystemd(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(deployDir, "systemd/nodeforge-factory.service"))
	if err != nil {
		t.Fatal(err)
	}
	unit := string(b)
	start := strings.Fields(testutil.UnitSetting(t, unit, "ExecStart"))
	if !slices.Equal(start[:3], []string{"/usr/local/bin/builder", "factory", "serve"}) {
		t.Fatalf("ExecStart %v", start)
	}
	env := testutil.UnitSetting(t, unit, "Environment=NODEFORGE_FACTORY_CONFIG")
	if env != filepath.Join("/etc/nodeforge", "factory.yaml") {
		t.Errorf("the config is %s", env)
	}
	args := strings.ReplaceAll(strings.Join(start[3:], " "), "%d", "/run/credentials/nodeforge-factory.service")
	t.Setenv("NODEFORGE_FACTORY_CONFIG", filepath.Join(deployDir, "systemd/factory.yaml"))
	f := settleServe(t, strings.Fields(args))
	if f.shutdownGrace != 10*time.Minute || f.signingKey != "/run/credentials/nodeforge-factory.service/factory.key" || len(f.releases) != 1 || len(f.proxies) != 2 {
		t.Errorf("settled: grace %v, signing key %s, releases %v, trusted proxies %v", f.shutdownGrace, f.signingKey, f.releases, f.proxies)
	}
	b, err = os.ReadFile(filepath.Join(deployDir, "systemd/nodeforge-factory-gc.service"))
	if err != nil {
		t.Fatal(err)
	}
	gc := strings.Fields(testutil.UnitSetting(t, string(b), "ExecStart"))
	cmd := newFactoryGCCmd()
	if err := cmd.ParseFlags(gc[3:]); err != nil || gc[2] != "gc" {
		t.Errorf("the gc unit's ExecStart %v: %v", gc, err)
	}
}

// TestDeployContainer: the image installs the Debian package of every
// tool a request can need (compose.Tools), runs as a non-root user, and
// its entrypoint and default arguments are factory serve's.
func TestDeployContainer(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(deployDir, "container/Containerfile"))
	if err != nil {
		t.Fatal(err)
	}
	text := strings.ReplaceAll(string(b), "\\\n", " ")
	stages := regexp.MustCompile(`(?m)^FROM `).Split(text, -1)
	final := stages[len(stages)-1]
	install := regexp.MustCompile(`apt-get install [^&\n]*`).FindString(final)
	for _, tool := range compose.Tools {
		if !slices.Contains(strings.Fields(install), tool.Package) {
			t.Errorf("the image does not install %s (Debian's %s): /readyz would be 503", tool.Name, tool.Package)
		}
	}
	if !strings.Contains(stages[1], "CGO_ENABLED=1 make build") {
		t.Error("the binary is not built as make build does, with cgo")
	}
	if u := regexp.MustCompile(`(?m)^USER (\S+)`).FindStringSubmatch(final); u == nil || u[1] == "0" || strings.HasPrefix(u[1], "0:") || u[1] == "root" {
		t.Errorf("the image runs as %v", u)
	}
	var entry, cmdArgs []string
	for key, v := range map[string]*[]string{"ENTRYPOINT": &entry, "CMD": &cmdArgs} {
		m := regexp.MustCompile(`(?m)^` + key + ` (.*)$`).FindStringSubmatch(final)
		if m == nil || json.Unmarshal([]byte(m[1]), v) != nil {
			t.Fatalf("%s is not an exec-form list: %v", key, m)
		}
	}
	if !slices.Equal(entry, []string{"/usr/local/bin/builder", "factory", "serve"}) {
		t.Errorf("ENTRYPOINT %v", entry)
	}
	cfg := filepath.Join(t.TempDir(), "factory.yaml")
	os.WriteFile(cfg, []byte("release: [oci:/var/lib/nodeforge/release]\nkey: keys/release.pub\ninsecure-listen: true\n"), 0o644)
	f := settleServe(t, append(cmdArgs, "--config", cfg))
	if f.listen != "0.0.0.0:8080" || f.metricsListen != "0.0.0.0:9090" {
		t.Errorf("listens on %s and %s", f.listen, f.metricsListen)
	}
}

// TestDeployHelm: the chart's rendered Deployment runs factory serve on
// flags the builder takes with the ConfigMap as its config file, which
// the config schema accepts.
func TestDeployHelm(t *testing.T) {
	helm := testutil.NeedTool(t, "helm")
	t.Setenv("HELM_CACHE_HOME", t.TempDir())
	t.Setenv("HELM_CONFIG_HOME", t.TempDir())
	t.Setenv("HELM_DATA_HOME", t.TempDir())
	for _, set := range []string{"", "secrets.tls=factory-tls,secrets.auth=factory-auth,config.login={build},config.trusted-proxies={10.0.0.0/8}"} {
		args := []string{"template", "factory", filepath.Join(deployDir, "helm/nodeforge-factory")}
		if set != "" {
			args = append(args, "--set", set)
		}
		out, err := exec.Command(helm, args...).CombinedOutput()
		if err != nil {
			t.Fatalf("helm %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		var config string
		var flags []string
		dec := yaml.NewDecoder(strings.NewReader(string(out)))
		for {
			var doc struct {
				Kind string
				Data map[string]string
				Spec struct {
					Template struct {
						Spec struct{ Containers []struct{ Args []string } }
					}
				}
			}
			if err := dec.Decode(&doc); errors.Is(err, io.EOF) {
				break
			} else if err != nil {
				t.Fatal(err)
			}
			switch doc.Kind {
			case "ConfigMap":
				config = doc.Data["factory.yaml"]
			case "Deployment":
				flags = doc.Spec.Template.Spec.Containers[0].Args
			}
		}
		cfg := filepath.Join(t.TempDir(), "factory.yaml")
		os.WriteFile(cfg, []byte(config), 0o644)
		var doc any
		if err := yaml.Unmarshal([]byte(config), &doc); err != nil {
			t.Fatalf("--set %s: the ConfigMap's factory.yaml: %v", set, err)
		}
		js, err := json.Marshal(doc)
		if err != nil {
			t.Fatal(err)
		}
		validateSchema(t, "factory-config.schema.json", js)
		for i, a := range flags {
			if strings.HasPrefix(a, "--config=") {
				flags[i] = "--config=" + cfg
			}
		}
		f := settleServe(t, flags)
		if f.listen != "0.0.0.0:8080" || f.shutdownGrace != 600*time.Second || f.maxBuilds != 2 || len(f.releases) == 0 {
			t.Errorf("--set %s: listen %s, grace %v, max-builds %d, releases %v", set, f.listen, f.shutdownGrace, f.maxBuilds, f.releases)
		}
		if set != "" && (f.tlsKey != "/etc/nodeforge/tls/tls.key" || f.insecureListen || !slices.Equal(f.login, []string{"build"}) || !slices.Equal(f.proxies, []string{"10.0.0.0/8"})) {
			t.Errorf("--set %s: tls key %s, insecure %v, login %v, trusted proxies %v", set, f.tlsKey, f.insecureListen, f.login, f.proxies)
		}
	}
}
