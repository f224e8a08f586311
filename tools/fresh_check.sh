#!/bin/sh
# fresh_check.sh - the README's `make demo` and `make test` pass the first
# time on a machine where `make deps` has to install the libraries first.
#
#   tools/fresh_check.sh [COMMIT]        (default HEAD; CI runs it)
#
# Needs no network and no root: a fresh clone of COMMIT is built with stubs
# early on PATH.  `dpkg-query` says every package is missing until apt-get
# ran; `apt-get install` "installs" them by creating a marker file (the real
# packages are on this machine); `pkg-config` fails, as on a machine without
# the .pc files, until the marker exists, then answers as the real one.  A
# Makefile that asks pkg-config before deps ran compiles without the flags
# and fails (base/jsonx.h: cJSON.h: No such file or directory).
#
# `make demo` runs the whole demo; `make test` runs the `base` suite (the
# build is what is checked; the whole suite needs ../shared beside the
# repository).  Exit 0 when both pass, 1 otherwise.
set -eu
repo=$(cd "$(dirname "$0")/.." && pwd)
rev=$(git -C "$repo" rev-parse --verify "${1:-HEAD}^{commit}")
real_pc=$(command -v pkg-config) || { echo "fresh_check: pkg-config is missing (hint: make deps)" >&2; exit 2; }
real_dq=$(command -v dpkg-query) || { echo "fresh_check: dpkg-query is missing (Debian only)" >&2; exit 2; }
tmp=$(mktemp -d "${TMPDIR:-/tmp}/cleave-fresh-XXXXXX")
trap 'rm -rf "$tmp"' EXIT INT TERM
mkdir "$tmp/bin"

# the stubs (the marker's and the real tools' paths are written in, quoted)
q() { printf "'%s'" "$(printf '%s' "$1" | sed "s/'/'\\\\''/g")"; }
marker=$(q "$tmp/installed")
cat >"$tmp/bin/dpkg-query" <<EOF
#!/bin/sh
[ -e $marker ] && exec $(q "$real_dq") "\$@"
exit 1
EOF
cat >"$tmp/bin/apt-get" <<EOF
#!/bin/sh
echo "apt-get \$*" >>$(q "$tmp/apt.log")
case " \$* " in *" install "*) : >$marker ;; esac
exit 0
EOF
cat >"$tmp/bin/pkg-config" <<EOF
#!/bin/sh
[ -e $marker ] && exec $(q "$real_pc") "\$@"
exit 1
EOF
# shellcheck disable=SC2016
printf '#!/bin/sh\n[ "$1" = -u ] && { echo 0; exit 0; }\nexec /usr/bin/id "$@"\n' >"$tmp/bin/id"
chmod +x "$tmp/bin/"*

fail=0
# one fresh clone and one fresh "machine" (marker absent) per README command
for goal in demo test; do
    rm -f "$tmp/installed" "$tmp/apt.log"
    clone="$tmp/clone-$goal"
    git clone -q --no-checkout "$repo" "$clone"
    git -C "$clone" checkout -q "$rev"
    args=$goal
    [ "$goal" = test ] && args="test SUITE=base"
    start=$(date +%s)
    # shellcheck disable=SC2086
    if (cd "$clone" && PATH="$tmp/bin:$PATH" make -j2 $args) >"$tmp/$goal.log" 2>&1 &&
        grep -q "make deps: installing" "$tmp/$goal.log" && [ -e "$tmp/installed" ]; then
        echo "fresh_check: make $args on a fresh clone of ${rev%"${rev#???????}"}: passed the first time ($(($(date +%s) - start)) s)"
    else
        echo "fresh_check: make $args on a fresh clone of ${rev%"${rev#???????}"}: FAILED; the end of its output:" >&2
        tail -15 "$tmp/$goal.log" >&2
        fail=1
    fi
done
exit $fail
