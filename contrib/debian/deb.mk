# SPDX-License-Identifier: Apache-2.0
# contrib/debian/deb.mk: `make deb` builds a Debian binary package of
# dlaunch with dpkg-deb, offline: the binaries (built again under
# $(DEB_BUILD) with Debian's hardening flags, and without CUDA, since a
# CUDA toolkit from outside Debian cannot be a declared dependency), the
# man pages, the bash completion, the systemd unit and the examples, as
# `make install PREFIX=/usr` lays them out. contrib/debian/mkdeb.sh then
# strips, compresses, declares the dependencies from what the binaries link
# (dpkg-shlibdeps) and builds the .deb into $(DEB_OUT).
#
#   make deb [DEB_OUT=DIR] [DEB_MAINTAINER='Name <mail>']

DEB_BUILD ?= $(BUILD)/deb
DEB_OUT   ?= $(BUILD)
DEB_MAINTAINER ?= dlaunch maintainers <dlaunch@example.org>
DEB_FLAGS_ENV := DEB_BUILD_MAINT_OPTIONS=hardening=+all
DEB_CFLAGS  = $(shell $(DEB_FLAGS_ENV) dpkg-buildflags --get CFLAGS) \
	$(shell $(DEB_FLAGS_ENV) dpkg-buildflags --get CPPFLAGS)
DEB_LDFLAGS = $(shell $(DEB_FLAGS_ENV) dpkg-buildflags --get LDFLAGS)
# the package's tree, where dpkg-shlibdeps expects it (debian/PACKAGE)
DEB_ROOT   = $(DEB_BUILD)/pkg/debian/dlaunch

.PHONY: deb
deb:
	@command -v dpkg-deb >/dev/null && command -v dpkg-shlibdeps >/dev/null \
		|| { echo "make deb needs dpkg-deb and dpkg-shlibdeps (dpkg-dev)" >&2; exit 1; }
	@$(MAKE) --no-print-directory BUILD=$(DEB_BUILD) NO_CUDA=1 SANITIZE= \
		EXTRA_CFLAGS='$(DEB_CFLAGS)' EXTRA_LDFLAGS='$(DEB_LDFLAGS)' \
		PREFIX=/usr man
	@rm -rf $(DEB_BUILD)/pkg
	@$(MAKE) --no-print-directory -s BUILD=$(DEB_BUILD) NO_CUDA=1 SANITIZE= \
		EXTRA_CFLAGS='$(DEB_CFLAGS)' EXTRA_LDFLAGS='$(DEB_LDFLAGS)' \
		PREFIX=/usr DESTDIR=$(abspath $(DEB_ROOT)) \
		SYSTEMD_UNIT_DIR=/lib/systemd/system install
	@mkdir -p $(DEB_OUT)
	@contrib/debian/mkdeb.sh $(DEB_ROOT) $(DEB_OUT) '$(DLAUNCH_VERSION)' \
		'$(DEB_MAINTAINER)'
