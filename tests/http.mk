# http tests: the preview page, /metrics and /api/status (daemon/serve/http.h)

# the pure parts, one program per module: preview images, Prometheus text (strict
# checker), routing
HTTP_UNIT_TESTS = tests/unit/check_preview tests/unit/check_metrics tests/unit/check_http
check_PROGRAMS += $(HTTP_UNIT_TESTS)
TESTS += $(HTTP_UNIT_TESTS)
HTTP_UNIT_CFLAGS = $(AM_CFLAGS) $(CHECK_CFLAGS) $(PROTO_CFLAGS)
HTTP_UNIT_LIBS = $(HTTP_CORE_LIBS) $(DAEMON_CORE_LIBS) $(PROTO_LIBS) $(TEST_LIBS)
tests_unit_check_preview_SOURCES = tests/unit/check_preview.c
tests_unit_check_preview_CFLAGS = $(HTTP_UNIT_CFLAGS)
tests_unit_check_preview_LDADD = $(HTTP_UNIT_LIBS)
tests_unit_check_metrics_SOURCES = tests/unit/check_metrics.c \
	tests/unit/check_http_expo.h tests/unit/check_http_expo.c
tests_unit_check_metrics_CFLAGS = $(HTTP_UNIT_CFLAGS)
tests_unit_check_metrics_LDADD = $(HTTP_UNIT_LIBS)
tests_unit_check_http_SOURCES = tests/unit/check_http.c
tests_unit_check_http_CFLAGS = $(HTTP_UNIT_CFLAGS)
tests_unit_check_http_LDADD = $(HTTP_UNIT_LIBS) $(DAEMON_UTIL_LIBS)

# an HTTP client and a daemon with HTTP on a free loopback port (tests/http_client.h), a
# WebSocket client (tests/ws_client.h) and the strict Prometheus checker, for the tests
# that talk to a real daemon's HTTP server
noinst_LIBRARIES += tests/libtlhttpclient.a
tests_libtlhttpclient_a_SOURCES = tests/http_client.h tests/http_client.c \
	tests/ws_client.h tests/ws_client.c \
	tests/unit/check_http_expo.h tests/unit/check_http_expo.c
tests_libtlhttpclient_a_CFLAGS = $(AM_CFLAGS) $(CHECK_CFLAGS) $(PROTO_CFLAGS) $(JANSSON_CFLAGS)
HTTP_CLIENT_LIBS = tests/libtlhttpclient.a

# a real tomolived serving HTTP on a free loopback port: pages, 404, /metrics against
# status, /api/status, WebSocket preview images, pinning, a reader that never reads
check_PROGRAMS += tests/integration/check_http_daemon
TESTS += tests/integration/check_http_daemon
tests_integration_check_http_daemon_SOURCES = tests/integration/check_http_daemon.c
tests_integration_check_http_daemon_CFLAGS = $(AM_CFLAGS) $(CHECK_CFLAGS) $(PROTO_CFLAGS) $(JANSSON_CFLAGS)
tests_integration_check_http_daemon_LDADD = $(HTTP_CLIENT_LIBS) $(HTTP_CORE_LIBS) $(FIXTURE_LIBS) \
	$(ENGINE_LIBS) $(TEST_LIBS)

# who may come in (issue 27): Origin refused and allowed (the reviewer's attack: a foreign
# page's WebSocket moving the centre), the operator token over WebSocket and HTTP, views
# open and closed, a bad token file, security headers on every route
check_PROGRAMS += tests/integration/check_http_access
TESTS += tests/integration/check_http_access
tests_integration_check_http_access_SOURCES = tests/integration/check_http_access.c
tests_integration_check_http_access_CFLAGS = $(AM_CFLAGS) $(CHECK_CFLAGS) $(PROTO_CFLAGS) $(JANSSON_CFLAGS)
tests_integration_check_http_access_LDADD = $(HTTP_CLIENT_LIBS) $(HTTP_CORE_LIBS) $(FIXTURE_LIBS) $(ENGINE_LIBS) $(TEST_LIBS)

# HTTPS and WSS with a certificate made at test time (skips without openssl or
# python3-websocket)
TESTS += tests/integration/check_http_tls.py
EXTRA_DIST += tests/integration/check_http_tls.py

# what anyone on the network can send: a bare connect, TLS, unknown methods, %00, absolute
# URLs, oversized lines, malformed headers, 200 idle connections dropped; HEAD and 405
check_PROGRAMS += tests/integration/check_http_hostile
TESTS += tests/integration/check_http_hostile
tests_integration_check_http_hostile_SOURCES = tests/integration/check_http_hostile.c
tests_integration_check_http_hostile_CFLAGS = $(AM_CFLAGS) $(CHECK_CFLAGS) $(PROTO_CFLAGS) $(JANSSON_CFLAGS)
tests_integration_check_http_hostile_LDADD = $(HTTP_CLIENT_LIBS) $(HTTP_CORE_LIBS) $(FIXTURE_LIBS) $(ENGINE_LIBS) $(TEST_LIBS)

# the page in headless Chromium over the DevTools protocol (skips without chromium or
# python3-websocket); leaves its screenshots in tests/integration/check_http_browser*.png
TESTS += tests/integration/check_http_browser.py
EXTRA_DIST += tests/integration/check_http_browser.py
CLEANFILES += tests/integration/check_http_browser.png tests/integration/check_http_browser-moved.png
