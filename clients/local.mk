# clients/ — the `tomolive` command line tool: one program, a subcommand per file
# (tomolive.c holds the dispatch table), and the image-file helpers the subcommands share.
noinst_LIBRARIES += clients/libtlimages.a
clients_libtlimages_a_SOURCES = \
	clients/tiff.h clients/tiff.c \
	clients/png.h clients/png.c
clients_libtlimages_a_CFLAGS = $(AM_CFLAGS) $(TIFF_CFLAGS) $(PNG_CFLAGS)
# what a program that reads or writes TIFF stacks or PNG previews links
IMAGE_LIBS = clients/libtlimages.a $(TIFF_LIBS) $(PNG_LIBS)

bin_PROGRAMS += clients/tomolive
clients_tomolive_SOURCES = \
	clients/tomolive.c clients/commands.h \
	clients/recon.c
clients_tomolive_CFLAGS = $(AM_CFLAGS) $(TIFF_CFLAGS) $(PNG_CFLAGS) $(FFTW_CFLAGS)
clients_tomolive_LDADD = clients/libtlimages.a $(ENGINE_LIBS) $(TIFF_LIBS) $(PNG_LIBS)
