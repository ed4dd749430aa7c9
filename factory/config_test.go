package factory

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/nodeforge/builder/internal/testutil"
	"go.yaml.in/yaml/v3"
)

// configSchema is the published schema of Config.
const configSchema = "../docs/schemas/factory-config.schema.json"

// TestConfigSchemaFields: the schema's settings are Config's yaml keys,
// no more, no fewer.
func TestConfigSchemaFields(t *testing.T) {
	b, err := os.ReadFile(configSchema)
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Properties map[string]json.RawMessage `json:"properties"`
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	var keys []string
	ct := reflect.TypeFor[Config]()
	for i := range ct.NumField() {
		keys = append(keys, ct.Field(i).Tag.Get("yaml"))
	}
	slices.Sort(keys)
	var props []string
	for k := range doc.Properties {
		props = append(props, k)
	}
	slices.Sort(props)
	if !slices.Equal(keys, props) {
		t.Errorf("Config's keys %v, the schema's %v", keys, props)
	}
}

// TestConfigSchema: the configs the project ships (the systemd unit's,
// the Helm chart's values) and a config with every setting validate and
// load; documents the reader refuses, the schema refuses too.
func TestConfigSchema(t *testing.T) {
	s := testutil.Schema(t, "factory-config.schema.json")
	var values struct {
		Config map[string]any `yaml:"config"`
	}
	vb, err := os.ReadFile("../deploy/helm/nodeforge-factory/values.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(vb, &values); err != nil {
		t.Fatal(err)
	}
	chart, err := yaml.Marshal(values.Config)
	if err != nil {
		t.Fatal(err)
	}
	unit, err := os.ReadFile("../deploy/systemd/factory.yaml")
	if err != nil {
		t.Fatal(err)
	}
	good := map[string][]byte{"systemd": unit, "chart values": chart, "every setting": []byte(everySetting)}
	for name, b := range good {
		if err := s.Validate(testutil.YAMLDoc(t, b)); err != nil {
			t.Errorf("%s: the schema refuses it: %v", name, err)
		}
		if _, err := loadConfigBytes(t, b); err != nil {
			t.Errorf("%s: LoadConfig: %v", name, err)
		}
	}
	for name, b := range map[string]string{
		"unknown key":           "listen: 127.0.0.1:80\nmax_builds: 3\n",
		"release without store": "release:\n  - key: a.pub\n",
		"release unknown field": "release:\n  - store: oci:x\n    keys: a.pub\n",
		"duration not Go's":     "build-timeout: 10 minutes\n",
		"count not a number":    "max-builds: many\n",
		"boolean as a word":     "allow-http: sometimes\n",
	} {
		if err := s.Validate(testutil.YAMLDoc(t, []byte(b))); err == nil {
			t.Errorf("%s: the schema accepts it", name)
		}
		if _, err := loadConfigBytes(t, []byte(b)); err == nil {
			t.Errorf("%s: LoadConfig accepts it", name)
		}
	}
	// Refused by the schema alone: the reader takes any string.
	if err := s.Validate(testutil.YAMLDoc(t, []byte("login: [build, everything]\n"))); err == nil {
		t.Error("login everything: the schema accepts it")
	}
}

// loadConfigBytes is LoadConfig of a file holding b.
func loadConfigBytes(t *testing.T, b []byte) (*Config, error) {
	t.Helper()
	p := filepath.Join(t.TempDir(), "factory.yaml")
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return LoadConfig(p)
}

const everySetting = `release:
  - store: oci:releases/p11
    key: [keys/p11.pub]
  - oci:/srv/releases/p10
key: keys/common.pub
cache: oci:cache
signing-key: keys/factory.key
secureboot: keys/secureboot
listen: 0.0.0.0:8443
metrics-listen: 127.0.0.1:9090
external-url: https://factory.example
max-builds: 3
max-queue: -1
build-timeout: 90s
build-rate: 0.5
build-burst: 2
schematic-rate: 10
schematic-burst: 20
max-schematics: 1000
body-timeout: 30s
idle-timeout: 2m
max-connections: 1024
verify-interval: 1h30m
shutdown-grace: 10m
tls-cert: tls/cert.pem
tls-key: /etc/tls/key.pem
insecure-listen: false
htpasswd: htpasswd
tokens: tokens
login: [build, metrics]
ca-file: ca.pem
allow-http: true
broken-versions: [v1.10.0, 1.10.1]
allowed-origins: https://ui.example
trusted-proxies: [10.0.0.0/8, "fd00::/8"]
`

// TestLoadConfigPaths: relative paths are the file's directory's; an
// unknown key's error names it and says what the settings are.
func TestLoadConfigPaths(t *testing.T) {
	c, err := loadConfigBytes(t, []byte(everySetting))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasSuffix(c.Release[0].Store, "/releases/p11") || !filepath.IsAbs(strings.TrimPrefix(c.Release[0].Store, "oci:")) ||
		c.Release[1].Store != "oci:/srv/releases/p10" || c.TLSKey != "/etc/tls/key.pem" || !filepath.IsAbs(c.TLSCert) || *c.MaxQueue != -1 {
		t.Errorf("loaded %+v", c)
	}
	_, err = loadConfigBytes(t, []byte("max_builds: 3\n"))
	if err == nil || !strings.Contains(err.Error(), "max_builds is not a setting") {
		t.Errorf("unknown key: %v", err)
	}
}
