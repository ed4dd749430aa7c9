// Package meta writes the META partition's contents: key/value pairs in
// Talos's extended ADV layout, so a node OS that reads Talos META (and
// Talos's tools) sees the schematic's initial values.
//
// One copy is 256 KiB, big-endian: magic 0x5a4b3c2d, then for each key a
// 4-byte tag, a 4-byte length and the value, zeros up to the last 36
// bytes, which hold the sha256 of the copy (computed with those 32 bytes
// zero) and magic 0xa5b4c3d2. The partition starts with two identical
// copies. Keys are written in ascending order, so the bytes are
// reproducible.
package meta

import (
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
)

// Layout constants.
const (
	CopyLength = 256 * 1024
	Size       = 2 * CopyLength
	magic1     = 0x5a4b3c2d
	magic2     = 0xa5b4c3d2
)

// Encode renders both copies of the values.
func Encode(values map[uint8][]byte) ([]byte, error) {
	buf := make([]byte, CopyLength)
	binary.BigEndian.PutUint32(buf, magic1)
	binary.BigEndian.PutUint32(buf[CopyLength-4:], magic2)
	keys := make([]int, 0, len(values))
	for k := range values {
		keys = append(keys, int(k))
	}
	sort.Ints(keys)
	data := buf[4 : CopyLength-36]
	for _, k := range keys {
		if k == 0 {
			return nil, fmt.Errorf("meta: key 0 ends the list and cannot hold a value")
		}
		v := values[uint8(k)]
		if len(v)+8 > len(data) {
			return nil, fmt.Errorf("meta: the values do not fit in %d bytes", CopyLength-40)
		}
		binary.BigEndian.PutUint32(data, uint32(k))
		binary.BigEndian.PutUint32(data[4:], uint32(len(v)))
		copy(data[8:], v)
		data = data[8+len(v):]
	}
	sum := sha256.Sum256(buf)
	copy(buf[CopyLength-36:], sum[:])
	return append(buf, buf...), nil
}

// Decode reads the first valid copy.
func Decode(b []byte) (map[uint8][]byte, error) {
	var firstErr error
	for c := 0; c < 2 && (c+1)*CopyLength <= len(b); c++ {
		v, err := decodeCopy(append([]byte(nil), b[c*CopyLength:(c+1)*CopyLength]...))
		if err == nil {
			return v, nil
		}
		if firstErr == nil {
			firstErr = err
		}
	}
	if firstErr == nil {
		firstErr = fmt.Errorf("meta: %d bytes, want %d", len(b), Size)
	}
	return nil, firstErr
}

func decodeCopy(buf []byte) (map[uint8][]byte, error) {
	if binary.BigEndian.Uint32(buf) != magic1 || binary.BigEndian.Uint32(buf[CopyLength-4:]) != magic2 {
		return nil, fmt.Errorf("meta: bad magic")
	}
	want := append([]byte(nil), buf[CopyLength-36:CopyLength-4]...)
	clear(buf[CopyLength-36 : CopyLength-4])
	if got := sha256.Sum256(buf); string(got[:]) != string(want) {
		return nil, fmt.Errorf("meta: checksum mismatch")
	}
	out := map[uint8][]byte{}
	data := buf[4 : CopyLength-36]
	for len(data) >= 8 {
		tag := binary.BigEndian.Uint32(data)
		if tag == 0 {
			break
		}
		size := binary.BigEndian.Uint32(data[4:])
		if uint64(size)+8 > uint64(len(data)) || tag > 0xff {
			return nil, fmt.Errorf("meta: tag %d of %d bytes runs past the end", tag, size)
		}
		out[uint8(tag)] = append([]byte(nil), data[8:8+size]...)
		data = data[8+size:]
	}
	return out, nil
}

// Value is one META key and its value, in the order a schematic lists
// them.
type Value struct {
	Key   uint8
	Value string
}

// envGzipOver is the size above which Env compresses the values.
const envGzipOver = 256

// Env encodes values for PREFIX.environment=INSTALLER_META_BASE64=<Env>,
// as Talos's imager encodes them for boot media that have no META
// partition (PXE, ISO): "0x<key in hex>=<value>" joined by ';', gzipped
// (the standard library's, best compression) when longer than 256 bytes,
// in standard base64. Talos's installer decodes it and writes the values
// to the META partition of the disk it installs to.
func Env(values []Value) string {
	parts := make([]string, len(values))
	for i, v := range values {
		parts[i] = fmt.Sprintf("0x%x=%s", v.Key, v.Value)
	}
	raw := []byte(strings.Join(parts, ";"))
	if len(raw) > envGzipOver {
		var b bytes.Buffer
		zw, _ := gzip.NewWriterLevel(&b, gzip.BestCompression) // a valid level: no error
		zw.Write(raw)                                          // a bytes.Buffer: no error
		zw.Close()
		raw = b.Bytes()
	}
	return base64.StdEncoding.EncodeToString(raw)
}

// DecodeEnv reads what Env wrote, as Talos's installer does.
func DecodeEnv(s string) ([]Value, error) {
	b, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		return nil, fmt.Errorf("meta: %w", err)
	}
	if len(b) == 0 {
		return nil, nil
	}
	if len(b) >= 10 && b[0] == 0x1f && b[1] == 0x8b {
		zr, err := gzip.NewReader(bytes.NewReader(b))
		if err != nil {
			return nil, fmt.Errorf("meta: %w", err)
		}
		// One byte past a copy's length tells a longer input from one that fits.
		if b, err = io.ReadAll(io.LimitReader(zr, CopyLength+1)); err != nil {
			return nil, fmt.Errorf("meta: %w", err)
		}
		if len(b) > CopyLength {
			return nil, fmt.Errorf("meta: the gzipped values are longer than a META copy (%d bytes)", CopyLength)
		}
	}
	var out []Value
	for _, part := range strings.Split(string(b), ";") {
		k, v, ok := strings.Cut(part, "=")
		key, err := strconv.ParseUint(k, 0, 8)
		if !ok || err != nil {
			return nil, fmt.Errorf("meta: %q is not KEY=VALUE with a key of 0 to 0xff", part)
		}
		out = append(out, Value{Key: uint8(key), Value: v})
	}
	return out, nil
}
