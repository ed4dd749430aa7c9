package main

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/nodeforge/builder/internal/progress"
	"github.com/nodeforge/builder/internal/testutil"
	"github.com/nodeforge/builder/pkgbase/cache"
)

// TestProgressView: without a terminal each stage prints one line when it
// ends, with its count and bytes; --quiet prints nothing. Updates come
// from several goroutines.
func TestProgressView(t *testing.T) {
	run := func(v *progressView) {
		var wg sync.WaitGroup
		for i := range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				v.cacheEvent(cache.Event{Kind: "done", Name: fmt.Sprint("p", i), Total: 1 << 20})
			}()
		}
		wg.Wait()
		v.logf("fetched")
		for i := int64(1); i <= 5; i++ {
			v.update(progress.Update{Stage: "x86_64: laying packages", Unit: "packages", Done: i, Total: 5, Bytes: i << 20})
		}
		v.update(progress.Update{Stage: "x86_64: laying packages", Unit: "packages", Done: 5, Total: 5, Bytes: 5 << 20, Finished: true})
		v.logf("after laying")
		v.update(progress.Update{Stage: "pushing", Unit: "images", Done: 1, Total: 3})
		v.logf("while pushing")
		v.end()
		v.logf("the end")
	}
	var plain bytes.Buffer
	run(newProgressView(&plain, false)) // stderr of a test is no terminal
	for _, want := range []string{"fetched\n", "downloading packages: 8 packages (0 already cached), 8.0 MiB", "x86_64: laying packages: 5/5 packages, 5.0 MiB",
		"after laying\n", "while pushing\n", "pushing: 1/3 images in", "the end\n"} {
		if !strings.Contains(plain.String(), want) {
			t.Errorf("plain output lacks %q:\n%s", want, plain.String())
		}
	}
	var quiet bytes.Buffer
	run(newProgressView(&quiet, true))
	if quiet.Len() != 0 {
		t.Errorf("--quiet printed:\n%s", quiet.String())
	}
}

// TestProgressOnTerminal: a build on a real terminal (script(1) gives it
// one, 120 columns wide) draws a live line per stage with its counts, and
// keeps every log line written while they are drawn.
func TestProgressOnTerminal(t *testing.T) {
	script := testutil.NeedTool(t, "script")
	dir, spec, cacheDir := lockedDemo(t)
	warmBuilder(t)
	bin := binPath
	if bin == "" {
		testutil.Missing(t, "a child builder binary (go build of cmd/builder) to run on a terminal")
	}
	typescript := filepath.Join(t.TempDir(), "typescript")
	cmdline := fmt.Sprintf("stty cols 120 rows 40; %s build --spec %s --cache %s --out %s >/dev/null", bin, spec, cacheDir, filepath.Join(dir, "out"))
	if out, err := exec.Command(script, "-qec", cmdline, typescript).CombinedOutput(); err != nil {
		t.Fatalf("script: %v\n%s", err, out)
	}
	b, err := os.ReadFile(typescript)
	if err != nil {
		t.Fatal(err)
	}
	got := string(b)
	for _, want := range []string{"x86_64: laying packages", "/13 packages", "x86_64: writing rootfs.sqsh", "[====", "94/94 paths",
		"x86_64: fetching 30 locked packages: ", "x86_64: assembling the root filesystem: ", "writing the OCI layouts and report.json: "} {
		if !strings.Contains(got, want) {
			t.Errorf("the terminal shows no %q:\n%s", want, got)
		}
	}
}
