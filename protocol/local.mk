# protocol/ — wire protocol v1: message structs, msgpack codec, validation, zmq framing.
noinst_LIBRARIES += protocol/libtlproto.a
protocol_libtlproto_a_SOURCES = \
	protocol/protocol.h
protocol_libtlproto_a_CFLAGS = $(AM_CFLAGS) $(MSGPACK_CFLAGS) $(ZMQ_CFLAGS)
EXTRA_DIST += protocol/PROTOCOL.md

# what a program that speaks the protocol links
PROTO_CFLAGS = $(MSGPACK_CFLAGS) $(ZMQ_CFLAGS)
PROTO_LIBS = protocol/libtlproto.a $(MSGPACK_LIBS) $(ZMQ_LIBS)
