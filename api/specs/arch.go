package specs

// GoArch maps rpm architecture names to OCI's.
func GoArch(arch string) string {
	switch arch {
	case "x86_64":
		return "amd64"
	case "aarch64":
		return "arm64"
	case "i586", "i686":
		return "386"
	}
	return arch
}
