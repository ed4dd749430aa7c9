module github.com/nodeforge/builder

go 1.26.0

require (
	github.com/DataDog/zstd v1.5.7
	github.com/ProtonMail/go-crypto v1.5.2
	github.com/go-air/gini v1.0.4
	github.com/google/go-containerregistry v0.22.1
	github.com/google/rpmpack v0.7.1
	github.com/klauspost/compress v1.20.4
	github.com/spf13/cobra v1.10.2
	github.com/ulikunitz/xz v0.5.17
	go.yaml.in/yaml/v3 v3.0.6
	golang.org/x/crypto v0.59.0
	golang.org/x/sys v0.50.0
	golang.org/x/term v0.48.0
)

require (
	github.com/cavaliergopher/cpio v1.0.1 // indirect
	github.com/cloudflare/circl v1.6.3 // indirect
	github.com/inconshreveable/mousetrap v1.1.0 // indirect
	github.com/klauspost/pgzip v1.2.6 // indirect
	github.com/opencontainers/go-digest v1.0.0 // indirect
	github.com/opencontainers/image-spec v1.1.1 // indirect
	github.com/spf13/pflag v1.0.10 // indirect
	golang.org/x/sync v0.22.0 // indirect
)
