package kernel

import (
	"sort"
)

// depmod emits modules not listed in modules.order, and every symbol, in
// the iteration order of kmod's own hash table (shared/hash.c): buckets in
// index order, keys inside a bucket sorted by strcmp. Reproducing it is
// what makes our output byte-identical to depmod's.

// kmodHash is hash_superfast from kmod's shared/hash.c, including the sign
// extension of bytes >= 0x80 (char is signed on the platforms depmod runs).
func kmodHash(key string) uint32 {
	n := len(key)
	h := uint32(n)
	rem := n & 3
	k := 0
	get16 := func(i int) uint32 { return uint32(key[i]) | uint32(key[i+1])<<8 }
	for l := n / 4; l > 0; l-- {
		h += get16(k)
		tmp := (get16(k+2) << 11) ^ h
		h = (h << 16) ^ tmp
		k += 4
		h += h >> 11
	}
	switch rem {
	case 3:
		h += get16(k)
		h ^= h << 16
		h ^= uint32(int32(int8(key[k+2])) << 18)
		h += h >> 11
	case 2:
		h += get16(k)
		h ^= h << 11
		h += h >> 17
	case 1:
		h += uint32(int32(int8(key[k])))
		h ^= h << 10
		h += h >> 1
	}
	h ^= h << 3
	h += h >> 5
	h ^= h << 4
	h += h >> 17
	h ^= h << 25
	h += h >> 6
	return h
}

// kmodHashOrder sorts unique keys in place into the iteration order of a
// kmod hash with nbuckets buckets (a power of two).
func kmodHashOrder(keys []string, nbuckets uint32) {
	b := make(map[string]uint32, len(keys))
	for _, k := range keys {
		b[k] = kmodHash(k) & (nbuckets - 1)
	}
	sort.Slice(keys, func(i, j int) bool {
		bi, bj := b[keys[i]], b[keys[j]]
		if bi != bj {
			return bi < bj
		}
		return keys[i] < keys[j]
	})
}
