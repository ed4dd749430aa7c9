package main

import (
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/nodeforge/builder/pkgbase/keyring"
	"github.com/nodeforge/builder/pkgbase/rpmfile"
)

func init() { register(newInspectCmd) }

// inspectResult is the JSON document of `builder inspect --json`.
type inspectResult struct {
	File string `json:"file"`
	*rpmfile.Info
	Signatures []rpmfile.SigResult `json:"signatures"`
	Checks     []rpmfile.Check     `json:"checks"`
	Verified   bool                `json:"verified"`
}

func newInspectCmd() *cobra.Command {
	var keyrings []string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "inspect [--keyring FILE]... [--json] FILE.rpm",
		Short: "Show an RPM's metadata, dependencies, files and signatures, and verify it",
		Long: `inspect reads an .rpm file: lead, signature header and header (name, epoch,
version, release, arch, ALT disttag, build time, source RPM, license),
dependencies with rpm's flag integers, the file list with modes, sizes,
digests, owners and link targets, scriptlets and triggers, and the payload
compressor. It streams the whole payload to check the header digests, the
payload digest, MD5 and size, and walks the cpio archive.

With --keyring (armored or binary OpenPGP public keys; repeatable), every
signature is verified and the command exits 1 unless each one verifies, as
rpm -K requires: it names each that does not, and why (BAD: the package or
the signature changed after signing; or by a key outside the keyring, which
is not tampering). A signature with a hash algorithm rpm does not know is
skipped, as rpm skips it. A corrupt package (a failed digest, a damaged
payload, or a BAD signature, keyring or not) always exits 1, naming the
failed check.`,
		Example: `  builder inspect hello-2.0-1.x86_64.rpm
  builder inspect --keyring RPM-GPG-KEY-CentOS-7 --json centos-release-7-2.1511.el7.centos.2.10.x86_64.rpm`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var kr *keyring.Keyring
			if len(keyrings) > 0 {
				var err error
				if kr, err = keyring.Load(keyrings...); err != nil {
					return err
				}
			}
			res, err := inspectFile(args[0], kr)
			if err != nil {
				return &exitError{code: 1, err: fmt.Errorf("%s: %w", args[0], err)}
			}
			out := cmd.OutOrStdout()
			if asJSON {
				if err := printJSON(out, res); err != nil {
					return err
				}
			} else {
				printInspect(out, res)
			}
			v := &rpmfile.Verification{Checks: res.Checks, Signatures: res.Signatures}
			if err := v.Err(kr != nil); err != nil {
				return &exitError{code: 1, err: fmt.Errorf("%s: %w", args[0], err)}
			}
			return nil
		},
	}
	cmd.Flags().StringArrayVar(&keyrings, "keyring", nil, "OpenPGP public key file to verify signatures with (repeatable)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON instead of text")
	return cmd
}

func inspectFile(name string, kr *keyring.Keyring) (*inspectResult, error) {
	f, err := os.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	p, err := rpmfile.Open(f)
	if err != nil {
		return nil, err
	}
	info, err := rpmfile.ReadInfo(p.Header)
	if err != nil {
		return nil, err
	}
	v, err := p.Verify(rpmfile.VerifyOptions{Keyring: kr})
	if err != nil {
		return nil, err
	}
	// Lists print as [], never null.
	for _, l := range []*[]rpmfile.Dep{&info.Requires, &info.Provides, &info.Conflicts, &info.Obsoletes} {
		if *l == nil {
			*l = []rpmfile.Dep{}
		}
	}
	if info.Files == nil {
		info.Files = []rpmfile.File{}
	}
	if info.Scripts == nil {
		info.Scripts = []rpmfile.Script{}
	}
	if info.Triggers == nil {
		info.Triggers = []rpmfile.Trigger{}
	}
	res := &inspectResult{File: name, Info: info, Signatures: v.Signatures, Checks: v.Checks}
	if res.Signatures == nil {
		res.Signatures = []rpmfile.SigResult{}
	}
	res.Verified = v.Err(kr != nil) == nil
	return res, nil
}

func printInspect(w io.Writer, r *inspectResult) {
	epoch := "(none)"
	if r.Epoch != nil {
		epoch = fmt.Sprint(*r.Epoch)
	}
	fmt.Fprintf(w, "Name:        %s\nEpoch:       %s\nVersion:     %s\nRelease:     %s\nArch:        %s\n", r.Name, epoch, r.Version, r.Release, r.Arch)
	if r.Disttag != "" {
		fmt.Fprintf(w, "Disttag:     %s\n", r.Disttag)
	}
	fmt.Fprintf(w, "Build time:  %d\nSource RPM:  %s\nLicense:     %s\nSummary:     %s\nPayload:     %s/%s\n",
		r.BuildTime, r.SourceRPM, r.License, r.Summary, r.PayloadFormat, r.PayloadCompressor)
	for _, k := range []struct {
		name string
		deps []rpmfile.Dep
	}{{"Requires", r.Requires}, {"Provides", r.Provides}, {"Conflicts", r.Conflicts}, {"Obsoletes", r.Obsoletes}} {
		if len(k.deps) == 0 {
			continue
		}
		fmt.Fprintf(w, "%s:\n", k.name)
		for _, d := range k.deps {
			fmt.Fprintf(w, "  %s\n", depString(d))
		}
	}
	fmt.Fprintf(w, "Files (%d):\n", len(r.Files))
	for _, f := range r.Files {
		line := fmt.Sprintf("  %07o %-8s %-8s %10d %s", f.Mode, f.User, f.Group, f.Size, f.Path)
		if f.LinkTo != "" {
			line += " -> " + f.LinkTo
		}
		if f.Caps != "" {
			line += " [" + f.Caps + "]"
		}
		fmt.Fprintln(w, line)
	}
	for _, s := range r.Scripts {
		fmt.Fprintf(w, "Scriptlet %s (%s): %d bytes\n", s.Kind, strings.Join(s.Interpreter, " "), len(s.Body))
	}
	for _, t := range r.Triggers {
		fmt.Fprintf(w, "Trigger on %s\n", depString(rpmfile.Dep{Name: t.Name, Flags: t.Flags, Version: t.Version}))
	}
	fmt.Fprintln(w, "Checks:")
	for _, c := range r.Checks {
		state := "ok"
		if !c.OK {
			state = "FAILED: " + c.Detail
		}
		fmt.Fprintf(w, "  %-16s %s\n", c.Name, state)
	}
	fmt.Fprintln(w, "Signatures:")
	if len(r.Signatures) == 0 {
		fmt.Fprintln(w, "  (none)")
	}
	for _, s := range r.Signatures {
		state := map[string]string{
			rpmfile.SigVerified:    "OK, verified by " + s.Signer,
			rpmfile.SigBad:         "BAD: " + s.Error,
			rpmfile.SigUnknownKey:  "NOKEY: the key is not in the keyring",
			rpmfile.SigKeyRefused:  "key refused: " + s.Error,
			rpmfile.SigUnchecked:   "not checked (no --keyring)",
			rpmfile.SigUnsupported: "skipped, as rpm skips it: " + s.Error,
		}[s.Status]
		key := ""
		if s.KeyID != "" {
			key = " key " + s.KeyID
		}
		fmt.Fprintf(w, "  %s%s: %s\n", s.Name, key, state)
	}
}

func depString(d rpmfile.Dep) string {
	op := ""
	if d.Flags&0x02 != 0 {
		op += "<"
	}
	if d.Flags&0x04 != 0 {
		op += ">"
	}
	if d.Flags&0x08 != 0 {
		op += "="
	}
	if op == "" || d.Version == "" {
		return d.Name
	}
	return d.Name + " " + op + " " + d.Version
}
