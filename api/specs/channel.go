package specs

import (
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"
)

// Channel is where a release is published: dev for every build, prod for
// what passed the gate (builder promote). Every field has a default.
type Channel struct {
	// Registry is HOST[:PORT][/PREFIX]; empty publishes into the local OCI
	// image layout Layout.
	Registry string `yaml:"registry,omitempty" json:"registry,omitempty"`
	// Layout is the local OCI image layout (default release/<channel>
	// beside the spec) used when Registry is empty.
	Layout string `yaml:"layout,omitempty" json:"layout,omitempty"`
	// Key signs what the channel receives: a cosign.key file (its password
	// in $COSIGN_PASSWORD) relative to the spec.
	Key string `yaml:"key,omitempty" json:"key,omitempty"`
	// PublicKey verifies the channel (default: cosign.pub beside Key).
	PublicKey string `yaml:"public-key,omitempty" json:"publicKey,omitempty"`
	// BuilderID names the builder in the provenance of the channel's
	// releases (default https://nodeforge.dev/builder/<channel>).
	BuilderID string `yaml:"builder-id,omitempty" json:"builderId,omitempty"`
	// CAFile is a PEM bundle trusted for the registry besides the system's.
	CAFile string `yaml:"ca-file,omitempty" json:"caFile,omitempty"`
	// AllowHTTP permits plain HTTP to a registry that is not on loopback.
	AllowHTTP bool `yaml:"allow-http,omitempty" json:"allowHttp,omitempty"`
}

var channelRe = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]*$`)

// DefaultChannels are dev and prod, each a local OCI layout.
func DefaultChannels() map[string]Channel {
	return map[string]Channel{"dev": {}, "prod": {}}
}

// Channel returns a channel with its defaults filled in.
func (s *Spec) Channel(name string) (Channel, error) {
	chs := s.Channels
	if len(chs) == 0 {
		chs = DefaultChannels()
	}
	c, ok := chs[name]
	if !ok {
		names := slices.Sorted(maps.Keys(chs))
		return Channel{}, fmt.Errorf("the spec has no channel %q (have %s)", name, strings.Join(names, ", "))
	}
	if c.Registry == "" && c.Layout == "" {
		c.Layout = "release/" + name
	}
	c.Layout = s.Path(c.Layout)
	c.Key = s.Path(c.Key)
	c.PublicKey = s.Path(c.PublicKey)
	c.CAFile = s.Path(c.CAFile)
	if c.PublicKey == "" && c.Key != "" && strings.HasSuffix(c.Key, ".key") {
		c.PublicKey = strings.TrimSuffix(c.Key, ".key") + ".pub"
	}
	if c.BuilderID == "" {
		c.BuilderID = "https://nodeforge.dev/builder/" + name
	}
	return c, nil
}

func (s *Spec) normalizeChannels(bad func(string, ...any)) {
	for name, c := range s.Channels {
		if !channelRe.MatchString(name) {
			bad("channel %q: name is not valid", name)
		}
		if c.Registry != "" && c.Layout != "" {
			bad("channel %q: give registry or layout, not both", name)
		}
		if strings.Contains(c.Registry, "://") && !strings.HasPrefix(c.Registry, "docker://") {
			bad("channel %q: registry %q: want HOST[:PORT][/PREFIX]", name, c.Registry)
		}
	}
}
