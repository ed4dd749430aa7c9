package kernel

import (
	"encoding/binary"
	"fmt"
)

// The .bin files are kmod's index format (libkmod-index.c): a radix trie
// written post-order. This is depmod's writer (tools/depmod.c, taken from
// module-init-tools) transcribed, so equal inputs give equal bytes:
//
//	uint32 magic 0xB007F457, uint32 version 0x00020001, uint32 root offset
//	node: [prefix NUL] [first last uint32 children[last-first+1]]
//	      [uint32 count {uint32 priority, value NUL}...]
//
// All integers are big-endian; the node flags live in the offset's top bits.
const (
	indexMagic    = 0xB007F457
	indexVersion  = 0x00020001
	indexChildMax = 128

	nodePrefix = 0x80000000
	nodeValues = 0x40000000
	nodeChilds = 0x20000000
)

type indexValue struct {
	priority uint32
	value    string
}

type indexNode struct {
	prefix      string
	values      []indexValue
	first, last int // first == indexChildMax: no children
	children    [indexChildMax]*indexNode
}

func newIndex() *indexNode { return &indexNode{first: indexChildMax} }

// addValue keeps values sorted by priority; a value goes before the values
// of equal priority already there, as depmod's linked-list insert does.
func (n *indexNode) addValue(value string, priority uint32) {
	i := 0
	for i < len(n.values) && n.values[i].priority < priority {
		i++
	}
	n.values = append(n.values, indexValue{})
	copy(n.values[i+1:], n.values[i:])
	n.values[i] = indexValue{priority, value}
}

// checkKey rejects bytes the trie cannot index; depmod indexes children by
// signed char and would corrupt memory on them.
func checkKey(key string) error {
	for i := 0; i < len(key); i++ {
		if key[i] >= indexChildMax || key[i] == 0 {
			return fmt.Errorf("index key %q: byte 0x%02x is not 7-bit ASCII", key, key[i])
		}
	}
	return nil
}

// insert is depmod's index_insert.
func (root *indexNode) insert(key, value string, priority uint32) error {
	if err := checkKey(key); err != nil {
		return err
	}
	node, i := root, 0
	for {
		// Make node.prefix a prefix of key[i:], splitting node if not.
		j := 0
		for ; j < len(node.prefix); j++ {
			ch := node.prefix[j]
			if i+j < len(key) && key[i+j] == ch {
				continue
			}
			child := *node
			child.prefix = node.prefix[j+1:]
			*node = indexNode{prefix: node.prefix[:j], first: int(ch), last: int(ch)}
			node.children[ch] = &child
			break
		}
		i += j
		if i == len(key) {
			node.addValue(value, priority)
			return nil
		}
		ch := int(key[i])
		if node.children[ch] == nil {
			// A childless node has first = 128, last = 0, as in depmod.
			node.first = min(node.first, ch)
			node.last = max(node.last, ch)
			child := &indexNode{prefix: key[i+1:], first: indexChildMax}
			child.addValue(value, priority)
			node.children[ch] = child
			return nil
		}
		node = node.children[ch]
		i++
	}
}

// bytes serialises the index as depmod's index_write does.
func (root *indexNode) bytes() ([]byte, error) {
	out := make([]byte, 12, 4096)
	binary.BigEndian.PutUint32(out[0:], indexMagic)
	binary.BigEndian.PutUint32(out[4:], indexVersion)
	var write func(n *indexNode) uint32
	write = func(n *indexNode) uint32 {
		if n == nil {
			return 0
		}
		var childOffs []uint32
		if n.first < indexChildMax {
			childOffs = make([]uint32, n.last-n.first+1)
			for i := range childOffs {
				childOffs[i] = write(n.children[n.first+i])
			}
		}
		off := uint32(len(out))
		if n.prefix != "" {
			out = append(out, n.prefix...)
			out = append(out, 0)
			off |= nodePrefix
		}
		if childOffs != nil {
			out = append(out, byte(n.first), byte(n.last))
			for _, c := range childOffs {
				out = binary.BigEndian.AppendUint32(out, c)
			}
			off |= nodeChilds
		}
		if len(n.values) > 0 {
			out = binary.BigEndian.AppendUint32(out, uint32(len(n.values)))
			for _, v := range n.values {
				out = binary.BigEndian.AppendUint32(out, v.priority)
				out = append(out, v.value...)
				out = append(out, 0)
			}
			off |= nodeValues
		}
		return off
	}
	rootOff := write(root) // before indexing out: write reallocates it
	binary.BigEndian.PutUint32(out[8:], rootOff)
	if len(out) > 0x0FFFFFFF {
		// Offsets share their word with the node flags.
		return nil, fmt.Errorf("index of %d bytes exceeds the format's 256 MiB", len(out))
	}
	return out, nil
}
