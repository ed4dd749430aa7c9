package main

import (
	"fmt"
	"os"
	"strings"

	"github.com/spf13/pflag"

	"github.com/nodeforge/builder/factory"
)

// applyFactoryConfig sets every flag the file says and the command line does not:
// flags override the file. Releases are the caller's (they carry keys).
func applyFactoryConfig(c *factory.Config, fl *pflag.FlagSet) error {
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
