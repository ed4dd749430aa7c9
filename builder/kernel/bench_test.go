package kernel

import "testing"

// BenchmarkDepmod runs Depmod on the real subset: plain .ko files, and the
// same modules a third each as .ko, .ko.xz and .ko.zst.
func BenchmarkDepmod(b *testing.B) {
	tr := debianKernel(b)
	plain := Input{KernelVersion: tr.kver, Files: tr.testSubset(), Builtin: tr.builtin, BuiltinModinfo: tr.bmodinf, Order: tr.order}
	c := compressedCase(b).in
	for _, bc := range []struct {
		name string
		in   Input
	}{{"ko", plain}, {"mixed", c}, {"fulltree", Input{KernelVersion: tr.kver, Files: tr.files, Builtin: tr.builtin, BuiltinModinfo: tr.bmodinf, Order: tr.order}}} {
		b.Run(bc.name, func(b *testing.B) {
			var size int64
			for _, d := range bc.in.Files {
				size += int64(len(d))
			}
			b.SetBytes(size)
			for b.Loop() {
				if _, err := Depmod(bc.in); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
