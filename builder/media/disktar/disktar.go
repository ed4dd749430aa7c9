// Package disktar packs a raw disk image the way Google Compute Engine
// imports one: a single file named disk.raw in a gzip-compressed tar in
// GNU format (what `tar --format=oldgnu -czf image.tar.gz disk.raw`
// makes). Nothing depends on the clock or the host: the file's time is the
// source date, owners are 0, the gzip header carries no name or time.
package disktar

import (
	"archive/tar"
	"errors"
	"io"
	"time"

	"github.com/klauspost/compress/gzip"
)

// Name is the file inside the archive, as the importer requires.
const Name = "disk.raw"

// Write writes raw as disk.raw, dated sourceDate (seconds since 1970),
// in a gzipped tar to w.
func Write(w io.Writer, raw []byte, sourceDate int64) error {
	if len(raw) == 0 {
		return errors.New("disktar: empty disk image")
	}
	zw, err := gzip.NewWriterLevel(w, gzip.DefaultCompression)
	if err != nil {
		return err
	}
	tw := tar.NewWriter(zw)
	hdr := &tar.Header{
		Typeflag: tar.TypeReg,
		Name:     Name,
		Mode:     0o644,
		Size:     int64(len(raw)),
		ModTime:  time.Unix(sourceDate, 0).UTC(),
		Format:   tar.FormatGNU,
	}
	if err := tw.WriteHeader(hdr); err != nil {
		return err
	}
	if _, err := tw.Write(raw); err != nil {
		return err
	}
	if err := tw.Close(); err != nil {
		return err
	}
	return zw.Close()
}
