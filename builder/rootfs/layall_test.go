package rootfs

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/nodeforge/builder/api/report"
	"github.com/nodeforge/builder/pkgbase/demobase"
)

// treeView is what laying decides: each path with its kind, content,
// target and the packages that shipped it.
func treeView(t *Tree) []string {
	var out []string
	for _, n := range t.Nodes() {
		out = append(out, fmt.Sprintf("%s %v %o %s %s %s %v", n.Path, n.Kind, n.Mode, n.Digest, n.Target, n.Origin.Package, n.Owners))
	}
	return out
}

// Packages read in parallel, in any order, lay the tree that laying them
// one by one lays.
func TestAddRPMsMatchesOneByOne(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "demo")
	if err := demobase.Write(dir); err != nil {
		t.Fatal(err)
	}
	files, _ := filepath.Glob(filepath.Join(dir, "alt", "x86_64", "RPMS.classic", "*.rpm"))
	var pkgs []RPMToLay
	for _, f := range files {
		if b := filepath.Base(f); !strings.Contains(b, "6.12.30") && !strings.Contains(b, "396318") {
			pkgs = append(pkgs, RPMToLay{Path: f, Origin: report.Origin{Package: b}})
		}
	}
	if len(pkgs) < 3 {
		t.Fatalf("demo packages missing: %v", files)
	}
	one := New()
	for _, p := range pkgs {
		if _, err := one.AddRPM(p.Path, p.Origin, LayOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for _, workers := range []int{1, 2, 5} {
		many := New()
		res, err := many.AddRPMs(context.Background(), pkgs, LayOptions{}, nil, workers)
		if err != nil {
			t.Fatal(err)
		}
		if len(res) != len(pkgs) || res[0] == nil {
			t.Fatalf("%d workers: %d results", workers, len(res))
		}
		if !reflect.DeepEqual(treeView(many), treeView(one)) {
			t.Errorf("%d workers: the tree differs from laying one by one", workers)
		}
	}
}

// The error is the one laying in order meets first, whichever package a
// worker finished first.
func TestAddRPMsFirstErrorInOrder(t *testing.T) {
	good := craftRPM(t, "first", []craftFile{{path: "/etc/app.conf", mode: 0o100644, data: "a"}})
	conflict := craftRPM(t, "second", []craftFile{{path: "/etc/app.conf", mode: 0o100644, data: "b"}})
	evil := craftRPM(t, "third", []craftFile{{path: "/etc/x", cpio: "./../../etc/x", mode: 0o100644, data: "evil"}})
	pkgs := []RPMToLay{{Path: good, Origin: report.Origin{Package: "first"}}, {Path: conflict, Origin: report.Origin{Package: "second"}}, {Path: evil, Origin: report.Origin{Package: "third"}}}
	for range 20 {
		_, err := New().AddRPMs(context.Background(), pkgs, LayOptions{}, nil, 3)
		var ce *ConflictError
		if !errors.As(err, &ce) {
			t.Fatalf("want the conflict of the second package, got %v", err)
		}
	}
	_, err := New().AddRPMs(context.Background(), pkgs[2:], LayOptions{}, nil, 3)
	if err == nil || !strings.Contains(err.Error(), "climbs out") {
		t.Fatalf("want the traversal refused, got %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := New().AddRPMs(ctx, pkgs[:1], LayOptions{}, nil, 2); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled: got %v", err)
	}
}
