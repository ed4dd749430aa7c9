package blobcache

import (
	"os"
	"testing"
)

func TestDir(t *testing.T) {
	d := t.TempDir()
	c, err := Open(d)
	if err != nil {
		t.Fatal(err)
	}
	k := [32]byte{1, 2, 3}
	if _, ok := c.Get(k); ok {
		t.Fatal("hit in an empty cache")
	}
	c.Put(k, []byte("compressed"))
	if b, ok := c.Get(k); !ok || string(b) != "compressed" {
		t.Fatalf("got %q %v", b, ok)
	}
	// A damaged entry is a miss.
	p := c.path(k)
	b, _ := os.ReadFile(p)
	b[0] ^= 1
	os.WriteFile(p, b, 0o644)
	if _, ok := c.Get(k); ok {
		t.Error("damaged entry returned")
	}
	c.Put(k, []byte("again"))
	if b, ok := c.Get(k); !ok || string(b) != "again" {
		t.Errorf("damaged entry not replaced: %q %v", b, ok)
	}
}
