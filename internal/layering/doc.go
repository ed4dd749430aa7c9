// Package layering holds no code: its tests check the rules that keep the
// packages of the builder in their rooms (see docs/architecture.md,
// "Packages"): the floors and what each may import, internal/ as the
// ground floor, test helpers for tests only, nothing printed below cmd/,
// the size of functions; and they hold docs/architecture.md to the code
// (the identifiers it cites, its package table, its fuzz targets).
package layering
