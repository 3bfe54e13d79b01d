#!/bin/sh
# A reference stack's facts, from its one file stacks/<name>/stack.env (read
# by scripts/dotenv.sh, compose's rules). Its STACK_* lines describe it; every
# other line is a setting the lab applies when it runs it (make up STACK=...).
# "go" is the lab's own app (services/app): no file, no settings.
#
#   scripts/stack.sh --list          the stacks: go, then stacks/'s folders with a stack.env
#   scripts/stack.sh --list run      those the test bed builds and runs (stand-ins, tests/integration,
#                                    e2e, make compare's default): all but STACK_TEST_BED=static
#   scripts/stack.sh --list static   those it checks statically only (no registry here: swoole)
#   scripts/stack.sh NAME settings   its settings, NAME=value a line, your environment's value
#                                    where it sets one (the shell and make's command line win)
#   scripts/stack.sh NAME FACT       one of its facts (STACK_BASE_IMAGE, ...); exit 1 if unset
# Exit 2, naming the setting, for a stack that does not exist. Runs on the
# host: POSIX sh.
set -eu
cd "$(dirname "$0")/.."

# list [run|static]: the stacks, or those the test bed runs, or checks only.
list() {
  sep=
  case ${1:-} in '' | run) printf 'go'; sep=' ' ;; esac
  for f in stacks/*/stack.env; do
    [ -f "$f" ] || continue
    if [ -n "${1:-}" ]; then
      bed=$(scripts/dotenv.sh -f "$f" STACK_TEST_BED 2>/dev/null) || bed=run
      case $bed in
        run | static) [ "$bed" = "$1" ] || continue ;;
        *) echo "$f: STACK_TEST_BED=\"$bed\": want run or static" >&2; exit 2 ;;
      esac
    fi
    f=${f#stacks/}
    printf '%s%s' "$sep" "${f%/stack.env}"
    sep=' '
  done
  echo
}

[ $# -ge 1 ] || { echo "stack.sh: --list [run|static], or NAME settings|FACT" >&2; exit 2; }
if [ "$1" = --list ]; then
  case ${2:-} in
    '' | run | static) list "${2:-}"; exit 0 ;;
    *) echo "stack.sh: --list \"$2\": want --list, --list run or --list static" >&2; exit 2 ;;
  esac
fi
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
