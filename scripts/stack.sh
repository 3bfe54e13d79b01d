#!/bin/sh
# A reference stack's facts, from its one file stacks/<name>/stack.env (read
# by scripts/dotenv.sh, compose's rules). Its STACK_* lines describe it; every
# other line is a setting the lab applies when it runs it (make up STACK=...).
# "go" is the lab's own app (services/app): no file, no settings.
#
#   scripts/stack.sh --list          the stacks: go, then stacks/'s folders with a stack.env
#   scripts/stack.sh NAME settings   its settings, NAME=value a line, your environment's value
#                                    where it sets one (the shell and make's command line win)
#   scripts/stack.sh NAME FACT       one of its facts (STACK_BASE_IMAGE, ...); exit 1 if unset
# Exit 2, naming the setting, for a stack that does not exist. Runs on the
# host: POSIX sh.
set -eu
cd "$(dirname "$0")/.."

list() {
  printf 'go'
  for f in stacks/*/stack.env; do
    [ -f "$f" ] || continue
    f=${f#stacks/}
    printf ' %s' "${f%/stack.env}"
  done
  echo
}

[ $# -ge 1 ] || { echo "stack.sh: --list, or NAME settings|FACT" >&2; exit 2; }
if [ "$1" = --list ]; then list; exit 0; fi
name=$1 what=${2:-settings}
case $name in
  go) [ "$what" = settings ] && exit 0 || exit 1 ;;
  '' | */* | .*) ;;
  *) [ -f "stacks/$name/stack.env" ] && found=1 ;;
esac
[ -n "${found:-}" ] || { echo "STACK=\"$name\": no such stack (known: $(list))" >&2; exit 2; }
file=stacks/$name/stack.env

[ "$what" = settings ] || exec scripts/dotenv.sh -f "$file" "$what"
scripts/dotenv.sh -f "$file" | while IFS= read -r line; do
  key=${line%%=*}
  case $key in STACK_*) continue ;; esac
  # Your value where your environment has one (compose's rule for .env).
  if eval "[ -n \"\${$key+set}\" ]"; then
    eval "printf '%s=%s\n' \"\$key\" \"\$$key\""
  else
    printf '%s\n' "$line"
  fi
done
