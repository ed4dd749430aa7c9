#!/usr/bin/env bash
# The README's quick start, run as written: every command of its ```sh
# blocks, in order, from the repository's root (CI runs this before the
# tests; a workstation may too). Under CI=true it also checks that the
# demo was the bootable one with Debian's cri and btrfs extensions and
# that its audit passed with 0 unowned files. The commands are taken from the README
# itself, so a command that changes there is what runs here. Three things
# are not done as a person would:
#   - `make test` is left out (CI runs it beside this script);
#   - `factory serve` runs in the background until the commands after it
#     are done (a person runs it in another terminal);
#   - `<id>` is the ID the README's `POST /schematics` answered.
# The files its curl lines download go to a temporary directory.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD

# The quick start's sh blocks, continuation lines joined.
commands=$(awk '
  /^## / { in_qs = ($0 == "## Quick start") }
  in_qs && /^```sh$/ { block = 1; next }
  block && /^```$/ { block = 0; next }
  in_qs && block { print }
' README.md | sed -e ':a' -e '/\\$/N; s/\\\n[[:space:]]*/ /; ta')
[ -n "$commands" ] || { echo "readme-quickstart: no sh block under '## Quick start' in README.md" >&2; exit 1; }

work=$(mktemp -d "${TMPDIR:-/tmp}/nodeforge-quickstart-XXXXXX")
factory_pid=
cleanup() {
  if [ -n "$factory_pid" ]; then kill "$factory_pid" 2>/dev/null || true; wait "$factory_pid" 2>/dev/null || true; fi
  rm -rf "$work"
}
trap cleanup EXIT

id=
n=0
while IFS= read -r line; do
  cmd=${line%%#*} # the README's comments say what a command does
  cmd=$(echo "$cmd" | sed -e 's/[[:space:]]*$//')
  [ -n "$cmd" ] || continue
  n=$((n + 1))
  case "$cmd" in
  "make test")
    echo "== [$n] $cmd: skipped (the suite; CI runs it beside this script)"
    continue ;;
  *"factory serve"*)
    echo "== [$n] $cmd &"
    bash -c "$cmd" </dev/null >"$work/factory.log" 2>&1 &
    factory_pid=$!
    for _ in $(seq 1 120); do
      if curl -fsS -o /dev/null http://127.0.0.1:8080/readyz 2>/dev/null; then break; fi
      kill -0 "$factory_pid" 2>/dev/null || { cat "$work/factory.log" >&2; echo "readme-quickstart: factory serve exited" >&2; exit 1; }
      sleep 1
    done
    curl -fsS -o /dev/null http://127.0.0.1:8080/readyz || { cat "$work/factory.log" >&2; echo "readme-quickstart: the factory was not ready in 120 s" >&2; exit 1; }
    continue ;;
  esac
  if [[ "$cmd" == *"<id>"* ]]; then
    [ -n "$id" ] || { echo "readme-quickstart: [$n] needs <id>, and no POST /schematics answered one before it" >&2; exit 1; }
    cmd=${cmd//<id>/$id}
  fi
  echo "== [$n] $cmd"
  case "$cmd" in
  curl\ *|cosign\ *|crane\ *)
    # Downloads land in the work directory, not in the checkout.
    out=$(cd "$work" && bash -c "$cmd" </dev/null)
    ;;
  *)
    out=$(bash -c "$cmd" </dev/null)
    ;;
  esac
  printf '%s\n' "$out"
  if [[ "$cmd" == *"/schematics"* && "$cmd" == curl\ -X\ POST* ]]; then
    id=$(printf '%s' "$out" | sed -n 's/.*"id":"\([0-9a-f]\{64\}\)".*/\1/p')
    [ -n "$id" ] || { echo "readme-quickstart: POST /schematics answered no ID: $out" >&2; exit 1; }
  fi
done <<<"$commands"
# Under CI the demo must be the whole one: bootable, its cri and btrfs
# extensions Debian's packages (the quick start's make demo-boot then ran
# a container and mounted btrfs: scripts/demo-boot.sh fails otherwise),
# and its audit passed with every file traced to a package or generator.
if [ "${CI:-}" = true ] && grep -q '^make demo' README.md; then
  grep -q "^make demo: bootable media: .*cri and btrfs: Debian's" out/demo/media.txt ||
    { echo "readme-quickstart: the demo is not the bootable one with Debian's cri and btrfs: $(cat out/demo/media.txt)" >&2; exit 1; }
  grep -q '"verdict": "pass"' out/demo/audit/audit.json && grep -q '"unowned": 0,' out/demo/audit/audit.json ||
    { echo "readme-quickstart: the demo's audit (out/demo/audit/audit.json) did not pass with 0 unowned files" >&2; exit 1; }
fi
echo "readme-quickstart: the README's $n quick-start commands ran as written (from $root)"
