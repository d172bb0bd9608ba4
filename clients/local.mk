# clients/ — the `tomolive` command line tool: one program, a subcommand per file
# (tomolive.c holds the dispatch table), and the helpers the subcommands share: image files,
# angle/index lists (JSON <-> msgpack is protocol/jsonpack.h).
noinst_LIBRARIES += clients/libtlimages.a
clients_libtlimages_a_SOURCES = \
	clients/tiff.h clients/tiff.c \
	clients/png.h clients/png.c
clients_libtlimages_a_CFLAGS = $(AM_CFLAGS) $(TIFF_CFLAGS) $(PNG_CFLAGS)
# what a program that reads or writes TIFF stacks or PNG previews links
IMAGE_LIBS = clients/libtlimages.a $(TIFF_LIBS) $(PNG_LIBS)

bin_PROGRAMS += clients/tomolive
clients_tomolive_SOURCES = \
	clients/tomolive.c clients/commands.h clients/cli.h clients/cli.c \
	clients/angles.h clients/angles.c clients/corr_opts.h clients/corr_opts.c \
	clients/cone_opts.h clients/cone_opts.c \
	clients/cone_read.h clients/cone_read.c clients/cone_read_rtk.c clients/npy.h clients/npy.c \
	clients/push.c clients/push_source.h clients/push_source.c \
	clients/push_ipc.h clients/push_ipc.c \
	clients/push_dectris.h clients/push_dectris.c \
	clients/push_socket.h clients/push_socket.c \
	clients/sub.c clients/ctl.c clients/keygen.c clients/recon.c clients/bench.c clients/phantom.c \
	clients/stream_bench.c clients/bench_volume.c clients/bench_engine.h clients/bench_engine.c clients/tune.c \
	clients/volume_plan.h clients/volume_plan.c clients/volume_bands.h clients/volume_bands.c clients/volume_stack.h clients/volume_stack.c \
	clients/volume_output.h clients/volume_output.c clients/volume_convert.h \
	clients/volume_vds.h clients/volume_vds.c clients/grid.h clients/grid.c \
	clients/grid_model.h clients/grid_model.c clients/grid_calibrate.c \
	clients/volume_convert.c clients/volume_pool.h clients/volume_pool.c \
	clients/volume_slab.h clients/volume_slab.c clients/volume_progress.h \
	clients/volume_progress.c clients/volume_pipeline.h clients/volume_pipeline.c \
	clients/phantom_scan.c clients/bench_volume_e2e.c clients/bench_volume_write.c \
	clients/bench_cone.c clients/bench_iterative.c clients/bench_tomosynthesis.c clients/iter_opts.h clients/iter_opts.c
clients_tomolive_CFLAGS = $(AM_CFLAGS) $(TIFF_CFLAGS) $(PNG_CFLAGS) $(FFTW_CFLAGS) \
	$(PROTO_CFLAGS) $(JANSSON_CFLAGS) $(CBOR_CFLAGS) $(LIBXML_CFLAGS) $(MPI_CFLAGS)
clients_tomolive_LDADD = clients/libtlimages.a $(JSONPACK_LIBS) $(PROTO_LIBS) \
	$(ENGINE_LIBS) $(TIFF_LIBS) $(PNG_LIBS) $(JANSSON_LIBS) $(CBOR_LIBS) $(LIBXML_LIBS) \
	$(MPI_LIBS)

# man page
dist_man1_MANS = clients/tomolive.1

# HDF5 scans (APS Data Exchange, NeXus NXtomo) for `tomolive recon` and `tomolive push --file`
clients_tomolive_SOURCES += clients/hdf5.h clients/hdf5.c
clients_tomolive_CFLAGS += $(HDF5_CFLAGS) $(ZLIB_CFLAGS)
clients_tomolive_LDADD += $(HDF5_LIBS) $(ZLIB_LIBS)
