package factory

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// Config is the factory's configuration, builder factory serve's --config
// (docs/schemas/factory-config.schema.json): every flag of factory serve,
// under the flag's name (broken-versions and allowed-origins, lists, for
// --broken-version and --allowed-origin). Relative paths are the file's
// directory's. The command applies it under its flags (flags override it).
type Config struct {
	Release        []ConfigRelease `yaml:"release"`
	Key            StringList      `yaml:"key"`
	Cache          string          `yaml:"cache"`
	SigningKey     string          `yaml:"signing-key"`
	SecureBoot     string          `yaml:"secureboot"`
	Listen         string          `yaml:"listen"`
	MetricsListen  string          `yaml:"metrics-listen"`
	ExternalURL    string          `yaml:"external-url"`
	MaxBuilds      *int            `yaml:"max-builds"`
	MaxQueue       *int            `yaml:"max-queue"`
	BuildTimeout   *time.Duration  `yaml:"build-timeout"`
	BuildRate      *float64        `yaml:"build-rate"`
	BuildBurst     *int            `yaml:"build-burst"`
	SchematicRate  *float64        `yaml:"schematic-rate"`
	SchematicBurst *int            `yaml:"schematic-burst"`
	MaxSchematics  *int            `yaml:"max-schematics"`
	BodyTimeout    *time.Duration  `yaml:"body-timeout"`
	IdleTimeout    *time.Duration  `yaml:"idle-timeout"`
	MaxConnections *int            `yaml:"max-connections"`
	VerifyInterval *time.Duration  `yaml:"verify-interval"`
	ShutdownGrace  *time.Duration  `yaml:"shutdown-grace"`
	TLSCert        string          `yaml:"tls-cert"`
	TLSKey         string          `yaml:"tls-key"`
	InsecureListen *bool           `yaml:"insecure-listen"`
	Htpasswd       string          `yaml:"htpasswd"`
	Tokens         string          `yaml:"tokens"`
	Login          StringList      `yaml:"login"`
	CAFile         string          `yaml:"ca-file"`
	AllowHTTP      *bool           `yaml:"allow-http"`
	BrokenVersions StringList      `yaml:"broken-versions"`
	AllowedOrigins StringList      `yaml:"allowed-origins"`
	TrustedProxies StringList      `yaml:"trusted-proxies"`
}

// ConfigRelease is a release store with the keys it must verify with
// (none: the common ones, key: or --key). In the file it is STORE or
// {store: STORE, key: PUB or [PUB...]}.
type ConfigRelease struct {
	Store string     `yaml:"store"`
	Key   StringList `yaml:"key"`
}

func (r *ConfigRelease) UnmarshalYAML(n *yaml.Node) error {
	switch n.Kind {
	case yaml.ScalarNode:
		r.Store = n.Value
		return nil
	case yaml.MappingNode:
		// node.Decode forgets KnownFields: the keys are checked here.
		for i := 0; i < len(n.Content); i += 2 {
			if k := n.Content[i]; k.Value != "store" && k.Value != "key" {
				return fmt.Errorf("line %d: field %s is not a release's (store, key)", k.Line, k.Value)
			}
		}
		type plain ConfigRelease
		if err := n.Decode((*plain)(r)); err != nil {
			return err
		}
		if r.Store == "" {
			return fmt.Errorf("line %d: a release without its store", n.Line)
		}
		return nil
	}
	return fmt.Errorf("line %d: a release is STORE or {store: STORE, key: [PUB...]}", n.Line)
}

// StringList is a list, or one string for a list of one.
type StringList []string

func (l *StringList) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind == yaml.ScalarNode {
		*l = []string{n.Value}
		return nil
	}
	return n.Decode((*[]string)(l))
}

// LoadConfig reads a config file strictly: an unknown key is an
// error naming it.
func LoadConfig(path string) (*Config, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("--config: %w", err)
	}
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	var c Config
	if err := dec.Decode(&c); err != nil && !errors.Is(err, io.EOF) {
		msg := strings.ReplaceAll(err.Error(), "not found in type factory.Config", "is not a setting (the settings are factory serve's flags, by name)")
		return nil, fmt.Errorf("config %s: %s", path, msg)
	}
	c.resolve(filepath.Dir(path))
	return &c, nil
}

// resolve makes the file's relative paths relative to dir.
func (c *Config) resolve(dir string) {
	file := func(p *string) {
		if *p != "" && !filepath.IsAbs(*p) {
			*p = filepath.Join(dir, *p)
		}
	}
	store := func(p *string) {
		if rest, ok := strings.CutPrefix(*p, "oci:"); ok && !filepath.IsAbs(rest) {
			*p = "oci:" + filepath.Join(dir, rest)
		}
	}
	for i := range c.Release {
		store(&c.Release[i].Store)
		for j := range c.Release[i].Key {
			file(&c.Release[i].Key[j])
		}
	}
	for i := range c.Key {
		file(&c.Key[i])
	}
	store(&c.Cache)
	for _, p := range []*string{&c.SigningKey, &c.SecureBoot, &c.TLSCert, &c.TLSKey, &c.Htpasswd, &c.Tokens, &c.CAFile} {
		file(p)
	}
}
