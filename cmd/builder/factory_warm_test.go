package main

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nodeforge/builder/factory"
	"github.com/nodeforge/builder/factory/server"
	"github.com/nodeforge/builder/internal/testutil"
)

// servedFactory is the factory factory serve runs on args (the same flags,
// the same builder digest in its keys), behind a test server.
func servedFactory(t *testing.T, args ...string) (*server.Server, *httptest.Server) {
	t.Helper()
	cmd, f := factoryServeCommand()
	if err := cmd.ParseFlags(args); err != nil {
		t.Fatal(err)
	}
	if err := f.settle(cmd.Flags()); err != nil {
		t.Fatal(err)
	}
	o, err := f.serverOptions(context.Background(), t.TempDir(), slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	srv, err := server.New(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	testutil.WaitBuildsAtEnd(t, srv.WaitBuilds)
	hs := httptest.NewServer(srv.Handler())
	t.Cleanup(hs.Close)
	return srv, hs
}

// builderJSON runs builder with args (a command printing --json) as a
// child process and decodes what it prints into v. The child is built
// without the race detector: here warm and gc are steps of end-to-end
// tests; the factory package's own tests run them under it.
func builderJSON(t *testing.T, v any, args ...string) []byte {
	t.Helper()
	return runJSON(t, builderStdout, v, args...)
}

// runJSON runs builder with run and decodes what it prints into v.
func runJSON(t *testing.T, run func(*testing.T, ...string) (string, error), v any, args ...string) []byte {
	t.Helper()
	out, err := run(t, args...)
	if err != nil {
		t.Fatalf("builder %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	if err := json.Unmarshal([]byte(out), v); err != nil {
		t.Fatalf("builder %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return []byte(out)
}

// warmCmd runs builder factory warm --json and returns its report.
func warmCmd(t *testing.T, args ...string) *factory.WarmReport {
	t.Helper()
	var rep factory.WarmReport
	// In this process: its cache entries name the builder by its
	// executable's digest, and the factories of the tests run here too.
	validateSchema(t, "commands.schema.json#/$defs/warmReport", runJSON(t, runBuilder, &rep, append([]string{"factory", "warm", "--json"}, args...)...))
	return &rep
}

// TestFactoryWarm: after warm (the default artifacts of metal), a factory
// serve on the same cache answers every warmed artifact and the installer
// image with zero builds, byte for byte what builder image --release
// writes; a second warm builds nothing; a version the config file marks
// broken, or an unknown schematic, stops warm before any build, naming it.
func TestFactoryWarm(t *testing.T) {
	testutil.Slow(t)
	t.Parallel() // see TestMain
	d := newDemoRelease(t)
	if _, err := d.publish(t); err != nil {
		t.Fatal(err)
	}
	layout := filepath.Join(d.dir, "release", "dev")
	stores := []string{"--release", "oci:" + layout, "--key", d.devPub}
	_, hs := servedFactory(t, stores...)
	f := &factoryFixture{d: d, layout: layout, hs: hs}
	schYAML := "customization:\n  extraKernelArgs: [console=ttyS0]\n  systemExtensions:\n    officialExtensions: [zfs]\n"
	id := f.postSchematic(t, schYAML)
	list := filepath.Join(t.TempDir(), "top.txt")
	os.WriteFile(list, []byte("# the most requested\n"+id+"  # zfs\n\n"), 0o644)

	warm := append([]string{"--signing-key", d.devKey, "--version", demoVersion, "--schematics", list}, stores...)
	rep := warmCmd(t, warm...)
	// kernel, initramfs, cmdline, iso, raw, qcow2 of the one architecture,
	// and the installer.
	if len(rep.Items) != 7 || rep.Built != 7 || rep.Cached != 0 {
		t.Fatalf("warm: %+v", rep)
	}
	// Talos's spelling of the version names the same entries.
	warm[3] = "v" + demoVersion
	if again := warmCmd(t, warm...); again.Built != 0 || again.Cached != 7 || again.Version != demoVersion {
		t.Errorf("second warm, of %s: %d built, %d cached, version %s", warm[3], again.Built, again.Cached, again.Version)
	}

	srv, hs := servedFactory(t, append(stores, "--signing-key", d.devKey)...)
	sch := filepath.Join(t.TempDir(), "s.yaml")
	os.WriteFile(sch, []byte(schYAML), 0o644)
	out := t.TempDir()
	if o, err := builderProcess(t, "image", "-q", "--release", "oci:"+layout, "--version", demoVersion, "--key", d.devPub, "--schematic", sch, "--platform", "metal", "--kind", "all", "--out", out); err != nil {
		t.Fatalf("image --release: %v\n%s", err, o)
	}
	want := mediaFiles(t, out)
	for _, it := range rep.Items {
		if strings.HasPrefix(it.Artifact, "installer/") {
			continue
		}
		if got := getBody(t, hs.URL+"/image/"+id+"/"+demoVersion+"/"+it.Artifact); !bytes.Equal([]byte(got), want[it.Artifact]) {
			t.Errorf("%s: %d bytes served, builder image wrote %d", it.Artifact, len(got), len(want[it.Artifact]))
		}
	}
	f.hs = hs
	f.host = strings.TrimPrefix(hs.URL, "http://")
	installer := f.cliInstallers(t, schYAML, "metal")["installer"]
	if got := strings.TrimSpace(judge(t, "crane", "digest", "--insecure", f.host+"/installer/"+id+":"+demoVersion)); got != installer {
		t.Errorf("installer: the factory serves %s, builder image wrote %s", got, installer)
	}
	if st := srv.Stats(); st.Builds != 0 || st.Hits < 7 {
		t.Errorf("serving the warmed artifacts: %+v, want no build", st)
	}

	cfg := filepath.Join(t.TempDir(), "factory.yaml")
	os.WriteFile(cfg, []byte("broken-versions: [v"+demoVersion+"]\n"), 0o644)
	if o, err := runBuilder(t, append([]string{"factory", "warm", "--config", cfg}, warm...)...); err == nil || !strings.Contains(err.Error(), "marked broken") {
		t.Errorf("a version the config marks broken: %v\n%s", err, o)
	}

	os.WriteFile(list, []byte(id+"\n"+strings.Repeat("0", 64)+"\n"), 0o644)
	if o, err := runBuilder(t, append([]string{"factory", "warm"}, warm...)...); err == nil || !strings.Contains(err.Error(), strings.Repeat("0", 64)) {
		t.Errorf("an unknown schematic: %v\n%s", err, o)
	}
}
