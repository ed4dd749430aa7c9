package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/nodeforge/builder/api/report"
	"github.com/nodeforge/builder/attest/signing"
	"github.com/nodeforge/builder/certification"
	"github.com/nodeforge/builder/internal/atomicfile"
	"github.com/nodeforge/builder/oci"
	"github.com/nodeforge/builder/release"
)

func init() { register(newAuditCmd) }

// openRelease opens docker://HOST[:PORT]/PREFIX, oci:DIR or DIR (a local
// OCI layout written by builder release) and finds the version: the given
// one, or the only release the store holds.
func openRelease(ctx context.Context, src, version string, o oci.RemoteOptions) (oci.Store, string, error) {
	st, err := openReleaseStore(src, o)
	if err != nil {
		return nil, "", err
	}
	if err := reachable(ctx, st); err != nil {
		return nil, "", err
	}
	if version != "" {
		return st, version, nil
	}
	tags, err := st.Tags(ctx, release.RepoLock)
	if err != nil {
		return nil, "", fmt.Errorf("%s: listing releases: %w (give --version)", src, err)
	}
	tags = slices.DeleteFunc(tags, func(t string) bool { return strings.HasPrefix(t, "sha256-") })
	if len(tags) != 1 {
		return nil, "", fmt.Errorf("%s holds %d releases (%s): give --version", src, len(tags), strings.Join(tags, ", "))
	}
	return st, tags[0], nil
}

// attestVerdict attaches the audit's SLSA verification summary to every
// top-level manifest of the release, naming every manifest as a subject.
func attestVerdict(ctx context.Context, st oci.Store, version string, rep *certification.Report, keyPath string) error {
	signer, err := loadSigner(keyPath)
	if err != nil {
		return err
	}
	var js bytes.Buffer
	if err := rep.JSON(&js); err != nil {
		return err
	}
	pred, err := rep.VSAPredicate(time.Now().UTC().Format(time.RFC3339), buildVersion(), js.Bytes())
	if err != nil {
		return err
	}
	var subjects []signing.Subject
	for _, a := range rep.Artifacts {
		if a.Kind != "boot-asset" {
			subjects = append(subjects, signing.Subject{Name: a.Ref, Digest: map[string]string{"sha256": strings.TrimPrefix(a.Digest, "sha256:")}})
		}
	}
	stmt, err := json.Marshal(signing.Statement{Type: signing.StatementV1, Subject: subjects, PredicateType: certification.PredicateVSA, Predicate: pred})
	if err != nil {
		return err
	}
	repos, err := release.Repositories(ctx, st, version)
	if err != nil {
		return err
	}
	for _, repo := range repos {
		d, err := st.Head(ctx, repo, version)
		if err != nil {
			return err
		}
		if _, err := signer.Attest(ctx, st, repo, *d, certification.PredicateVSA, stmt); err != nil {
			return err
		}
	}
	return nil
}

// openReleaseStore opens docker://HOST[:PORT]/PREFIX, oci:DIR or DIR.
func openReleaseStore(src string, o oci.RemoteOptions) (oci.Store, error) {
	l, err := oci.ParseLocation(src)
	if err != nil {
		return nil, err
	}
	if l.Repo != "" {
		return nil, fmt.Errorf("%q names one image: the audit reads a whole release's store (pick the release with --version)", src)
	}
	return oci.Open(l, oci.OpenOptions{Remote: o})
}

// auditLong is the help of builder audit.
const auditLong = `audit verifies a release as it is published and writes the report a
certification body reads: that every byte of the node OS comes from the
certified package base.

REF is docker://HOST[:PORT]/PREFIX with --version V (as builder release
published it); DIR is a local OCI layout written by builder release (oci:DIR
also works; --version may be left out when it holds one release).

The report states, in this order:
  1. the verdict, pass, pass with caveats or fail, with every reason and
     caveat;
  2. the identity: version, branch, channel, spec and lock digests, the
     builder's version and digest, SOURCE_DATE_EPOCH, the package base
     (repositories, index digests, signing key fingerprints);
  3. every image and boot asset with its digest, the keys whose signatures
     verified, its attestations, and whether it verified;
  4. every package: NEVRA, disttag, source RPM, repository, sha256, signing
     key, license, the artifacts holding its files;
  5. every file of every artifact traced to its package (and the digest the
     RPM records for it) or to a declared builder generator; unowned files
     fail the audit;
  6. policy checks: all packages from the named base (and the branches
     their disttags name, another branch's a caveat), package and
     repository signatures, every scriptlet (none is executed) and how it was
     handled, setuid, capabilities and world-writable files, and, with
     --reproduced, the digests of a second independent build compared;
  7. licenses, changes against --previous, and promotions (key and time).

The build report and provenance are read from the release's signed
attestations, so --key must verify them. Outputs: DIR/audit.json (schema in
docs/audit.schema.json), DIR/audit.md and DIR/audit.html (one self-contained
page with size charts). Exit status 0 on a pass, with caveats or not
(audit.json's outcome tells them apart), 1 when the verdict is fail.`

func newAuditCmd() *cobra.Command {
	var (
		version, previous, previousVersion, reproduced, policyPath, out, attestKey string
		keys, formats                                                              []string
		sf                                                                         storeFlags
	)
	cmd := &cobra.Command{
		Use:   "audit REF|DIR [--key PUB]... [--previous REF|DIR] [--format html,json,md] -o DIR",
		Short: "Write the certification audit report of a release: pass, pass with caveats or fail, and why",
		Long:  auditLong,
		Example: `  builder audit --key out/demo/keys/dev/cosign.pub -o out/audit out/demo/release/dev
  builder audit --key cosign.pub --version 1.11.0 --previous-version 1.10.2 \
      --previous docker://registry.internal:5000/nodeforge/p11 -o audit/ docker://registry.internal:5000/nodeforge/p11
  builder audit --key cosign.pub --reproduced perimeter/out/report.json -o audit/ release/dev`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			if len(keys) == 0 {
				return errors.New("--key PUB is required: the release's signatures and attestations are what the audit verifies")
			}
			if out == "" {
				return errors.New("-o DIR is required: where audit.html, audit.json and audit.md go")
			}
			want, err := auditFormats(formats)
			if err != nil {
				return err
			}
			vs, err := loadVerifiers(keys)
			if err != nil {
				return err
			}
			st, ver, err := openRelease(ctx, args[0], version, sf.remote(ctx))
			if err != nil {
				return err
			}
			o := certification.Options{Store: st, Version: ver, Keys: vs,
				Log: func(format string, a ...any) { fmt.Fprintf(cmd.ErrOrStderr(), format+"\n", a...) }}
			if o.Policy, err = release.LoadPolicy(policyPath); err != nil {
				return err
			}
			if previous != "" {
				if o.Previous, o.PreviousVersion, err = openPrevious(ctx, previous, previousVersion, ver, sf.remote(ctx)); err != nil {
					return err
				}
			}
			if reproduced != "" {
				if o.Reproduced, err = readReport(reproduced); err != nil {
					return fmt.Errorf("--reproduced %s: %w", reproduced, err)
				}
				o.ReproducedFrom = reproduced
			}
			rep, err := certification.Audit(ctx, o)
			if err != nil {
				return err
			}
			if err := writeAudit(out, want, rep); err != nil {
				return err
			}
			if attestKey != "" {
				if err := attestVerdict(ctx, st, ver, rep, attestKey); err != nil {
					return fmt.Errorf("publishing the verification summary: %w", err)
				}
				fmt.Fprintf(cmd.ErrOrStderr(), "published the verdict as a %s attestation on every image of %s\n", certification.PredicateVSA, ver)
			}
			s := rep.Summary()
			w := cmd.OutOrStdout()
			fmt.Fprintf(w, "%s  audit of %s %s: %d artifacts, %d packages, %d files (%d unowned) -> %s\n",
				rep.VerdictText(), rep.Identity.Name, rep.Identity.Version, s.Artifacts, s.Packages, s.Files, s.Unowned, out)
			for _, r := range rep.Reasons {
				fmt.Fprintf(w, "    - %s\n", r)
			}
			for _, c := range rep.Caveats {
				fmt.Fprintf(w, "    caveat: %s\n", c)
			}
			if rep.Verdict != "pass" {
				return &exitError{code: 1, err: errors.New("audit failed")}
			}
			return nil
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&version, "version", "", "the release version (optional for a layout holding one release)")
	fl.StringArrayVar(&keys, "key", nil, "public key (cosign.pub) the release is signed with (repeatable)")
	fl.StringVar(&policyPath, "policy", "", "policy file: base, urls, fingerprints")
	fl.StringVar(&previous, "previous", "", "the store of the previous release (REF or DIR), for the changes")
	fl.StringVar(&previousVersion, "previous-version", "", "the previous release's version (default: the newest older one in --previous)")
	fl.StringVar(&reproduced, "reproduced", "", "build report (report.json) of a second, independent build of the same lock")
	fl.StringVar(&attestKey, "attest-key", "", "publish the verdict as a signed SLSA verification summary attestation on the release, signed with this cosign key ($COSIGN_PASSWORD)")
	fl.StringSliceVar(&formats, "format", []string{"html", "json", "md"}, "formats to write: html, json, md")
	fl.StringVarP(&out, "out", "o", "", "output directory")
	sf.addRemote(fl)
	return cmd
}

// auditFormats reads --format: html, json, md, repeated or comma-separated.
func auditFormats(formats []string) (map[string]bool, error) {
	want := map[string]bool{}
	for _, f := range formats {
		for _, x := range strings.Split(f, ",") {
			x = strings.TrimSpace(x)
			if x != "html" && x != "json" && x != "md" {
				return nil, fmt.Errorf("--format %q: want html, json or md", x)
			}
			want[x] = true
		}
	}
	return want, nil
}

// readReport reads a build report (report.json).
func readReport(path string) (*report.Report, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var rep report.Report
	if err := json.Unmarshal(b, &rep); err != nil {
		return nil, fmt.Errorf("not a build report: %w", err)
	}
	return &rep, nil
}

// writeAudit writes the report in the formats wanted into out.
func writeAudit(out string, want map[string]bool, rep *certification.Report) error {
	if err := os.MkdirAll(out, 0o755); err != nil {
		return err
	}
	for _, f := range []struct {
		format, name string
		write        func(io.Writer) error
	}{{"json", "audit.json", rep.JSON}, {"md", "audit.md", rep.Markdown}, {"html", "audit.html", rep.HTML}} {
		if !want[f.format] {
			continue
		}
		var b bytes.Buffer
		if err := f.write(&b); err != nil {
			return err
		}
		if err := atomicfile.Put(filepath.Join(out, f.name), b.Bytes()); err != nil {
			return err
		}
	}
	return nil
}

// openPrevious opens the store of the previous release and finds its
// version: the one given, or the newest older than ver.
func openPrevious(ctx context.Context, src, version, ver string, o oci.RemoteOptions) (oci.Store, string, error) {
	st, err := openReleaseStore(src, o)
	if err != nil {
		return nil, "", err
	}
	if version == "" {
		if version, err = certification.PreviousVersion(ctx, st, ver); err != nil {
			return nil, "", err
		}
	}
	return st, version, nil
}
