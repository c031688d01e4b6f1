# Write a one-layer OCI image tarball for `ctr images import` (sourced).
# oci_image_tar NAME BINARY PATH_IN_IMAGE OUT.tar
#   NAME is the full reference (sandcheck.local/pause:3.10); the image holds
#   only BINARY at PATH_IN_IMAGE, which is also its entrypoint.
oci_image_tar() {
	local name=$1 binary=$2 path=$3 out=$4
	local work
	work=$(mktemp -d)
	mkdir -p "$work/rootfs/$(dirname "$path")" "$work/img/blobs/sha256"
	install -m 0755 "$binary" "$work/rootfs/$path"
	tar --numeric-owner --owner=0 --group=0 --mtime=@0 --sort=name -C "$work/rootfs" -cf "$work/layer.tar" .
	local ldig lsize
	ldig=$(sha256sum "$work/layer.tar" | cut -d' ' -f1)
	lsize=$(stat -c %s "$work/layer.tar")
	mv "$work/layer.tar" "$work/img/blobs/sha256/$ldig"
	printf '{"architecture":"amd64","os":"linux","config":{"Entrypoint":["%s"]},"rootfs":{"type":"layers","diff_ids":["sha256:%s"]}}' \
		"$path" "$ldig" >"$work/config.json"
	local cdig csize
	cdig=$(sha256sum "$work/config.json" | cut -d' ' -f1)
	csize=$(stat -c %s "$work/config.json")
	mv "$work/config.json" "$work/img/blobs/sha256/$cdig"
	printf '{"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json","config":{"mediaType":"application/vnd.oci.image.config.v1+json","digest":"sha256:%s","size":%d},"layers":[{"mediaType":"application/vnd.oci.image.layer.v1.tar","digest":"sha256:%s","size":%d}]}' \
		"$cdig" "$csize" "$ldig" "$lsize" >"$work/manifest.json"
	local mdig msize
	mdig=$(sha256sum "$work/manifest.json" | cut -d' ' -f1)
	msize=$(stat -c %s "$work/manifest.json")
	mv "$work/manifest.json" "$work/img/blobs/sha256/$mdig"
	printf '{"schemaVersion":2,"manifests":[{"mediaType":"application/vnd.oci.image.manifest.v1+json","digest":"sha256:%s","size":%d,"platform":{"architecture":"amd64","os":"linux"},"annotations":{"io.containerd.image.name":"%s","org.opencontainers.image.ref.name":"%s"}}]}' \
		"$mdig" "$msize" "$name" "${name##*:}" >"$work/img/index.json"
	printf '{"imageLayoutVersion":"1.0.0"}' >"$work/img/oci-layout"
	tar --numeric-owner --owner=0 --group=0 -C "$work/img" -cf "$out" .
	rm -rf "$work"
}
