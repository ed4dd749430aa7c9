package server

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/nodeforge/builder/internal/testutil"
)

// TestAlertRulesMetrics: every factory metric the alerting rules of
// deploy/prometheus name is one the factory registers (promtool, in the
// deploy package's tests, judges the rules themselves).
func TestAlertRulesMetrics(t *testing.T) {
	f := newAccessFactory(t, Options{})
	registered := map[string]bool{}
	families, err := f.svc.Metrics().Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range families {
		registered[mf.GetName()] = true
	}
	for _, name := range f.svc.MetricNames() {
		registered[name] = true
	}
	fqName := regexp.MustCompile(`fqName: "([^"]+)"`)
	for _, c := range []prometheus.Collector{f.metrics.requests, f.metrics.bytesSent} { // the front's
		ch := make(chan *prometheus.Desc, 4)
		c.Describe(ch)
		close(ch)
		for d := range ch {
			registered[fqName.FindStringSubmatch(d.String())[1]] = true
		}
	}
	files, _ := filepath.Glob(filepath.Join(testutil.RepoRoot(), "deploy/prometheus/*.yml"))
	if len(files) == 0 {
		t.Fatal("no rule files in deploy/prometheus")
	}
	named := regexp.MustCompile(`nodeforge_factory_[a-z_]+`)
	seen := 0
	for _, file := range files {
		b, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		for _, name := range named.FindAllString(string(b), -1) {
			seen++
			base := name
			for _, suffix := range []string{"_bucket", "_sum", "_count"} {
				if b, ok := strings.CutSuffix(name, suffix); ok && registered[b] {
					base = b
				}
			}
			if !registered[base] {
				t.Errorf("%s names %s, which the factory does not register", filepath.Base(file), name)
			}
		}
	}
	if seen == 0 {
		t.Error("the rules name no factory metric")
	}
}
