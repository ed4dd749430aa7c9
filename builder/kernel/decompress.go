package kernel

import (
	"bytes"
	"compress/gzip"
	"fmt"
	"io"
	"regexp"
	"strings"

	"github.com/klauspost/compress/zstd"
	"github.com/ulikunitz/xz"
)

// MaxModuleSize bounds a decompressed module. The largest real modules are
// a few tens of MiB; anything larger is treated as a decompression bomb.
const MaxModuleSize = 512 << 20

// maxDecompressed is the bound in force; tests lower it.
var maxDecompressed int64 = MaxModuleSize

// moduleExts are the file name suffixes depmod treats as modules, in the
// order kmod tests them. kmod 30 as built by Debian lacks zlib, so it would
// skip .ko.gz; we accept it because other kmod builds do.
var moduleExts = []string{".ko", ".ko.gz", ".ko.xz", ".ko.zst"}

// moduleExt returns the module suffix of name, or "" if it is not a module.
// Like kmod, the name must be longer than the suffix.
func moduleExt(name string) string {
	for _, e := range moduleExts {
		if len(name) > len(e) && strings.HasSuffix(name, e) {
			return e
		}
	}
	return ""
}

// IsModule says whether a file name is a kernel module's, as depmod
// judges it.
func IsModule(name string) bool { return moduleExt(name) != "" }

var moduleDirRE = regexp.MustCompile(`^/(?:usr/)?lib/modules/([^/]+)(/|$)`)

// ModuleDirVersion returns the kernel release a path's module directory
// names (/lib/modules/<release>/... or /usr/lib/modules/<release>/...,
// the directory itself included), or "" for a path outside one.
func ModuleDirVersion(p string) string {
	if m := moduleDirRE.FindStringSubmatch(p); m != nil {
		return m[1]
	}
	return ""
}

// decompress returns the ELF image of a module file, chosen by suffix.
func decompress(name string, data []byte) ([]byte, error) {
	var r io.Reader
	ext := moduleExt(name)
	switch ext {
	case ".ko":
		return data, nil
	case ".ko.gz":
		z, err := gzip.NewReader(bytes.NewReader(data))
		if err != nil {
			return nil, fmt.Errorf("kernel: %s: gzip: %w", name, err)
		}
		r = z
	case ".ko.xz":
		z, err := xz.NewReader(bytes.NewReader(data))
		if err != nil {
			return nil, fmt.Errorf("kernel: %s: xz: %w", name, err)
		}
		r = z
	case ".ko.zst":
		// The window cap keeps a hostile frame header from reserving
		// more memory than the output bound allows.
		z, err := zstd.NewReader(bytes.NewReader(data),
			zstd.WithDecoderConcurrency(1),
			zstd.WithDecoderMaxWindow(64<<20),
			zstd.WithDecoderMaxMemory(uint64(maxDecompressed)))
		if err != nil {
			return nil, fmt.Errorf("kernel: %s: zstd: %w", name, err)
		}
		defer z.Close()
		r = z
	default:
		return nil, fmt.Errorf("kernel: %s: not a module file name (want .ko, .ko.gz, .ko.xz or .ko.zst)", name)
	}
	var out bytes.Buffer
	n, err := io.Copy(&out, io.LimitReader(r, maxDecompressed+1))
	if err != nil {
		return nil, fmt.Errorf("kernel: %s: decompress %s: %w", name, ext[len(".ko."):], err)
	}
	if n > maxDecompressed {
		return nil, fmt.Errorf("kernel: %s: decompressed size exceeds %d bytes; refusing a possible decompression bomb", name, maxDecompressed)
	}
	return out.Bytes(), nil
}
