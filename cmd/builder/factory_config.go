package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/pflag"
	"go.yaml.in/yaml/v3"
)

// factoryConfig is factory serve's --config file: every flag, under the
// flag's name (broken-versions and allowed-origins, lists, for
// --broken-version and --allowed-origin). Relative paths are the file's
// directory's.
type factoryConfig struct {
	Release        []factoryRelease `yaml:"release"`
	Key            stringList       `yaml:"key"`
	Cache          string           `yaml:"cache"`
	SigningKey     string           `yaml:"signing-key"`
	SecureBoot     string           `yaml:"secureboot"`
	Listen         string           `yaml:"listen"`
	MetricsListen  string           `yaml:"metrics-listen"`
	ExternalURL    string           `yaml:"external-url"`
	MaxBuilds      *int             `yaml:"max-builds"`
	MaxQueue       *int             `yaml:"max-queue"`
	BuildTimeout   *time.Duration   `yaml:"build-timeout"`
	BuildRate      *float64         `yaml:"build-rate"`
	BuildBurst     *int             `yaml:"build-burst"`
	SchematicRate  *float64         `yaml:"schematic-rate"`
	SchematicBurst *int             `yaml:"schematic-burst"`
	MaxSchematics  *int             `yaml:"max-schematics"`
	BodyTimeout    *time.Duration   `yaml:"body-timeout"`
	IdleTimeout    *time.Duration   `yaml:"idle-timeout"`
	MaxConnections *int             `yaml:"max-connections"`
	VerifyInterval *time.Duration   `yaml:"verify-interval"`
	ShutdownGrace  *time.Duration   `yaml:"shutdown-grace"`
	TLSCert        string           `yaml:"tls-cert"`
	TLSKey         string           `yaml:"tls-key"`
	InsecureListen *bool            `yaml:"insecure-listen"`
	Htpasswd       string           `yaml:"htpasswd"`
	Tokens         string           `yaml:"tokens"`
	Login          stringList       `yaml:"login"`
	CAFile         string           `yaml:"ca-file"`
	AllowHTTP      *bool            `yaml:"allow-http"`
	BrokenVersions stringList       `yaml:"broken-versions"`
	AllowedOrigins stringList       `yaml:"allowed-origins"`
	TrustedProxies stringList       `yaml:"trusted-proxies"`
}

// factoryRelease is a release store with the keys it must verify with
// (none: the common ones, key: or --key). In the file it is STORE or
// {store: STORE, key: PUB or [PUB...]}.
type factoryRelease struct {
	Store string     `yaml:"store"`
	Key   stringList `yaml:"key"`
}

func (r *factoryRelease) UnmarshalYAML(n *yaml.Node) error {
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
		type plain factoryRelease
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

// stringList is a list, or one string for a list of one.
type stringList []string

func (l *stringList) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind == yaml.ScalarNode {
		*l = []string{n.Value}
		return nil
	}
	return n.Decode((*[]string)(l))
}

// loadFactoryConfig reads a config file strictly: an unknown key is an
// error naming it.
func loadFactoryConfig(path string) (*factoryConfig, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("--config: %w", err)
	}
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	var c factoryConfig
	if err := dec.Decode(&c); err != nil && !errors.Is(err, io.EOF) {
		msg := strings.ReplaceAll(err.Error(), "not found in type main.factoryConfig", "is not a setting (the settings are factory serve's flags, by name)")
		return nil, fmt.Errorf("config %s: %s", path, msg)
	}
	c.resolve(filepath.Dir(path))
	return &c, nil
}

// resolve makes the file's relative paths relative to dir.
func (c *factoryConfig) resolve(dir string) {
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

// apply sets every flag the file says and the command line does not:
// flags override the file. Releases are the caller's (they carry keys).
func (c *factoryConfig) apply(fl *pflag.FlagSet) error {
	for _, s := range []struct {
		flag string
		vals []string
	}{
		{"key", c.Key}, {"cache", one(c.Cache)}, {"signing-key", one(c.SigningKey)}, {"secureboot", one(c.SecureBoot)}, {"listen", one(c.Listen)},
		{"metrics-listen", one(c.MetricsListen)}, {"external-url", one(c.ExternalURL)},
		{"max-builds", ptr(c.MaxBuilds)}, {"max-queue", ptr(c.MaxQueue)}, {"build-timeout", ptr(c.BuildTimeout)},
		{"build-rate", ptr(c.BuildRate)}, {"build-burst", ptr(c.BuildBurst)},
		{"schematic-rate", ptr(c.SchematicRate)}, {"schematic-burst", ptr(c.SchematicBurst)}, {"max-schematics", ptr(c.MaxSchematics)},
		{"body-timeout", ptr(c.BodyTimeout)}, {"idle-timeout", ptr(c.IdleTimeout)}, {"max-connections", ptr(c.MaxConnections)},
		{"verify-interval", ptr(c.VerifyInterval)}, {"shutdown-grace", ptr(c.ShutdownGrace)},
		{"tls-cert", one(c.TLSCert)}, {"tls-key", one(c.TLSKey)}, {"insecure-listen", ptr(c.InsecureListen)},
		{"htpasswd", one(c.Htpasswd)}, {"tokens", one(c.Tokens)}, {"login", c.Login},
		{"ca-file", one(c.CAFile)}, {"allow-http", ptr(c.AllowHTTP)},
		{"broken-version", c.BrokenVersions}, {"allowed-origin", c.AllowedOrigins}, {"trusted-proxies", c.TrustedProxies},
	} {
		// A command without the flag (warm and gc take only the stores'
		// flags) reads the file for what it takes.
		if fl.Lookup(s.flag) == nil || fl.Changed(s.flag) {
			continue
		}
		for _, v := range s.vals {
			if err := fl.Set(s.flag, v); err != nil {
				return fmt.Errorf("config: %s: %w", s.flag, err)
			}
		}
	}
	return nil
}

func one(s string) []string {
	if s == "" {
		return nil
	}
	return []string{s}
}

func ptr[T any](p *T) []string {
	if p == nil {
		return nil
	}
	return []string{fmt.Sprint(*p)}
}

// factoryEnvPrefix names the environment variables that say a flag:
// NODEFORGE_FACTORY_MAX_BUILDS=4 is --max-builds 4.
const factoryEnvPrefix = "NODEFORGE_FACTORY_"

// applyFactoryEnv sets every flag an environment variable says and the
// command line does not (lists comma-separated): flags override the
// environment, which overrides the config file. The config file itself
// can be NODEFORGE_FACTORY_CONFIG.
func applyFactoryEnv(fl *pflag.FlagSet) error {
	var err error
	fl.VisitAll(func(f *pflag.Flag) {
		name := factoryEnvPrefix + strings.ToUpper(strings.ReplaceAll(f.Name, "-", "_"))
		v, ok := os.LookupEnv(name)
		if !ok || fl.Changed(f.Name) || err != nil || f.Name == "help" {
			return
		}
		vals := []string{v}
		if strings.HasSuffix(f.Value.Type(), "Array") || strings.HasSuffix(f.Value.Type(), "Slice") {
			vals = strings.Split(v, ",")
		}
		for _, one := range vals {
			if e := fl.Set(f.Name, strings.TrimSpace(one)); e != nil {
				err = fmt.Errorf("%s: %w", name, e)
				return
			}
		}
	})
	return err
}
