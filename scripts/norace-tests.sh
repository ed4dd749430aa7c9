#!/usr/bin/env bash
# The top-level tests that call testutil.NoRace, as a go test -run
# alternation (TestA|TestB|...): make test runs them again without the
# race detector, under which they skip.
set -euo pipefail
cd "$(dirname "$0")/.."
git grep -h -e '^func Test' -e 'testutil[.]NoRace' -- '*_test.go' |
  awk '/^func Test/ { sub(/^func /, ""); sub(/\(.*/, ""); f = $0; next } { print f }' |
  sort -u | paste -sd'|'
