package certification

import (
	"fmt"
	"strings"
	"testing"

	"github.com/nodeforge/builder/api/lock"
)

// A repository locked under verify: packages has no release signature by
// design: the audit accepts it when every package names its verified
// signer, and fails an unsigned index otherwise, and an unsigned package
// in either case.
func TestVerifyPackagesRepository(t *testing.T) {
	for _, tc := range []struct {
		name, verify, signer, want string
	}{
		{"packages mode, signed packages", "packages", "ABCD", ""},
		{"packages mode, an unsigned package", "packages", "", "no verified OpenPGP signature"},
		{"default mode, no release signature", "", "ABCD", "release file was not verified"},
	} {
		rel := &auditedRelease{lock: &lock.Lock{
			Repositories: []lock.Repository{{Name: "fedora", Format: "rpm-md", URL: "https://mirror/fedora", Verify: tc.verify}},
			Architectures: map[string]*lock.Arch{"x86_64": {Packages: []lock.Package{
				{Name: "bash", Version: "5.2", Release: "1.fc41", Arch: "x86_64", NEVRA: "bash-5.2-1.fc41.x86_64", Repository: "fedora", SHA256: strings.Repeat("a", 64), SignerFingerprint: tc.signer},
			}}},
		}}
		var reasons []string
		packages(&Report{}, rel, nil, func(f string, a ...any) { reasons = append(reasons, fmt.Sprintf(f, a...)) })
		got := strings.Join(reasons, "; ")
		if (tc.want == "") != (len(reasons) == 0) || !strings.Contains(got, tc.want) {
			t.Errorf("%s: reasons %q, want %q", tc.name, got, tc.want)
		}
	}
}
