# protocol/ — wire protocol v1: message structs, msgpack codec, validation, zmq framing.
noinst_LIBRARIES += protocol/libtlproto.a
protocol_libtlproto_a_SOURCES = \
	protocol/protocol.h protocol/proto_internal.h \
	protocol/error.c protocol/names.c \
	protocol/precheck.c protocol/keys.c protocol/args.c \
	protocol/decode.c protocol/decode_ingest.c protocol/decode_cone.c \
	protocol/decode_control.c \
	protocol/decode_slice.c protocol/payload.c protocol/parts.c \
	protocol/encode.c protocol/multipart.c protocol/topic.c \
	protocol/shm.h protocol/shm.c protocol/pixels.h protocol/pixels.c \
	protocol/zcert.h protocol/zcert.c
protocol_libtlproto_a_CFLAGS = $(AM_CFLAGS) $(MSGPACK_CFLAGS) $(ZMQ_CFLAGS) $(LZ4_CFLAGS)
EXTRA_DIST += protocol/PROTOCOL.md

# what a program that speaks the protocol links
PROTO_CFLAGS = $(MSGPACK_CFLAGS) $(ZMQ_CFLAGS)
PROTO_LIBS = protocol/libtlproto.a $(MSGPACK_LIBS) $(ZMQ_LIBS) $(LZ4_LIBS)

# JSON <-> msgpack (tomolive ctl, the daemon's HTTP actions, test fixtures): a library of its
# own, so what speaks only msgpack does not link jansson
noinst_LIBRARIES += protocol/libtljson.a
protocol_libtljson_a_SOURCES = protocol/jsonpack.h protocol/jsonpack.c
protocol_libtljson_a_CFLAGS = $(AM_CFLAGS) $(JANSSON_CFLAGS) $(MSGPACK_CFLAGS)
JSONPACK_LIBS = protocol/libtljson.a $(JANSSON_LIBS) $(MSGPACK_LIBS)
