// Package layering holds no code: its test checks the rules that keep the
// packages of the builder in their rooms (see docs/architecture.md,
// "Packages").
package layering
