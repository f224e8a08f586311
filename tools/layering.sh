#!/bin/sh
# layering.sh - fail when a folder includes a folder above it.
#
# The folders in the order data flows, bottom layer first (README "Layout", docs/layout.md).
# A folder may include its own headers and those of folders on lower rows; folders on one
# row do not include each other. Headers of other folders are named from the repository
# root (#include "base/status.h"), so each #include "x/y.h" names its folder directly;
# a relative "../" include is refused outright, as it would hide the folder it reaches.
#
# Usage: tools/layering.sh [ROOT]   (exit 0: clean; 1: violations, one line each)
set -u
ROOT=${1:-.}
LAYERS='
0 base
1 models
2 profiles
3 core
4 sim exec/nn
5 planner exec/ckpt
6 exec/run
7 exec/probe
8 bench
9 tools
10 tests/fuzz tests/asan
11 tests
'
# rank_of FOLDER: its row, or nothing when the folder is not in the table.
rank_of() {
    echo "$LAYERS" | awk -v f="$1" '{ for (i = 2; i <= NF; i++) if ($i == f) print $1 }'
}
# folder_of PATH: the longest folder of the table that PATH lies in.
folder_of() {
    best=
    for f in $(echo "$LAYERS" | awk '{ for (i = 2; i <= NF; i++) print $i }'); do
        case "$1" in "$f"/*) [ ${#f} -gt ${#best} ] && best=$f ;; esac
    done
    echo "$best"
}

bad=0
cd "$ROOT" || exit 2
for src in $(git ls-files -co --exclude-standard '*.c' '*.h' 2>/dev/null || find . -name '*.[ch]' | sed 's|^\./||'); do
    [ -f "$src" ] || continue
    from=$(folder_of "$src")
    [ -n "$from" ] || continue
    rfrom=$(rank_of "$from")
    # every quoted include with its line number
    grep -n '^[[:space:]]*#[[:space:]]*include[[:space:]]*"' "$src" |
        sed 's/^\([0-9]*\):[^"]*"\([^"]*\)".*/\1 \2/' > "${TMPDIR:-/tmp}/layering.$$"
    while read -r line inc; do
        rel=
        case "$inc" in
        ../*|*/../*)   # resolve it, judge where it lands, and refuse the form too
            rel=$inc
            inc=$(realpath -m --relative-to=. "$(dirname "$src")/$inc") ;;
        */*) ;;
        *) continue ;;   # a header of the same folder
        esac
        to=$(folder_of "$inc")
        if [ -z "$to" ]; then
            [ -f "$inc" ] || continue   # generated (build/) or not ours
            echo "$src:$line: #include \"$inc\": folder not in the layer table"
            bad=1; continue
        fi
        [ "$to" = "$from" ] && continue
        rto=$(rank_of "$to")
        if [ "$rto" -ge "$rfrom" ]; then
            echo "$src:$line: $from (row $rfrom) includes $inc of $to (row $rto): a folder includes only folders below it"
            bad=1
        elif [ -n "$rel" ]; then
            echo "$src:$line: #include \"$rel\": name the header from the repository root (\"$inc\")"
            bad=1
        fi
    done < "${TMPDIR:-/tmp}/layering.$$"
    rm -f "${TMPDIR:-/tmp}/layering.$$"
done
[ $bad = 0 ] && echo "layering: every include goes down (tools/layering.sh)"
exit $bad
