package rootfs

import (
	"context"
	"crypto/md5"
	"crypto/sha1"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"os"
	"runtime"
	"strings"
	"sync"

	"github.com/nodeforge/builder/api/report"
	"github.com/nodeforge/builder/internal/digest"
	"github.com/nodeforge/builder/pkgbase/cpio"
	"github.com/nodeforge/builder/pkgbase/rpmfile"
)

// LayOptions bounds what one package may put into the tree.
type LayOptions struct {
	// MaxInstallSize caps the sum of a package's file sizes (default 8 GiB):
	// a header or payload that promises more is refused before reading.
	MaxInstallSize int64
	// OnFile, when set, is given each regular file as soon as it is read
	// and checked (a Precompressor uses it). Files laid from a LayCache are
	// not given: their blocks were compressed before.
	OnFile func(*Node)
	// OnPackage, when set, hears of each package AddRPMs has laid: how
	// many of how many, in order, from the goroutine that called it.
	OnPackage func(laid, of int, r *PackageResult)

	arena *contentArena // AddRPMs's, for the files' contents
}

// PackageResult describes what one package contributed.
type PackageResult struct {
	Scripts  []rpmfile.Script
	Triggers []rpmfile.Trigger
	Files    int
	Bytes    int64
	Ghosts   []string // %ghost paths: declared, never in the payload
}

// AddRPM lays the payload of the package file at rpmPath into the tree,
// checking the package's digests as it streams, and every entry against
// the header's file list (owner, mode, digest). Scriptlets are returned,
// never run. On error the tree may hold part of the package: callers
// discard the tree (a build writes nothing on error).
func (t *Tree) AddRPM(rpmPath string, origin report.Origin, opts LayOptions) (*PackageResult, error) {
	l, err := readRPM(context.Background(), rpmPath, origin, opts)
	if err != nil {
		return nil, err
	}
	if err := t.addLaid(l, origin); err != nil {
		return nil, err
	}
	return l.res, nil
}

// laidPackage is a package read and checked, ready to add to a tree: its
// nodes in payload order (hard links last) and what else it brought.
type laidPackage struct {
	nodes []*Node
	res   *PackageResult
	total int64 // the sum of the header's file sizes
}

// addLaid adds a package's nodes; conflicts and writes through symlinks
// are refused here, against what the tree already holds.
func (t *Tree) addLaid(l *laidPackage, origin report.Origin) error {
	for _, n := range l.nodes {
		if err := t.Add(n); err != nil {
			var ce *ConflictError
			if !errors.As(err, &ce) && !errors.Is(err, ErrThroughSymlink) {
				err = fmt.Errorf("payload entry %s: %w", n.Path, err)
			}
			return fmt.Errorf("%s: %w", origin.Package, err)
		}
	}
	return nil
}

// readRPM reads and checks a package file into nodes; it stops at the
// next payload entry once ctx is done.
func readRPM(ctx context.Context, rpmPath string, origin report.Origin, opts LayOptions) (*laidPackage, error) {
	f, err := os.Open(rpmPath)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	p, err := rpmfile.Open(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", origin.Package, err)
	}
	info, err := rpmfile.ReadInfo(p.Header)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", origin.Package, err)
	}
	pr, err := newPayloadReader(ctx, info, opts.MaxInstallSize)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", origin.Package, err)
	}
	pr.origin = origin
	pr.arena = opts.arena
	// Contents are hashed and checked on other cores while the payload is
	// decompressed.
	pr.hashes = newHasher(runtime.NumCPU(), opts.OnFile)
	defer pr.hashes.wait()
	var layErr error // the first refusal, reported as itself rather than as a payload failure
	v, err := p.Verify(rpmfile.VerifyOptions{Entry: func(e *cpio.Entry, r io.Reader) error {
		if err := pr.entry(e, r); err != nil {
			layErr = fmt.Errorf("payload entry %s: %w", e.Name, err)
			return layErr
		}
		return nil
	}})
	// A file whose content failed its digest came before whatever else
	// failed: it is the reason to give.
	if herr := pr.hashes.wait(); herr != nil {
		layErr = herr
	}
	if layErr != nil {
		return nil, fmt.Errorf("%s: %w", origin.Package, layErr)
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", origin.Package, err)
	}
	if err := v.Err(false); err != nil {
		return nil, fmt.Errorf("%s: %w", origin.Package, err)
	}
	if err := pr.resolveLinks(); err != nil {
		return nil, fmt.Errorf("%s: %w", origin.Package, err)
	}
	if err := pr.complete(info); err != nil {
		return nil, fmt.Errorf("%s: %w", origin.Package, err)
	}
	return pr.lp, nil
}

// payloadReader turns the payload entries of one package into nodes,
// holding each to what the header says of its path.
type payloadReader struct {
	ctx      context.Context
	origin   report.Origin
	byPath   map[string]*rpmfile.File
	seen     map[string]bool
	max      int64 // the most the payload may unpack to
	unpacked int64
	hashes   *hasher
	arena    *contentArena // the contents' memory (nil: make)
	lp       *laidPackage
	// Hard links: rpm stores the data with the last entry of a link set.
	links     []pendingLink
	dataByIno map[uint32][]byte
}

type pendingLink struct {
	node *Node
	ino  uint32
}

// newPayloadReader indexes the header's files and refuses a package whose
// files add up to more than max (8 GiB when 0).
func newPayloadReader(ctx context.Context, info *rpmfile.Info, max int64) (*payloadReader, error) {
	if max <= 0 {
		max = 8 << 30
	}
	pr := &payloadReader{ctx: ctx, max: max, byPath: make(map[string]*rpmfile.File, len(info.Files)), seen: map[string]bool{},
		dataByIno: map[uint32][]byte{}, lp: &laidPackage{res: &PackageResult{Scripts: info.Scripts, Triggers: info.Triggers}}}
	for i := range info.Files {
		fl := &info.Files[i]
		if fl.Size < 0 {
			return nil, fmt.Errorf("%s has a negative size", fl.Path)
		}
		pr.lp.total += fl.Size
		pr.byPath[fl.Path] = fl
		if fl.Ghost {
			pr.lp.res.Ghosts = append(pr.lp.res.Ghosts, fl.Path)
		}
	}
	if pr.lp.total > max {
		return nil, fmt.Errorf("its files add up to %d bytes, more than the limit of %d", pr.lp.total, max)
	}
	return pr, nil
}

// entry takes one payload entry.
func (pr *payloadReader) entry(e *cpio.Entry, r io.Reader) error {
	if err := pr.ctx.Err(); err != nil {
		return err
	}
	raw := e.Name
	if strings.HasPrefix(raw, "/") {
		// rpmpack (and old rpm builders) write absolute member names; rpm
		// matches them against the header. Accept one only when it is
		// exactly a path the header lists.
		if _, ok := pr.byPath[raw]; ok {
			raw = "." + raw
		}
	}
	name, err := CleanPath(raw)
	if err != nil {
		return err
	}
	hf, ok := pr.byPath[name]
	if !ok {
		return fmt.Errorf("payload entry %s is not in the header's file list", name)
	}
	if pr.seen[name] {
		return fmt.Errorf("payload holds %s twice", name)
	}
	pr.seen[name] = true
	if e.Mode != hf.Mode {
		return fmt.Errorf("payload mode %o differs from the header's %o", e.Mode, hf.Mode)
	}
	n, err := headerNode(name, hf, pr.origin)
	if err != nil {
		return err
	}
	switch e.Mode & cpio.TypeMask {
	case cpio.TypeReg:
		if done, err := pr.regular(n, e, r, hf); err != nil || done {
			return err
		}
	case cpio.TypeDir:
		n.Kind = KindDir
	case cpio.TypeLink:
		n.Kind = KindSymlink
		target, err := readAllLimit(r, make([]byte, 4096))
		if err != nil {
			return err
		}
		n.Target = string(target)
		if n.Target == "" {
			return errors.New("symlink with an empty target")
		}
		if hf.LinkTo != "" && hf.LinkTo != n.Target {
			return fmt.Errorf("symlink target %q differs from the header's %q", n.Target, hf.LinkTo)
		}
	case cpio.TypeChr, cpio.TypeBlk:
		n.Kind = KindCharDev
		if e.Mode&cpio.TypeMask == cpio.TypeBlk {
			n.Kind = KindBlockDev
		}
		n.Rdev = e.RdevMajor<<8 | e.RdevMinor
	case cpio.TypeFifo:
		n.Kind = KindFifo
	case cpio.TypeSock:
		n.Kind = KindSocket
	default:
		return fmt.Errorf("unknown file type %o", e.Mode&cpio.TypeMask)
	}
	pr.lp.res.Files++
	pr.lp.nodes = append(pr.lp.nodes, n)
	return nil
}

// headerNode is a node with the attributes the header gives the path.
func headerNode(name string, hf *rpmfile.File, origin report.Origin) (*Node, error) {
	n := &Node{Path: name, Mode: hf.Mode & 0o7777, User: hf.User, Group: hf.Group, Origin: origin,
		Config: hf.Config, Doc: hf.Doc, FileDigest: hf.Digest, FileDigestAlgo: hf.DigestAlgo}
	if n.User == "" {
		n.User = "root"
	}
	if n.Group == "" {
		n.Group = "root"
	}
	if hf.Caps != "" {
		x, err := CapabilityXattr(hf.Caps)
		if err != nil {
			return nil, err
		}
		if x != nil {
			n.Xattrs = map[string][]byte{"security.capability": x}
		}
	}
	return n, nil
}

// regular reads a regular file's content; a member of a hard-link set
// waits for the set's data (done is then true: the node is added later).
func (pr *payloadReader) regular(n *Node, e *cpio.Entry, r io.Reader, hf *rpmfile.File) (done bool, err error) {
	n.Kind = KindFile
	if e.Size > hf.Size {
		return false, fmt.Errorf("payload entry is %d bytes, the header says %d", e.Size, hf.Size)
	}
	data, err := readAllLimit(r, pr.arena.alloc(e.Size))
	if err != nil {
		return false, err
	}
	pr.unpacked += int64(len(data))
	if pr.unpacked > pr.max {
		return false, fmt.Errorf("payload unpacks to more than %d bytes", pr.max)
	}
	if e.Nlink > 1 {
		pr.links = append(pr.links, pendingLink{n, e.Ino})
		if len(data) > 0 {
			pr.dataByIno[e.Ino] = data
		}
		return true, nil
	}
	if int64(len(data)) != hf.Size {
		return false, fmt.Errorf("payload entry is %d bytes, the header says %d", len(data), hf.Size)
	}
	n.Data = data
	pr.hashes.check(n, hf, e.Name)
	return false, nil
}

// resolveLinks completes the hard-link sets: every member gets the data;
// the group is named by its smallest path so writers emit one file and
// links to it.
func (pr *payloadReader) resolveLinks() error {
	groups := map[uint32]string{}
	for _, l := range pr.links {
		if g, ok := groups[l.ino]; !ok || l.node.Path < g {
			groups[l.ino] = l.node.Path
		}
	}
	for _, l := range pr.links {
		data := pr.dataByIno[l.ino]
		hf := pr.byPath[l.node.Path]
		if int64(len(data)) != hf.Size {
			return fmt.Errorf("%s: hard-linked data is %d bytes, the header says %d", l.node.Path, len(data), hf.Size)
		}
		sum := digest.SHA256Hex(data)
		if err := checkDigest(data, sum, hf); err != nil {
			return fmt.Errorf("%s: %w", l.node.Path, err)
		}
		l.node.Kind, l.node.Data, l.node.Digest, l.node.LinkGroup = KindFile, data, sum, groups[l.ino]
		pr.lp.res.Files++
		pr.lp.nodes = append(pr.lp.nodes, l.node)
	}
	return nil
}

// complete checks that the payload held every file of the header but its
// ghosts, and counts the bytes laid.
func (pr *payloadReader) complete(info *rpmfile.Info) error {
	for _, fl := range info.Files {
		if !pr.seen[fl.Path] && !fl.Ghost {
			return fmt.Errorf("%s is in the header's file list but not in the payload", fl.Path)
		}
		if pr.seen[fl.Path] && fl.Mode&cpio.TypeMask == cpio.TypeReg {
			pr.lp.res.Bytes += fl.Size
		}
	}
	return nil
}

// hasher computes files' sha256 and checks them against the header's
// digests in parallel, keeping the failure of the earliest entry.
type hasher struct {
	tasks  chan hashTask
	wg     sync.WaitGroup
	onFile func(*Node)
	mu     sync.Mutex
	seq    int
	errSeq int
	err    error
	done   bool
}

type hashTask struct {
	seq  int
	n    *Node
	hf   *rpmfile.File
	name string
}

func newHasher(workers int, onFile func(*Node)) *hasher {
	h := &hasher{tasks: make(chan hashTask, 64), onFile: onFile, errSeq: -1}
	for range max(workers, 1) {
		h.wg.Add(1)
		go func() {
			defer h.wg.Done()
			for t := range h.tasks {
				sum := digest.SHA256Hex(t.n.Data)
				if err := checkDigest(t.n.Data, sum, t.hf); err != nil {
					h.mu.Lock()
					if h.errSeq < 0 || t.seq < h.errSeq {
						h.errSeq, h.err = t.seq, fmt.Errorf("payload entry %s: %w", t.name, err)
					}
					h.mu.Unlock()
					continue
				}
				t.n.Digest = sum
				if h.onFile != nil {
					h.onFile(t.n)
				}
			}
		}()
	}
	return h
}

// check queues a file node whose Data is read.
func (h *hasher) check(n *Node, hf *rpmfile.File, name string) {
	h.tasks <- hashTask{seq: h.seq, n: n, hf: hf, name: name}
	h.seq++
}

// wait returns when every queued file is checked, with the first failure.
func (h *hasher) wait() error {
	if !h.done {
		h.done = true
		close(h.tasks)
		h.wg.Wait()
	}
	return h.err
}

// readAllLimit reads exactly what r holds into b, refusing more than
// len(b) bytes. b is sized by what the entry declares (bounded by the
// header before): the buffer is allocated once.
func readAllLimit(r io.Reader, b []byte) ([]byte, error) {
	k, err := io.ReadFull(r, b)
	if err == io.ErrUnexpectedEOF || err == io.EOF {
		return b[:k], nil
	}
	if err != nil {
		return nil, err
	}
	var one [1]byte
	if m, _ := io.ReadFull(r, one[:]); m > 0 {
		return nil, fmt.Errorf("entry holds more than %d bytes", len(b))
	}
	return b, nil
}

// checkDigest compares file content with the header's per-file digest;
// sha256 is the content's sha256, already computed, so sha256 packages
// (every current rpm) hash each file once.
func checkDigest(data []byte, sum string, hf *rpmfile.File) error {
	if hf.Digest == "" {
		return nil
	}
	if hf.DigestAlgo == "sha256" {
		if sum != hf.Digest {
			return fmt.Errorf("content sha256 %s differs from the header's %s", sum, hf.Digest)
		}
		return nil
	}
	var h hash.Hash
	switch hf.DigestAlgo {
	case "md5":
		h = md5.New()
	case "sha1":
		h = sha1.New()
	case "sha512":
		h = sha512.New()
	case "sha384":
		h = sha512.New384()
	case "sha224":
		h = sha256.New224()
	default:
		return fmt.Errorf("unknown file digest algorithm %s", hf.DigestAlgo)
	}
	h.Write(data)
	if got := hex.EncodeToString(h.Sum(nil)); got != hf.Digest {
		return fmt.Errorf("content %s %s differs from the header's %s", hf.DigestAlgo, got, hf.Digest)
	}
	return nil
}
