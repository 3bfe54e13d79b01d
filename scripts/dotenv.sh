#!/bin/sh
# The one reader of .env for the shell and make, by compose's rules (its
# dotenv parser, compose-go/dotenv), for the lines compose and this script
# both read the same way; any other line is refused, naming it, rather than
# read differently. tests/static/dotenv_test.go proves they agree on every line
# of .env and on testdata/dotenv/*.env.
#
#   scripts/dotenv.sh [-f FILE]           every NAME=value, one a line (last one wins)
#   scripts/dotenv.sh [-f FILE] NAME      NAME's value; exit 1 if .env does not set it
#   scripts/dotenv.sh [-f FILE] --export  `export NAME='value'` for every NAME your
#                                         environment does not set (compose: the shell
#                                         wins), for: eval "$(scripts/dotenv.sh --export)"
#
# What it reads (compose reads these the same way):
#   blank lines and comments (# first on the line);
#   NAME=value, NAME a shell name, spaces around NAME and after = ignored;
#   unquoted values end at the line's end or at " #" (a comment), trailing
#   spaces dropped; a value with spaces needs no quotes, one with "=" neither;
#   "value" or 'value' on one line, taken as is, then only a comment.
# Refused: $ outside single quotes and \ inside quotes (compose expands them),
# quotes left open, `export`, NAME: value, NAME without a value.
set -eu
file=$(dirname "$0")/../.env
if [ "${1:-}" = -f ]; then file=$2; shift 2; fi
[ -r "$file" ] || { echo "dotenv: cannot read $file" >&2; exit 2; }

awk -v file="$file" -v mode="${1:---list}" '
function bad(why) { printf "dotenv: %s line %d: %s: %s\n", file, NR, why, $0 > "/dev/stderr"; failed = 1; exit 2 }
function ltrim(s) { sub(/^[ \t\r\v\f]+/, "", s); return s }
function rtrim(s) { sub(/[ \t\r\v\f]+$/, "", s); return s }
{
  line = ltrim($0)
  if (line == "" || substr(line, 1, 1) == "#") next
  eq = index(line, "=")
  if (eq == 0) bad("not NAME=value")
  name = rtrim(substr(line, 1, eq - 1))
  if (name !~ /^[A-Za-z_][A-Za-z0-9_]*$/) bad("\"" name "\" is not a NAME (export and NAME: value are not read)")
  v = ltrim(substr(line, eq + 1))
  q = substr(v, 1, 1)
  if (q == "\"" || q == "\047") {
    end = index(substr(v, 2), q)
    if (end == 0) bad("quote left open (values span one line)")
    rest = ltrim(substr(v, end + 2))
    v = substr(v, 2, end - 1)
    if (rest != "" && substr(rest, 1, 1) != "#") bad("text after the closing quote")
    if (index(v, "\\")) bad("\\ in quotes (compose reads escapes there)")
    if (q == "\"" && index(v, "$")) bad("$ in double quotes (compose expands it: use single quotes)")
  } else {
    c = index(v, " #")
    if (c) v = substr(v, 1, c - 1)
    v = rtrim(v)
    if (index(v, "$")) bad("$ in an unquoted value (compose expands it: use single quotes)")
  }
  if (!(name in val)) order[++n] = name
  val[name] = v
}
END {
  if (failed) exit 2
  if (mode == "--list") { for (i = 1; i <= n; i++) print order[i] "=" val[order[i]]; exit 0 }
  if (mode == "--export") {
    for (i = 1; i <= n; i++) {
      k = order[i]
      if (k in ENVIRON) continue
      v = val[k]; gsub(/\047/, "\047\\\047\047", v)
      print "export " k "=\047" v "\047"
    }
    exit 0
  }
  if (mode ~ /^-/) { print "dotenv: unknown option " mode > "/dev/stderr"; exit 2 }
  if (!(mode in val)) exit 1
  print val[mode]
}' "$file"
