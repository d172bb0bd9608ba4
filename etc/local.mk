# etc/ — the shipped configuration (commented defaults) and the systemd unit.

# etc/tomolive.conf is what tl_settings_write(defaults, with_help) prints; check_config
# fails when they drift apart. Regenerate it from the build directory with
#   tests/unit/check_config --print-default-conf > $(srcdir)/etc/tomolive.conf
tomoliveconfdir = $(sysconfdir)/tomolive
dist_tomoliveconf_DATA = etc/tomolive.conf

# The unit is made at make time, not by configure, so that it gets the final, expanded
# $(sbindir) and $(sysconfdir) (a make-time override of prefix included).
systemdsystemunit_DATA = etc/tomolived.service
EXTRA_DIST += etc/tomolived.service.in
CLEANFILES += etc/tomolived.service etc/tomolived.service.tmp
etc/tomolived.service: etc/tomolived.service.in Makefile
	$(AM_V_GEN)$(MKDIR_P) $(@D) && \
	$(SED) -e 's|@sbindir[@]|$(sbindir)|g' -e 's|@sysconfdir[@]|$(sysconfdir)|g' \
		$(srcdir)/etc/tomolived.service.in > $@.tmp && mv $@.tmp $@

# make distcheck installs under its own prefix; without this the unit would go to the
# host's systemd directory, outside it.
AM_DISTCHECK_CONFIGURE_FLAGS = --with-systemdsystemunitdir=$$dc_install_base/$(systemdsystemunitdir)

# tomolive.conf(5): a template whose KEYS section is made at build time from etc/tomolive.conf
# (the config table's own output, see above) by conf2man.awk, so it lists every key there is.
nodist_man5_MANS = etc/tomolive.conf.5
EXTRA_DIST += etc/tomolive.conf.5.in etc/conf2man.awk
CLEANFILES += etc/tomolive.conf.5 etc/tomolive.conf.5.tmp
etc/tomolive.conf.5: etc/tomolive.conf.5.in etc/tomolive.conf etc/conf2man.awk
	$(AM_V_GEN)$(MKDIR_P) $(@D) && \
	$(AWK) -v conf=$(srcdir)/etc/tomolive.conf -f $(srcdir)/etc/conf2man.awk \
		$(srcdir)/etc/tomolive.conf.5.in > $@.tmp && mv $@.tmp $@
