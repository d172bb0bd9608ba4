# http tests: the preview page, /metrics and /api/status (daemon/http.h)

# the pure parts: preview images, Prometheus text (strict checker), routing
check_PROGRAMS += tests/unit/check_http
TESTS += tests/unit/check_http
tests_unit_check_http_SOURCES = tests/unit/check_http.c \
	tests/unit/check_http_expo.h tests/unit/check_http_expo.c
tests_unit_check_http_CFLAGS = $(AM_CFLAGS) $(CHECK_CFLAGS) $(PROTO_CFLAGS)
tests_unit_check_http_LDADD = $(HTTP_CORE_LIBS) $(DAEMON_CORE_LIBS) $(PROTO_LIBS) $(TEST_LIBS)

# a real tomolived serving HTTP on a free loopback port: pages, 404, /metrics against
# status, /api/status, WebSocket preview images, pinning, a reader that never reads
check_PROGRAMS += tests/integration/check_http_daemon
TESTS += tests/integration/check_http_daemon
tests_integration_check_http_daemon_SOURCES = tests/integration/check_http_daemon.c \
	tests/unit/check_http_expo.h tests/unit/check_http_expo.c
tests_integration_check_http_daemon_CFLAGS = $(AM_CFLAGS) $(CHECK_CFLAGS) $(PROTO_CFLAGS) $(JANSSON_CFLAGS)
tests_integration_check_http_daemon_LDADD = $(HTTP_CORE_LIBS) $(FIXTURE_LIBS) $(ENGINE_LIBS) $(TEST_LIBS)

# the page in headless Chromium over the DevTools protocol (skips without chromium or
# python3-websocket); leaves its screenshots in tests/integration/check_http_browser*.png
TESTS += tests/integration/check_http_browser.py
EXTRA_DIST += tests/integration/check_http_browser.py
CLEANFILES += tests/integration/check_http_browser.png tests/integration/check_http_browser-moved.png
