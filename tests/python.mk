# python tests
#
# The Python client (clients/python: the package tomolive and its example) is not built or
# installed; it is distributed, and tested here against the built tomolived by
# tests/python/check_python.sh with the interpreter configure found ($PYTHON3: Debian's
# /usr/bin/python3 first, which has python3-zmq, -msgpack, -numpy, -matplotlib). The test
# is SKIP, with the reason, where that interpreter or its modules are missing.
TESTS += tests/python/check_python.sh
AM_TESTS_ENVIRONMENT += PYTHON3='$(PYTHON3)'; export PYTHON3;
EXTRA_DIST += \
	clients/python/tomolive/__init__.py \
	clients/python/tomolive/errors.py \
	clients/python/tomolive/protocol.py \
	clients/python/tomolive/pusher.py \
	clients/python/tomolive/subscriber.py \
	clients/python/tomolive/shm.py \
	clients/python/tomolive/control.py \
	clients/python/tomolive/keys.py \
	clients/python/examples/live_slice.py \
	tests/python/check_python.sh \
	tests/python/tlfixture.py \
	tests/python/test_protocol.py \
	tests/python/test_client.py \
	tests/python/test_tools.py \
	tests/python/test_security.py

# The man pages (daemon/tomolived.8, clients/tomolive.1, etc/tomolive.conf.5): groff renders
# them without warnings, and every option and configuration key of the programs is in them.
TESTS += tests/man/check_man.sh
EXTRA_DIST += tests/man/check_man.sh
