#!/usr/bin/env bash
# Builds the Debian package of fiberize: target/debian/fiberize_<version>-1_<arch>.deb.
#
#   scripts/package.sh            build the library (cargo build --release -p interpose),
#                                 the package, and run lintian on it if it is installed
#   NO_BUILD=1 scripts/package.sh package the library that is already built
#   NO_LINTIAN=1 ...              skip lintian
#
# Contents: the library in /usr/lib/<multiarch>/fiberize/, the launcher as /usr/bin/fiberize,
# /usr/include/fiberize.h, man pages fiberize(1) and libfiberize(7), the MariaDB drop-in
# example, copyright (DEP-5) and changelog.Debian.gz. Sources of all but the library and
# the launcher: packaging/debian/. Prints the package's path last.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
need() { command -v "$1" >/dev/null || { echo "package.sh: $1 not found (apt-get install $2)" >&2; exit 1; }; }
need dpkg-deb dpkg
need dpkg-architecture dpkg-dev
need dpkg-shlibdeps dpkg-dev

VERSION=$(sed -n '/^\[workspace.package\]/,/^\[/s/^version *= *"\(.*\)"/\1/p' Cargo.toml)
[ -n "$VERSION" ] || { echo "package.sh: no version in Cargo.toml's [workspace.package]" >&2; exit 1; }
DEB_VERSION=$VERSION-1
ARCH=$(dpkg-architecture -qDEB_HOST_ARCH)
MULTIARCH=$(dpkg-architecture -qDEB_HOST_MULTIARCH)
LIBDIR=/usr/lib/$MULTIARCH/fiberize

[ "${NO_BUILD:-0}" = 1 ] || cargo build --release -p interpose
LIB=target/release/libfiberize.so
[ -f "$LIB" ] || { echo "package.sh: $LIB not built (cargo build --release -p interpose)" >&2; exit 1; }

OUT=target/debian
STAGE=$OUT/fiberize_${DEB_VERSION}_$ARCH
rm -rf "$STAGE"
umask 022
install -d "$STAGE/DEBIAN" "$STAGE$LIBDIR" "$STAGE/usr/bin" "$STAGE/usr/include" \
    "$STAGE/usr/share/man/man1" "$STAGE/usr/share/man/man7" \
    "$STAGE/usr/share/doc/fiberize/examples/mariadb.service.d" "$STAGE/usr/share/lintian/overrides"

# The library, without its debug information (the release profile keeps line tables).
install -m 0644 "$LIB" "$STAGE$LIBDIR/libfiberize.so"
strip --strip-unneeded --remove-section=.comment --remove-section=.note "$STAGE$LIBDIR/libfiberize.so"
# The launcher, with the installed library's place under its prefix written in.
sed -e "s|^LIB_IN_PREFIX=\$|LIB_IN_PREFIX=lib/$MULTIARCH/fiberize/libfiberize.so|" \
    -e '1s|^#!/usr/bin/env bash$|#!/bin/bash|' scripts/fiberize > "$STAGE/usr/bin/fiberize"
chmod 0755 "$STAGE/usr/bin/fiberize"
grep -q "^LIB_IN_PREFIX=lib/" "$STAGE/usr/bin/fiberize" || { echo "package.sh: the launcher's LIB_IN_PREFIX line was not found" >&2; exit 1; }
install -m 0644 interpose/include/fiberize.h "$STAGE/usr/include/fiberize.h"

subst() { sed -e "s|@LIBDIR@|$LIBDIR|g" -e "s|@VERSION@|$VERSION|g" "$1"; }
subst packaging/debian/fiberize.1 | gzip -9n > "$STAGE/usr/share/man/man1/fiberize.1.gz"
subst packaging/debian/libfiberize.7 | gzip -9n > "$STAGE/usr/share/man/man7/libfiberize.7.gz"
subst packaging/debian/examples/mariadb.service.d/fiberize.conf \
    > "$STAGE/usr/share/doc/fiberize/examples/mariadb.service.d/fiberize.conf"
install -m 0644 packaging/debian/copyright "$STAGE/usr/share/doc/fiberize/copyright"
install -m 0644 packaging/debian/lintian-overrides "$STAGE/usr/share/lintian/overrides/fiberize"

# changelog.Debian.gz: one entry for this version, dated by the last commit (the same
# tree gives the same package).
MAINTAINER=$(sed -n 's/^Upstream-Contact: //p' packaging/debian/copyright)
DATE=$(git log -1 --format=%aD 2>/dev/null || date -R)
COMMIT=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
{
    echo "fiberize ($DEB_VERSION) unstable; urgency=medium"
    echo
    echo "  * fiberize $VERSION, built from commit $COMMIT."
    echo
    echo " -- $MAINTAINER  $DATE"
} | gzip -9n > "$STAGE/usr/share/doc/fiberize/changelog.Debian.gz"

# Depends: what the library links against, as dpkg-shlibdeps finds it (it wants a
# debian/control, so it runs in a scratch folder).
SCRATCH=$(mktemp -d); trap 'rm -rf "$SCRATCH"' EXIT
mkdir "$SCRATCH/debian"
printf 'Source: fiberize\n\nPackage: fiberize\nArchitecture: any\n' > "$SCRATCH/debian/control"
DEPENDS=$(cd "$SCRATCH" && dpkg-shlibdeps -O "$ROOT/$STAGE$LIBDIR/libfiberize.so" 2>/dev/null | sed -n 's/^shlibs:Depends=//p')
[ -n "$DEPENDS" ] || { echo "package.sh: dpkg-shlibdeps found no dependencies" >&2; exit 1; }

SIZE=$(du -sk --exclude=DEBIAN "$STAGE" | cut -f1)
cat > "$STAGE/DEBIAN/control" <<CONTROL
Package: fiberize
Version: $DEB_VERSION
Architecture: $ARCH
Maintainer: $MAINTAINER
Installed-Size: $SIZE
Depends: $DEPENDS
Section: admin
Priority: optional
Description: run a program's POSIX threads as fibers (LD_PRELOAD library)
 libfiberize.so makes an unmodified, dynamically linked multithreaded program
 run its pthreads as fibers on a pool of one worker thread per CPU: blocking
 calls on locks, condition variables, sleeps, sockets and pipes park the fiber
 instead of the thread. Meant for servers with a thread per connection, such
 as MariaDB.
 .
 The package holds the library, the launcher fiberize(1), the header
 fiberize.h for per-worker storage, the manual page libfiberize(7) (the
 environment variables, the report, the dump, Prometheus metrics) and an
 example systemd drop-in for mariadb.service.
CONTROL
(cd "$STAGE" && find . -path ./DEBIAN -prune -o -type f -printf '%P\0' | LC_ALL=C sort -z | xargs -0 md5sum) > "$STAGE/DEBIAN/md5sums"
chmod 0644 "$STAGE/DEBIAN/control" "$STAGE/DEBIAN/md5sums"

DEB=$OUT/fiberize_${DEB_VERSION}_$ARCH.deb
dpkg-deb --root-owner-group -Zxz --build "$STAGE" "$DEB" >/dev/null
if [ "${NO_LINTIAN:-0}" != 1 ]; then
    if command -v lintian >/dev/null; then
        # An error or warning fails the build (--show-overrides would make lintian 2.116
        # exit 2 even when every tag is overridden); overrides are in
        # packaging/debian/lintian-overrides, each with its reason.
        lintian --fail-on error,warning --display-info "$DEB" >&2
    else
        echo "package.sh: lintian is not installed (apt-get install lintian): not checked" >&2
    fi
fi
echo "$DEB"
