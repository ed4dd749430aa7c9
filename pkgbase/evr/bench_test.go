package evr

import (
	"fmt"
	"testing"
)

func BenchmarkVercmp(b *testing.B) {
	pairs := [][2]string{
		{"5.10.253", "5.10.254"},
		{"alt1.M80P.1", "alt1.M80P.2"},
		{"1.2.3~rc1^git20200101", "1.2.3~rc1^git20200102"},
		{"20231012", "20231012"},
	}
	for _, sem := range []Semantics{ALT, RPM} {
		b.Run(sem.String(), func(b *testing.B) {
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				p := pairs[i%len(pairs)]
				Vercmp(sem, p[0], p[1])
			}
		})
	}
}

func BenchmarkOverlap(b *testing.B) {
	p := Parse("2:5.10.253-alt1:p10+415595.100.2.1")
	r := Parse("2:5.10.253-alt1")
	for _, sem := range []Semantics{ALT, RPM} {
		b.Run(sem.String(), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				Overlap(sem, p, FlagEqual, r, FlagGreater|FlagEqual)
			}
		})
	}
}

func BenchmarkSetCmp(b *testing.B) {
	for _, n := range []int{10, 100, 1000} {
		all := make([]string, n)
		for i := range all {
			all[i] = fmt.Sprintf("symbol_%d", i)
		}
		for _, pbpp := range []int{16, 20} {
			prov, _ := EncodeSet(pbpp, all)
			req, _ := EncodeSet(16, all[:n/10+1])
			b.Run(fmt.Sprintf("provides=%d/bpp=%d", n, pbpp), func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					if SetCmp(prov, req) != 1 {
						b.Fatal("not a superset")
					}
				}
			})
		}
	}
}
