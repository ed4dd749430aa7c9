package deploy

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nodeforge/builder/internal/testutil"
)

// run runs a judge, failing the test with what it said when it fails.
func run(t *testing.T, dir, name string, args ...string) string {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return string(out)
}

// systemRoot lays the units out as installed (/etc/systemd/system, the
// builder at /usr/local/bin/builder) under a root of their own, beside
// the host's own units, for systemd-analyze --root.
func systemRoot(t *testing.T) string {
	t.Helper()
	root := t.TempDir()
	units := filepath.Join(root, "etc/systemd/system")
	for _, d := range []string{units, filepath.Join(root, "usr/local/bin"), filepath.Join(root, "usr/lib/systemd")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	host := "/usr/lib/systemd/system"
	if _, err := os.Stat(filepath.Join(host, "sysinit.target")); err != nil {
		host = "/lib/systemd/system"
	}
	// A copy (a megabyte): a link would resolve inside the root.
	run(t, "", "cp", "-a", host, filepath.Join(root, "usr/lib/systemd/system"))
	os.WriteFile(filepath.Join(root, "usr/local/bin/builder"), []byte("#!/bin/sh\n"), 0o755)
	files, _ := filepath.Glob("systemd/nodeforge-factory*")
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		os.WriteFile(filepath.Join(units, filepath.Base(f)), b, 0o644)
	}
	return root
}

// TestSystemdUnits: systemd-analyze verify finds nothing to say of the
// units (a warning, an unknown key, fails the test as an error does),
// their exposure (systemd-analyze security) is low, and the service's
// stop timeout exceeds its --shutdown-grace.
func TestSystemdUnits(t *testing.T) {
	analyze := testutil.NeedTool(t, "systemd-analyze")
	root := systemRoot(t)
	units, _ := filepath.Glob(filepath.Join(root, "etc/systemd/system/*"))
	if len(units) != 3 {
		t.Fatalf("%d units, want the service, the gc service and its timer", len(units))
	}
	if out := run(t, "", analyze, append([]string{"verify", "--root=" + root}, units...)...); out != "" {
		t.Errorf("systemd-analyze verify:\n%s", out)
	}
	// Exposure 0-10 as systemd prints it is 0-100 here: at most 2.0, "OK".
	run(t, "", analyze, "security", "--offline=yes", "--root="+root, "--threshold=20", "nodeforge-factory.service", "nodeforge-factory-gc.service")

	unit, err := os.ReadFile("systemd/nodeforge-factory.service")
	if err != nil {
		t.Fatal(err)
	}
	grace, err := time.ParseDuration(flagValue(t, string(unit), "--shutdown-grace")) // as the builder parses it
	if err != nil {
		t.Fatal(err)
	}
	stop := timespan(t, analyze, testutil.UnitSetting(t, string(unit), "TimeoutStopSec"))
	if stop < grace+30*time.Second {
		t.Errorf("TimeoutStopSec %v leaves --shutdown-grace %v less than 30 s to spare: systemd kills a draining factory", stop, grace)
	}
	if testutil.UnitSetting(t, string(unit), "KillMode") != "mixed" {
		t.Error("KillMode is not mixed: a stop would signal the builds' tools (xorriso) as well as the factory, failing the builds it drains")
	}
}

// flagValue is --flag VALUE or --flag=VALUE in a unit's ExecStart.
func flagValue(t *testing.T, unit, flag string) string {
	t.Helper()
	f := strings.Fields(testutil.UnitSetting(t, unit, "ExecStart"))
	for i, a := range f {
		if v, ok := strings.CutPrefix(a, flag+"="); ok {
			return v
		}
		if a == flag && i+1 < len(f) {
			return f[i+1]
		}
	}
	t.Fatalf("ExecStart has no %s", flag)
	return ""
}

// timespan is a systemd time span as systemd-analyze reads it.
func timespan(t *testing.T, analyze, span string) time.Duration {
	t.Helper()
	m := regexp.MustCompile(`μs: (\d+)`).FindStringSubmatch(run(t, "", analyze, "timespan", span))
	if m == nil {
		t.Fatalf("systemd-analyze timespan %s: no μs", span)
	}
	us, _ := strconv.ParseInt(m[1], 10, 64)
	return time.Duration(us) * time.Microsecond
}

const chart = "helm/nodeforge-factory"

// render is helm template's manifests of the chart with values (--set),
// by kind.
func render(t *testing.T, helm string, values ...string) map[string]map[string]any {
	t.Helper()
	var flags []string
	for _, v := range values {
		flags = append(flags, "--set", v)
	}
	docs := map[string]map[string]any{}
	for _, d := range renderAll(t, helm, flags...) {
		docs[d["kind"].(string)] = d
	}
	return docs
}

// at walks a manifest: keys of maps, indexes of lists.
func at(v any, path ...any) any {
	for _, p := range path {
		switch k := p.(type) {
		case string:
			m, _ := v.(map[string]any)
			v = m[k]
		case int:
			l, _ := v.([]any)
			if k >= len(l) {
				return nil
			}
			v = l[k]
		}
	}
	return v
}

// TestHelmChart: helm lint (strict) accepts the chart, helm template
// renders a Deployment whose probes, drain and secrets hold together, a
// Service, the config's ConfigMap and a PodDisruptionBudget.
func TestHelmChart(t *testing.T) {
	helm := testutil.NeedTool(t, "helm")
	t.Setenv("HELM_CACHE_HOME", t.TempDir())
	t.Setenv("HELM_CONFIG_HOME", t.TempDir())
	t.Setenv("HELM_DATA_HOME", t.TempDir())
	run(t, "", helm, "lint", "--strict", chart)
	run(t, "", helm, "lint", "--strict", chart, "--set", "secrets.tls=factory-tls,secrets.auth=factory-auth,secrets.registry=factory-registry")

	docs := render(t, helm)
	for _, kind := range []string{"ConfigMap", "Service", "Deployment", "PodDisruptionBudget"} {
		if docs[kind] == nil {
			t.Errorf("no %s rendered", kind)
		}
	}
	pod := at(docs["Deployment"], "spec", "template", "spec")
	c := at(pod, "containers", 0)
	for probe, path := range map[string]string{"readinessProbe": "/readyz", "livenessProbe": "/healthz", "startupProbe": "/healthz"} {
		if got := at(c, probe, "httpGet", "path"); got != path || at(c, probe, "httpGet", "port") != "http" || at(c, probe, "httpGet", "scheme") != "HTTP" {
			t.Errorf("%s: %v, want %s on the http port", probe, at(c, probe), path)
		}
	}
	args := fmt.Sprint(at(c, "args"))
	if !strings.Contains(args, "--shutdown-grace=600s") || at(pod, "terminationGracePeriodSeconds") != 660 || at(c, "lifecycle", "preStop", "sleep", "seconds") != 5 {
		t.Errorf("the drain: args %s, terminationGracePeriodSeconds %v, preStop %v", args, at(pod, "terminationGracePeriodSeconds"), at(c, "lifecycle"))
	}
	if at(c, "env", 0, "name") != "COSIGN_PASSWORD" || at(c, "env", 0, "valueFrom", "secretKeyRef", "name") != "nodeforge-factory-signing" {
		t.Errorf("COSIGN_PASSWORD is not the signing Secret's: %v", at(c, "env"))
	}
	// The Go runtime's soft memory limit is the container's.
	if env, _ := at(c, "env").([]any); len(env) == 0 || at(env[len(env)-1], "name") != "GOMEMLIMIT" || at(env[len(env)-1], "valueFrom", "resourceFieldRef", "resource") != "limits.memory" {
		t.Errorf("no GOMEMLIMIT from the memory limit: %v", at(c, "env"))
	}
	if at(pod, "securityContext", "runAsNonRoot") != true || at(c, "securityContext", "readOnlyRootFilesystem") != true {
		t.Errorf("the pod may run as root or write its root: %v %v", at(pod, "securityContext"), at(c, "securityContext"))
	}
	if at(docs["PodDisruptionBudget"], "spec", "maxUnavailable") != 1 || at(docs["Service"], "spec", "ports", 0, "targetPort") != "http" {
		t.Errorf("PodDisruptionBudget %v, Service %v", at(docs["PodDisruptionBudget"], "spec"), at(docs["Service"], "spec"))
	}
	if cfg, _ := at(docs["ConfigMap"], "data", "factory.yaml").(string); !strings.Contains(cfg, "store: docker://") {
		t.Errorf("the ConfigMap's factory.yaml:\n%s", cfg)
	}

	// HTTPS when the TLS Secret is named; a shorter grace, a shorter wait.
	docs = render(t, helm, "secrets.tls=factory-tls", "shutdownGraceSeconds=120")
	pod = at(docs["Deployment"], "spec", "template", "spec")
	c = at(pod, "containers", 0)
	args = fmt.Sprint(at(c, "args"))
	if at(c, "readinessProbe", "httpGet", "scheme") != "HTTPS" || !strings.Contains(args, "--tls-key=/etc/nodeforge/tls/tls.key") || strings.Contains(args, "--insecure-listen") ||
		!strings.Contains(args, "--shutdown-grace=120s") || at(pod, "terminationGracePeriodSeconds") != 180 {
		t.Errorf("with TLS and a 120 s grace: args %s, probe %v, terminationGracePeriodSeconds %v", args, at(c, "readinessProbe"), at(pod, "terminationGracePeriodSeconds"))
	}
	// A spare that does not cover the preStop pause is refused.
	cmd := exec.Command(helm, "template", "factory", chart, "--set", "terminationSpareSeconds=2")
	if out, err := cmd.CombinedOutput(); err == nil || !bytes.Contains(out, []byte("terminationSpareSeconds must cover preStopSleepSeconds")) {
		t.Errorf("a spare shorter than preStop: %v\n%s", err, out)
	}
}

// TestPrometheusRules: promtool checks the alerting rules and runs their
// unit tests. (factory's TestAlertRulesMetrics checks that the metrics
// they name are the factory's.)
func TestPrometheusRules(t *testing.T) {
	promtool := testutil.NeedTool(t, "promtool")
	rules, _ := filepath.Glob("prometheus/*.yml")
	if len(rules) == 0 {
		t.Fatal("no rule files")
	}
	run(t, "", promtool, append([]string{"check", "rules"}, rules...)...)
	tests, _ := filepath.Glob("prometheus/tests/*.yml")
	if len(tests) == 0 {
		t.Fatal("no rule tests")
	}
	run(t, "", promtool, append([]string{"test", "rules"}, tests...)...)
}
