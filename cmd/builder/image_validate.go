package main

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/nodeforge/builder/builder"
)

func newImageValidateCmd() *cobra.Command {
	var o builder.ValidateOptions
	cmd := &cobra.Command{
		Use:   "validate [--arch A] [--allow-setuid PATH]... [--path PATH]... LAYOUT",
		Short: "Check that the images of an OCI layout, whoever built them, would start",
		Long: `validate applies the checks builder build makes of its own container images to
every image of an OCI layout (a directory with index.json: builder build's
OUT/images/NAME, skopeo copy ... oci:DIR, crane pull --format oci): the layers
merged as a runtime merges them (whiteouts, opaque directories), then
  - the entrypoint (or the cmd's program) and the health check's program exist,
    are executable and are code for the image's architecture (or a script whose
    #! interpreter is), their ELF interpreter (PT_INTERP) is in the image and
    every DT_NEEDED library, and theirs, resolves as the dynamic loader finds it
    (DT_RPATH/DT_RUNPATH, LD_LIBRARY_PATH of the config, the directories of the
    ld.so.cache ldconfig writes from the image's ld.so.conf when the image has a
    cache, then /lib64, /usr/lib64, /lib, /usr/lib);
  - the config's user is a name or UID of the image's /etc/passwd (and its GID
    of /etc/group);
  - no file is setuid or setgid but those --allow-setuid names;
  - each --path (a path the image's consumers expect, as a spec's links:
    /usr/local/bin/etcd) resolves inside the image.
Every problem of every image is listed, each with the image's platform, the
file and the layer it came from; the exit status is 1 then. An image that
passes is printed: platform, manifest digest, files, program.`,
		Example: `  builder image validate out/images/factory
  skopeo copy docker://registry.k8s.io/etcd:3.5.21-0 oci:/tmp/etcd && \
    builder image validate --arch amd64 --path /usr/local/bin/etcd /tmp/etcd`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			got, err := builder.ValidateLayout(args[0], o)
			for _, v := range got {
				if err == nil || !strings.Contains(err.Error(), v.Platform+" (") {
					fmt.Fprintf(cmd.OutOrStdout(), "%s  %s  %s  %d files, runs %s\n", args[0], v.Platform, v.Digest, v.Files, v.Program)
				}
			}
			return err
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&o.Arch, "arch", "", "check the images of this architecture only (amd64 or x86_64, arm64 or aarch64)")
	fl.StringArrayVar(&o.Setuid, "allow-setuid", nil, "a path allowed to keep its setuid/setgid bits (repeatable)")
	fl.StringArrayVar(&o.Paths, "path", nil, "a path the image's consumers expect, which must resolve inside it (repeatable)")
	return cmd
}
