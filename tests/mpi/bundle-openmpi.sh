#!/bin/sh
# Debian's Open MPI (openmpi-bin and its libraries, as installed here) packed into a device
# bundle (../shared/device/bundle) for a machine that has no MPI, such as the GPU machine:
# mpirun, orted, the libraries and their plugins under DIR/openmpi, relocated there by
# OPAL_PREFIX (Open MPI's paths are relative to its prefix), PMIx's by
# PMIX_INSTALL_PREFIX and its plugins' path (a host may have a PMIx of its own, another
# version, where Debian's was); the libraries they link that such a machine may lack into DIR/lib;
# the environment appended to DIR/env.sh.
#   tests/mpi/bundle-openmpi.sh .devbundle     (after ../shared/device/bundle . .devbundle)
set -e
dir=$(cd "${1:?usage: bundle-openmpi.sh BUNDLE_DIR}" && pwd)
[ -f "$dir/env.sh" ] || { echo "bundle-openmpi.sh: $dir has no env.sh (bundle it first)" >&2; exit 1; }
arch=$(dpkg-architecture -qDEB_HOST_MULTIARCH 2>/dev/null || echo x86_64-linux-gnu)
p=$dir/openmpi
rm -rf "$p"
mkdir -p "$p/bin" "$p/lib/$arch" "$p/share"
cp /usr/bin/orterun "$p/bin/mpirun"
cp /usr/bin/orted /usr/bin/ompi_info "$p/bin/"
cp -a "/usr/lib/$arch/openmpi" "/usr/lib/$arch/pmix2" "$p/lib/$arch/"
rm -rf "$p/lib/$arch/openmpi/include" "$p/lib/$arch/openmpi/lib/"*java*
cp -a /usr/share/openmpi "$p/share/"
find "$p" -type f \( -name '*.so*' -o -path '*/bin/*' \) -exec ldd {} \; 2>/dev/null |
    awk '$3 ~ /^\// {print $3}' | sort -u |
    grep -v -E '/(libc|libm|libdl|libpthread|librt|ld-linux[^/]*|libcuda|libcudart)\.so' |
    grep -v -E "/(openmpi|pmix2)/" |
    while read -r l; do [ -e "$dir/lib/$(basename "$l")" ] || cp -L "$l" "$dir/lib/"; done
cat >>"$dir/env.sh" <<EOS
# Open MPI (tests/mpi/bundle-openmpi.sh)
export OPAL_PREFIX=\$b/openmpi PMIX_INSTALL_PREFIX=\$b/openmpi/lib/$arch/pmix2
export PMIX_MCA_mca_base_component_path=\$b/openmpi/lib/$arch/pmix2/lib/pmix
export PATH=\$b/openmpi/bin:\$PATH
export LD_LIBRARY_PATH=\$b/openmpi/lib/$arch/openmpi/lib:\$b/openmpi/lib/$arch/pmix2/lib:\$LD_LIBRARY_PATH
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 TL_MPIRUN=\$b/openmpi/bin/mpirun
EOS
echo "bundle-openmpi.sh: $(du -sh "$p" | cut -f1) in $p"
