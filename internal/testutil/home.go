package testutil

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
)

// NewHome points HOME at a new empty directory for the rest of the test
// process, so that the outside tools the tests start (crane, skopeo,
// cosign, gpg) find none of the machine's dot-files, and returns it. The
// go command's caches and settings stay the machine's: they are pinned in
// the environment first (GOCACHE, GOMODCACHE, GOPATH, GOENV), because the
// tests build Go programs (the node init, the builder as a child process),
// and from an empty HOME the go command would compile the standard library
// again and download modules from the network. GOPROXY=off besides: the
// modules are those the test binary was built from, in the module cache,
// and a test never reaches beyond loopback.
func NewHome() (string, error) {
	if err := pinGoEnv(); err != nil {
		return "", err
	}
	home, err := os.MkdirTemp("", "nodeforge-testhome-")
	if err != nil {
		return "", err
	}
	return home, os.Setenv("HOME", home)
}

// pinGoEnv sets the go command's cache and settings locations, as it
// resolves them now, in the environment. Without a go command there is
// nothing to pin (the tests that need one say so).
func pinGoEnv() error {
	gobin, err := exec.LookPath("go")
	if err != nil {
		return nil
	}
	names := []string{"GOCACHE", "GOMODCACHE", "GOPATH", "GOENV"}
	env, err := goEnv(gobin, names...)
	if err != nil {
		return err
	}
	for _, n := range names {
		if v := env[n]; v != "" {
			if err := os.Setenv(n, v); err != nil {
				return err
			}
		}
	}
	return os.Setenv("GOPROXY", "off")
}

// goEnv is what go env says of the variables names, as the go command
// resolves them in this process's environment.
func goEnv(gobin string, names ...string) (map[string]string, error) {
	out, err := exec.Command(gobin, append([]string{"env", "-json"}, names...)...).Output()
	if err != nil {
		return nil, fmt.Errorf("go env: %w", err)
	}
	var env map[string]string
	if err := json.Unmarshal(out, &env); err != nil {
		return nil, fmt.Errorf("go env: %w", err)
	}
	return env, nil
}
