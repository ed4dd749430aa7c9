package lock

import (
	"os"
	"path/filepath"
	"testing"
)

func TestReadRejects(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "x.lock.json")
	for _, body := range []string{`{"lockVersion": 9}`, `{"lockVersion":2,"bogus":1}`, `not json`,
		`{"lockVersion":2,"architectures":{"x86_64":{"packages":[{"nevra":"a-1-1.x86_64","sha256":"00","location":"a.rpm"}],"components":{"rootfs":["b-1-1.x86_64"]}}}}`} {
		os.WriteFile(p, []byte(body), 0o644)
		if _, err := Read(p); err == nil {
			t.Errorf("%s: accepted", body)
		}
	}
}
