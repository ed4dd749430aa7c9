package builder

// generatorDocs describes every builder generator, for the report.
var generatorDocs = map[string]string{
	"accounts":           "/etc/passwd, /etc/group, /etc/shadow from the base's files, the spec and useradd/groupadd scriptlets",
	"os-release":         "/etc/os-release from the spec",
	"machine-id":         "empty /etc/machine-id, filled at first boot",
	"ldconfig":           "/etc/ld.so.cache in glibc's format, as ldconfig would write it for the image",
	"depmod":             "kernel module indexes (modules.dep and the rest), computed as depmod does",
	"implicit-directory": "a parent directory no package ships (0755 root:root)",
	"rootfs.sqsh":        "the root filesystem image inside the initramfs",
	"initramfs":          "initramfs directories and /dev/console (5,1), and the boot modules' indexes",
	"extension-file":     "a file an extension definition declares (extensions/<name>.yaml, files:)",
	"extension-link":     "a symbolic link an extension definition declares (extensions/<name>.yaml, links:)",
	"extension-manifest": "an extension's manifest.yaml, from its definition and its packages' versions",
}
