package specs

import (
	"maps"
	"path"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
)

// ContainerImage is one container image of the spec's images section:
// built from packages of the same base, resolved per architecture and
// pinned in the lock beside the node's components, with the run-time
// configuration of an OCI image.
type ContainerImage struct {
	// Packages to install (with everything they require).
	Packages []string `yaml:"packages" json:"packages"`
	// Architectures the image is built for; default the spec's. Each must
	// be one of the spec's.
	Architectures []string `yaml:"architectures,omitempty" json:"architectures,omitempty"`
	// Entrypoint and Cmd of the image's config.
	Entrypoint []string `yaml:"entrypoint,omitempty" json:"entrypoint,omitempty"`
	Cmd        []string `yaml:"cmd,omitempty" json:"cmd,omitempty"`
	// Env are environment variables (written NAME=VALUE, sorted by name);
	// PATH defaults to /usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin.
	Env map[string]string `yaml:"env,omitempty" json:"env,omitempty"`
	// Workdir is the working directory (absolute).
	Workdir string `yaml:"workdir,omitempty" json:"workdir,omitempty"`
	// User the process runs as: a name of the image's /etc/passwd, a UID
	// or UID:GID (the UID must be in the passwd too). Default root.
	User string `yaml:"user,omitempty" json:"user,omitempty"`
	// Users and Groups are added to the image's /etc/passwd and /etc/group
	// (beside root and what the packages ship or their scriptlets add).
	Users  []User  `yaml:"users,omitempty" json:"users,omitempty"`
	Groups []Group `yaml:"groups,omitempty" json:"groups,omitempty"`
	// Labels of the image's config, Annotations of its manifests and index.
	Labels      map[string]string `yaml:"labels,omitempty" json:"labels,omitempty"`
	Annotations map[string]string `yaml:"annotations,omitempty" json:"annotations,omitempty"`
	// Links are symbolic links made in the image, path to target (the
	// layout the image's consumers expect: /usr/local/bin/etcd: /usr/bin/etcd);
	// each target must exist in the image.
	Links map[string]string `yaml:"links,omitempty" json:"links,omitempty"`
	// Drop removes paths by pattern, as image.drop does for the root;
	// default the same (documentation, manual pages, locales).
	Drop []DropRule `yaml:"drop,omitempty" json:"drop,omitempty"`
	// Setuid lists the paths allowed to keep setuid/setgid bits; any other
	// is an error.
	Setuid []string `yaml:"setuid,omitempty" json:"setuid,omitempty"`
	// Compression of the layer: gzip (default) or zstd.
	Compression string `yaml:"compression,omitempty" json:"compression,omitempty"`
	// Healthcheck is the config's Healthcheck (Docker's HEALTHCHECK CMD):
	// a command run inside the container, checked as the entrypoint is.
	Healthcheck *Healthcheck `yaml:"healthcheck,omitempty" json:"healthcheck,omitempty"`
	// Ports are the config's ExposedPorts: PORT or PORT/PROTO (tcp when
	// none is named; written with it).
	Ports []string `yaml:"ports,omitempty" json:"ports,omitempty"`
	// StopSignal is the config's StopSignal (SIGTERM, or a number).
	StopSignal string `yaml:"stop-signal,omitempty" json:"stop-signal,omitempty"`
}

// Healthcheck is an image's health check: the command (exec form) and
// Go durations; a zero field leaves the runtime's default.
type Healthcheck struct {
	Command     []string `yaml:"command" json:"command"`
	Interval    string   `yaml:"interval,omitempty" json:"interval,omitempty"`
	Timeout     string   `yaml:"timeout,omitempty" json:"timeout,omitempty"`
	StartPeriod string   `yaml:"start-period,omitempty" json:"start-period,omitempty"`
	Retries     int      `yaml:"retries,omitempty" json:"retries,omitempty"`
}

// portRe is an exposed port: PORT or PORT/PROTO.
var portRe = regexp.MustCompile(`^([0-9]{1,5})(/(tcp|udp|sctp))?$`)

// signalRe is a stop signal: a name or a number.
var signalRe = regexp.MustCompile(`^(SIG[A-Z0-9]+|[0-9]+)$`)

// DefaultContainerPath is the PATH of an image whose env sets none.
const DefaultContainerPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// imageNameRe is what an image's name may be: one component of an OCI
// repository path (it names OUT/images/<name> and, published, the
// repository).
var imageNameRe = regexp.MustCompile(`^[a-z0-9]+(?:[._-][a-z0-9]+)*$`)

// userRe is a user: a name, a UID, or UID:GID.
var userRe = regexp.MustCompile(`^([A-Za-z0-9_][A-Za-z0-9._-]*|[0-9]+(:[0-9]+)?)$`)

// envNameRe is an environment variable's name.
var envNameRe = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// ImageNames returns the container images' names sorted.
func (s *Spec) ImageNames() []string { return slices.Sorted(maps.Keys(s.Images)) }

// normalizeImages checks the images section and fills its defaults.
func (s *Spec) normalizeImages(bad func(string, ...any)) {
	for _, name := range s.ImageNames() {
		im := s.Images[name]
		where := "images." + name
		if !imageNameRe.MatchString(name) {
			bad("%s: the name must be lower-case letters and digits, joined by . _ -", where)
		}
		if len(im.Packages) == 0 {
			bad("%s lists no packages", where)
		}
		if len(im.Architectures) == 0 {
			im.Architectures = slices.Clone(s.Architectures)
		}
		for i, a := range im.Architectures {
			if !slices.Contains(s.Architectures, a) {
				bad("%s: architecture %q is not one of the spec's (%s)", where, a, strings.Join(s.Architectures, ", "))
			} else if slices.Contains(im.Architectures[:i], a) {
				bad("%s: architecture %q is listed twice", where, a)
			}
		}
		im.normalizeConfig(where, bad)
		im.normalizePaths(where, bad)
		s.Images[name] = im
	}
}

// normalizeConfig checks the run-time configuration.
func (im *ContainerImage) normalizeConfig(where string, bad func(string, ...any)) {
	if len(im.Entrypoint) > 0 && !path.IsAbs(im.Entrypoint[0]) {
		bad("%s.entrypoint %q must be an absolute path", where, im.Entrypoint[0])
	}
	if len(im.Entrypoint) == 0 && len(im.Cmd) == 0 {
		bad("%s: an entrypoint or a cmd is required", where)
	}
	if len(im.Entrypoint) == 0 && len(im.Cmd) > 0 && !path.IsAbs(im.Cmd[0]) {
		bad("%s.cmd %q must start with an absolute path (there is no entrypoint)", where, im.Cmd[0])
	}
	for k := range im.Env {
		if !envNameRe.MatchString(k) {
			bad("%s.env: %q is not a variable name", where, k)
		}
	}
	if im.Workdir != "" && !path.IsAbs(im.Workdir) {
		bad("%s.workdir %q must be absolute", where, im.Workdir)
	}
	if im.User == "" {
		im.User = "root"
	}
	if !userRe.MatchString(im.User) {
		bad("%s.user %q: want a user name, a UID or UID:GID", where, im.User)
	}
	for _, u := range im.Users {
		if !nameRe.MatchString(u.Name) || u.UID < 0 {
			bad("%s.users: bad user %q (uid %d)", where, u.Name, u.UID)
		}
	}
	for _, g := range im.Groups {
		if !nameRe.MatchString(g.Name) || g.GID < 0 {
			bad("%s.groups: bad group %q (gid %d)", where, g.Name, g.GID)
		}
	}
	im.normalizeRuntime(where, bad)
	switch im.Compression {
	case "":
		im.Compression = "gzip"
	case "gzip", "zstd":
	default:
		bad("%s.compression %q: want gzip or zstd", where, im.Compression)
	}
}

// normalizePaths checks the links, drop rules and setuid paths.
func (im *ContainerImage) normalizePaths(where string, bad func(string, ...any)) {
	for _, p := range slices.Sorted(maps.Keys(im.Links)) {
		if !path.IsAbs(p) || path.Clean(p) != p || p == "/" {
			bad("%s.links: %q must be an absolute, clean path", where, p)
		}
		if t := im.Links[p]; t == "" || strings.ContainsRune(t, 0) {
			bad("%s.links: %q has no target", where, p)
		}
	}
	if im.Drop == nil {
		im.Drop = append([]DropRule(nil), DefaultDrop...)
	}
	for _, d := range im.Drop {
		for _, p := range d.Paths {
			if _, err := GlobRegexp(p); err != nil {
				bad("%s.drop %q: %v", where, p, err)
			}
		}
	}
	for _, p := range im.Setuid {
		if !path.IsAbs(p) {
			bad("%s.setuid %q must be absolute", where, p)
		}
	}
}

// normalizeRuntime checks the health check, the ports (tcp added where no
// protocol is named) and the stop signal.
func (im *ContainerImage) normalizeRuntime(where string, bad func(string, ...any)) {
	if h := im.Healthcheck; h != nil {
		if len(h.Command) == 0 || !path.IsAbs(h.Command[0]) {
			bad("%s.healthcheck.command %q must start with an absolute path", where, h.Command)
		}
		for field, v := range map[string]string{"interval": h.Interval, "timeout": h.Timeout, "start-period": h.StartPeriod} {
			if d, err := time.ParseDuration(v); v != "" && (err != nil || d < 0) {
				bad("%s.healthcheck.%s %q: want a duration such as 30s", where, field, v)
			}
		}
		if h.Retries < 0 {
			bad("%s.healthcheck.retries %d: want 0 or more", where, h.Retries)
		}
	}
	for i, p := range im.Ports {
		m := portRe.FindStringSubmatch(p)
		if m == nil || !validPort(m[1]) {
			bad("%s.ports %q: want PORT (1-65535) or PORT/tcp, /udp, /sctp", where, p)
			continue
		}
		if m[2] == "" {
			im.Ports[i] = p + "/tcp"
		}
	}
	if im.StopSignal != "" && !signalRe.MatchString(im.StopSignal) {
		bad("%s.stop-signal %q: want a signal name (SIGTERM) or number", where, im.StopSignal)
	}
}

// validPort says whether s is a port number, 1-65535.
func validPort(s string) bool {
	n, err := strconv.Atoi(s)
	return err == nil && n >= 1 && n <= 65535
}
